#include "volumemanager/disk/volume_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "atomicwriter/open_beneath.h"
#include "atomicwriter/remove_tree.h"
#include "base/errno_error.h"
#include "base/strings.h"
#include "base/unique_fd.h"
#include "volumemanager/disk/write_gate.h"
#include "volumemanager/state/volume_paths.h"

namespace volumemanager {
namespace {

constexpr mode_t kPodDirMode = 0750;
constexpr mode_t kVolumeDirMode = 0777;

using atomicwriter::Env;
using base::ErrnoError;
using base::UniqueFd;

base::Status CheckLocation(const VolumeLocation& loc) {
  for (auto [value, what] :
       {std::pair{&loc.pod_uid, "pod UID"}, std::pair{&loc.plugin_dir, "plugin dir"},
        std::pair{&loc.volume_name, "volume name"}}) {
    base::Status s = CheckPathComponent(*value, what);
    if (!s.ok()) return s;
  }
  return base::Status::OK();
}

base::Result<UniqueFd> OpenRoot(Env& env, const std::string& root_dir) {
  auto fd = atomicwriter::OpenRootDir(env, root_dir);
  if (!fd.ok()) return fd.status();
  return UniqueFd(*fd);
}

// The directory holding `rel` (beneath `root`, no link followed) and the last name of `rel`. The
// root itself (a dup of it) for a one-name path.
base::Result<UniqueFd> OpenParentBeneath(Env& env, int root, const std::string& root_dir,
                                         const std::string& rel, std::string* name) {
  const int fd = atomicwriter::OpenParentBeneath(env, root, rel, name);
  if (fd < 0) {
    const size_t slash = rel.rfind('/');
    return atomicwriter::OpenBeneathError(
        root_dir + "/" + (slash == std::string::npos ? rel : rel.substr(0, slash)), errno);
  }
  return UniqueFd(fd);
}

// Whether the open directory `fd` is the root of a mount: its parent (`..` crosses up out of a
// mount) is on another mount. Mount ids, not st_dev: a bind mount of the same filesystem counts.
base::Result<bool> IsMountRoot(Env& env, int fd, const std::string& shown) {
  const UniqueFd parent(env.OpenAt(fd, "..", O_PATH | O_DIRECTORY, 0));
  if (!parent.valid()) return ErrnoError("open the parent of", shown, errno);
  uint64_t here = 0;
  uint64_t above = 0;
  if (env.MountId(fd, &here) != 0 || env.MountId(parent.get(), &above) != 0) {
    return ErrnoError("read the mount of", shown, errno);
  }
  return here != above;
}

bool IsEmptyDir(Env& env, int fd) {
  std::vector<atomicwriter::DirEntry> entries;
  return env.ReadDir(fd, &entries) == 0 && entries.empty();
}

// Unmounts the tmpfs mounted on the open volume dir `fd` (a mount root): only a whole tmpfs, as
// the daemon mounts it; any other mount there is not the daemon's and stays. Through
// /proc/self/fd/N, so the unmount acts on the checked dir whatever its path now resolves to.
// Detached: the descriptor held here (and any reader's, or a container's bind) keeps it busy; the
// kernel frees it when the last user goes.
base::Status UnmountOwnTmpfs(Env& env, int fd, const std::string& shown) {
  uint64_t id = 0;
  atomicwriter::MountInfo info;
  if (env.MountId(fd, &id) != 0) return ErrnoError("read the mount of", shown, errno);
  if (!env.FindMount(id, &info)) {
    const base::Status why = atomicwriter::MountLookupError(shown, errno);
    return base::Status::Error(why.message() + "; left in place", why.sys_errno());
  }
  if (info.fs_type != "tmpfs" || info.root != "/") {
    return base::Status::Error(shown + ": a mount point of " + info.fs_type + " (" + info.source +
                                   ", root " + info.root +
                                   ") that volumemanager did not make; left in place, not "
                                   "unmounted, nothing below it removed",
                               EXDEV);
  }
  if (env.Unmount(fd, MNT_DETACH) != 0) {
    return ErrnoError("unmount", shown, errno);
  }
  return base::Status::OK();
}

// Mounts a tmpfs on the open dir `fd` (no options, as the kubelet: the root shows mode 1777),
// through /proc/self/fd/N. Returns whether it mounted; an unprivileged process gets a plain
// directory and one warning.
base::Result<bool> MountTmpfs(Env& env, int fd, const std::string& shown) {
  if (env.Mount("tmpfs", fd, "tmpfs", 0, "") == 0) return true;
  if (errno != EPERM && errno != EACCES) return ErrnoError("mount tmpfs on", shown, errno);
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    spdlog::warn(
        "cannot mount tmpfs ({}): secret, downwardAPI and projected volumes are written to the "
        "node's disk; run privileged (CAP_SYS_ADMIN) or pass --no-tmpfs to silence this",
        std::strerror(errno));
  }
  return false;
}

// Serializes, within this process, the creation and removal of one pod's directories above its
// volume dirs (pod dir, volumes dir, plugin dirs) together with their ownership records: two
// volumes of one pod set up at once on two pool threads must not both record the pod dir, and
// the one whose mkdir finds it made by the other then drop the other's record. Striped by pod
// UID, so that first mounts of different pods still run (and commit their records) together.
std::mutex& PodDirsMutex(const std::string& pod_uid) {
  static std::mutex stripes[64];
  return stripes[std::hash<std::string>{}(pod_uid) % 64];
}

// Removes the volume dir `rel` beneath `root`: its tmpfs unmounted first when it has the daemon's,
// then the tree, never crossing into another mount nor following a link. A missing dir is done.
base::Status RemoveVolumeDir(Env& env, int root, const std::string& root_dir,
                             const std::string& rel) {
  const std::string shown = root_dir + "/" + rel;
  std::string name;
  auto parent = OpenParentBeneath(env, root, root_dir, rel, &name);
  if (!parent.ok()) {
    return parent.status().sys_errno() == ENOENT ? base::Status::OK() : parent.status();
  }
  UniqueFd vol(env.OpenAt(parent->get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0));
  if (!vol.valid()) {
    if (errno == ENOENT) return base::Status::OK();
    return atomicwriter::OpenBeneathError(shown, errno);
  }
  auto mounted = IsMountRoot(env, vol.get(), shown);
  if (!mounted.ok()) return mounted.status();
  if (*mounted) {
    // The content goes with the tmpfs; nothing of it is read or followed.
    if (base::Status u = UnmountOwnTmpfs(env, vol.get(), shown); !u.ok()) return u;
    vol.reset(env.OpenAt(parent->get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0));
    if (!vol.valid()) {
      if (errno == ENOENT) return base::Status::OK();
      return atomicwriter::OpenBeneathError(shown, errno);
    }
    mounted = IsMountRoot(env, vol.get(), shown);
    if (!mounted.ok()) return mounted.status();
    if (*mounted) {
      return base::Status::Error(shown +
                                     ": still a mount point after its tmpfs was unmounted "
                                     "(mounts stacked on it); left in place",
                                 EXDEV);
    }
  }
  vol.reset();
  return atomicwriter::RemoveTreeAt(env, parent->get(), name, shown);
}

// rmdir of `rel` beneath `root` (no link followed on the way; a link or file at `rel` itself
// fails with ENOTDIR and stays). 0, or -1 with errno.
int RemoveEmptyDirBeneath(Env& env, int root, const std::string& root_dir, const std::string& rel) {
  std::string name;
  auto parent = OpenParentBeneath(env, root, root_dir, rel, &name);
  if (!parent.ok()) {
    errno = parent.status().sys_errno() != 0 ? parent.status().sys_errno() : EINVAL;
    return -1;
  }
  return env.UnlinkAt(parent->get(), name, AT_REMOVEDIR);
}

// Removes what a failed first mount created (`created`: paths relative to the root dir): the
// volume dir with its content, the parent dirs only while empty (another volume of the same pod
// may be mounting into them right now), and releases in the journal what this call recorded and
// what was not left behind.
void Undo(Env& env, int root, const std::vector<std::string>& created,
          const std::string& volume_rel, OwnershipJournal& journal,
          const std::vector<OwnedPath>& recorded, const VolumeLocation& loc) {
  std::lock_guard<std::mutex> lock(PodDirsMutex(loc.pod_uid));
  std::vector<std::string> left;
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    if (*it == volume_rel) {
      if (!RemoveVolumeDir(env, root, loc.root_dir, *it).ok()) left.push_back(*it);
    } else if (RemoveEmptyDirBeneath(env, root, loc.root_dir, *it) != 0 && errno != ENOENT) {
      left.push_back(*it);
    }
  }
  std::vector<OwnedPath> release;
  for (const OwnedPath& p : recorded) {
    if (std::find(left.begin(), left.end(), p.path) == left.end()) release.push_back(p);
  }
  journal.Remove(release).IgnoreError();  // an entry for a missing path is dropped at next start
}

// The atomic writer for an existing volume dir, opened beneath the root without following a link.
// `owned`: the ownership journal lists the volume, so no other writer touches it, and the version
// a write replaces may go at once where deferring its removal costs more (ext4 without a journal).
base::Result<std::unique_ptr<atomicwriter::AtomicWriter>> OpenWriter(Env& env, int root,
                                                                     const std::string& rel,
                                                                     const std::string& dir,
                                                                     const SetUpRequest& request,
                                                                     bool owned) {
  atomicwriter::Options options;
  options.fs = &env;
  options.durable = request.durable;
  options.ledger = request.ledger;
  options.unpublished_grace = request.unpublished_grace;
  options.removals = request.removals;
  if (owned) options.replaced_version = atomicwriter::ReplacedVersion::kAtOnceWhereFreedInodesWait;
  // One writer per node: the gate of the operation this write runs in (OperationExecutor) is
  // asked once more right before `..data` is renamed; a write whose lock was lost since it
  // started publishes nothing and ends as cancelled.
  if (const WriteGate* gate = WriteGate::Current(); gate != nullptr) {
    options.may_publish = [gate] { return gate->Open() ? base::Status::OK() : CancelledStatus(); };
  }
  return atomicwriter::AtomicWriter::OpenBeneath(root, request.location.root_dir, rel, dir,
                                                 options);
}

// Whether a volume dir that holds a `..data` entry (the common case: a live volume) may instead
// be empty: only then are the emptiness and mount checks worth their system calls.
bool MayBeEmpty(Env& env, int dir_fd) {
  struct stat st {};
  return env.FstatAt(dir_fd, atomicwriter::kDataDirName, &st, AT_SYMLINK_NOFOLLOW) != 0;
}

// The version dir that `..data` of the open volume dir `vol` (shown as `dir`) publishes, opened
// beneath `vol` without following any link: `..data` is read as a link (the kernel never follows
// it here) whose target must be one name beginning with `..` (a sibling version dir, as every
// writer makes it), itself a directory, not a link. -1 when `..data` or its version is missing or
// `..data` is no link (not set up); an error for a target that is no version dir of the volume
// (an absolute path, `../x`, `..` itself) or a link or a file in its place: none is followed.
base::Result<int> OpenDataVersion(Env& env, int vol, const std::string& dir,
                                  std::string* version_out = nullptr) {
  std::string version;
  if (env.ReadlinkAt(vol, atomicwriter::kDataDirName, &version) != 0) {
    if (errno == ENOENT || errno == EINVAL) return -1;  // none, or not a link
    return base::ErrnoError("readlink", dir + "/" + atomicwriter::kDataDirName, errno);
  }
  if (version.size() >= 256 || !version.starts_with("..") || version == ".." ||
      version.find('/') != std::string::npos) {
    return base::Status::Error(dir + "/" + atomicwriter::kDataDirName + " points at \"" +
                               base::ShowNul(version.substr(0, 100)) +
                               "\", not a version dir of the volume: not followed");
  }
  const int fd = atomicwriter::OpenBeneath(env, vol, version, O_RDONLY | O_DIRECTORY);
  if (fd < 0) {
    if (errno == ENOENT) return -1;  // ..data dangles
    return atomicwriter::OpenBeneathError(dir + "/" + version, errno);
  }
  if (version_out != nullptr) *version_out = version;
  return fd;
}

// The regular files beneath the open dir `dir_fd` (taken over and closed), each rounded up to
// whole pages; links are not followed, and no more than `depth` levels are entered.
uint64_t PageBytesBeneath(Env& env, int dir_fd, uint64_t page, int depth) {
  const UniqueFd dir(dir_fd);
  std::vector<atomicwriter::DirEntry> entries;
  if (env.ReadDir(dir.get(), &entries) != 0) return 0;
  uint64_t bytes = 0;
  for (const atomicwriter::DirEntry& e : entries) {
    struct stat st {};
    if (env.FstatAt(dir.get(), e.name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      bytes += (static_cast<uint64_t>(st.st_size) + page - 1) / page * page;
    } else if (S_ISDIR(st.st_mode) && depth > 0) {
      const int sub = env.OpenAt(dir.get(), e.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
      if (sub >= 0) bytes += PageBytesBeneath(env, sub, page, depth - 1);
    }
  }
  return bytes;
}

// KubeletHasSetUp on the open volume dir (shown as `dir`).
base::Result<bool> KubeletHasSetUpAt(Env& env, int vol, const std::string& dir) {
  // The kubelet publishes `..data` first and creates the top-level links after it. A write that
  // starts in between would create a link the kubelet is about to create, and the kubelet's
  // symlink would fail with EEXIST (a FailedMount for the user). So the set-up counts as done
  // once every top-level name of the live version exists too. (`..data` is read as a link and
  // only a version dir beside it is opened, beneath the volume dir: OpenDataVersion.)
  base::Result<int> data = OpenDataVersion(env, vol, dir);
  if (!data.ok()) return data.status();
  if (*data < 0) return false;
  const UniqueFd version(*data);
  std::vector<atomicwriter::DirEntry> entries;
  if (env.ReadDir(version.get(), &entries) != 0) {
    return base::ErrnoError("list", dir + "/" + atomicwriter::kDataDirName, errno);
  }
  struct stat st {};
  for (const atomicwriter::DirEntry& e : entries) {
    if (env.FstatAt(vol, e.name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  }
  return true;
}

// The inode number the directory `fd` lists for `name` (d_ino: the entry's own inode, also when
// a mount covers it). 0 when there is no such entry; -1 with errno on a failure to list.
int64_t ListedInode(Env& env, int fd, const std::string& name) {
  std::vector<atomicwriter::DirEntry> entries;
  if (env.ReadDir(fd, &entries) != 0) return -1;
  for (const atomicwriter::DirEntry& e : entries) {
    if (e.name == name) return static_cast<int64_t>(e.ino);
  }
  return 0;
}

// "volume "c" of pod ns/name (UID u)", or "volume "c" of pod UID u" when the name is not known.
std::string VolumeOfPod(const SetUpRequest& request) {
  const VolumeLocation& loc = request.location;
  return "volume \"" + loc.volume_name + "\" of pod " +
         (request.pod.empty() ? "UID " + loc.pod_uid : request.pod + " (UID " + loc.pod_uid + ")");
}

// The refusal of an existing volume dir the journal does not list: `why` continues "<dir> already
// exists".
std::string RefusedAdoption(const SetUpRequest& request, const std::string& dir,
                            const std::string& why) {
  return VolumeOfPod(request) + ": " + dir + " already exists " + why +
         ": not set up by volumemanager; refused, nothing written, left in place";
}

}  // namespace

base::Result<VolumeDirCheck> CheckOwnedVolumeDir(Env& env, int root, const VolumeLocation& loc,
                                                 uint64_t recorded_inode) {
  VolumeDirCheck out;
  const std::string dir = loc.dir();
  // pods/, the pod dir, volumes/, the plugin dir: each opened beneath the root, no link followed.
  const std::string levels[] = {"pods", OwnershipJournal::PodPath(loc.pod_uid),
                                OwnershipJournal::PodVolumesPath(loc.pod_uid),
                                OwnershipJournal::PluginPath(loc.pod_uid, loc.plugin_dir)};
  UniqueFd plugin;
  uint64_t first_mount = 0;
  for (const std::string& rel : levels) {
    UniqueFd fd(atomicwriter::OpenBeneath(env, root, rel, O_RDONLY | O_DIRECTORY));
    if (!fd.valid()) {
      if (errno == ENOENT) {
        out.missing = true;
        return out;
      }
      return atomicwriter::OpenBeneathError(loc.root_dir + "/" + rel, errno);
    }
    uint64_t mount = 0;
    if (env.MountId(fd.get(), &mount) != 0) {
      return ErrnoError("read the mount of", loc.root_dir + "/" + rel, errno);
    }
    if (rel == levels[0]) {
      first_mount = mount;
    } else if (mount != first_mount) {
      out.foreign = true;
      out.reason = loc.root_dir + "/" + rel + " is on another mount than " + loc.root_dir +
                   "/pods (a mount or bind mount over it)";
      return out;
    }
    plugin = std::move(fd);
  }
  // The root's filesystem: the journal's identity (reconstruction compared the two at start).
  struct statfs root_fs {};
  struct statfs plugin_fs {};
  if (env.Fstatfs(root, &root_fs) != 0) return ErrnoError("statfs", loc.root_dir, errno);
  if (env.Fstatfs(plugin.get(), &plugin_fs) != 0) {
    return ErrnoError("statfs", loc.root_dir + "/" + levels[3], errno);
  }
  if (root_fs.f_type != plugin_fs.f_type ||
      std::memcmp(&root_fs.f_fsid, &plugin_fs.f_fsid, sizeof(root_fs.f_fsid)) != 0) {
    out.foreign = true;
    out.reason = loc.root_dir + "/" + levels[3] + " is on another filesystem than the root dir";
    return out;
  }
  struct stat st {};
  if (env.FstatAt(plugin.get(), loc.volume_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      out.missing = true;
      return out;
    }
    return ErrnoError("stat", dir, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    out.foreign = true;
    out.reason = dir + " is no longer a directory";
    return out;
  }
  // The dir's own inode: st_ino unless a mount covers it (a tmpfs volume, or any other mount:
  // mount ids, so a bind of the same filesystem counts), then the entry's.
  uint64_t inode = st.st_ino;
  const UniqueFd vol(
      env.OpenAt(plugin.get(), loc.volume_name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0));
  uint64_t vol_mount = 0;
  if (!vol.valid()) {
    if (errno == ENOENT) {
      out.missing = true;
      return out;
    }
    return atomicwriter::OpenBeneathError(dir, errno);
  }
  if (env.MountId(vol.get(), &vol_mount) != 0) {
    return ErrnoError("read the mount of", dir, errno);
  }
  if (vol_mount != first_mount) {
    const int64_t listed = ListedInode(env, plugin.get(), loc.volume_name);
    if (listed < 0) return ErrnoError("list", loc.root_dir + "/" + levels[3], errno);
    if (listed == 0) {
      out.missing = true;
      return out;
    }
    inode = static_cast<uint64_t>(listed);
  }
  out.inode = inode;
  if (recorded_inode != 0 && inode != recorded_inode) {
    out.foreign = true;
    out.reason = dir + " is inode " + std::to_string(inode) + ", not the directory " +
                 std::to_string(recorded_inode) + " volumemanager made";
  }
  return out;
}

namespace {

// A check of the volume dir that the journal lists as the daemon's, before a write into it
// through `writer`: two fstat calls when the dir is the recorded inode on the root's device (the
// volume dir's is the one the write then starts from: AtomicWriter::StatDir), the whole walk
// otherwise (a tmpfs on it, or no identity recorded). A dir that is not the daemon's is
// released, noted, and refused.
base::Status CheckBeforeWrite(Env& env, int root, const struct stat* root_st,
                              const SetUpRequest& request, const std::string& rel,
                              OwnershipJournal& journal, atomicwriter::AtomicWriter& writer) {
  const VolumeLocation& loc = request.location;
  const uint64_t recorded = journal.VolumeInode(rel);
  struct stat vst {};
  struct stat rst {};
  if (root_st != nullptr) rst = *root_st;
  if (recorded != 0 && writer.StatDir(&vst) == 0 &&
      (root_st != nullptr || env.Fstat(root, &rst) == 0) && vst.st_dev == rst.st_dev &&
      vst.st_ino == recorded) {
    return base::Status::OK();
  }
  auto check = CheckOwnedVolumeDir(env, root, loc, recorded);
  if (!check.ok()) return check.status();
  if (!check->foreign) return base::Status::OK();
  journal.Remove({OwnedPath{OwnedKind::kVolume, rel}}).IgnoreError();
  journal.NoteForeignVolumeDir(rel, check->reason);
  return base::Status::Error(VolumeOfPod(request) + ", " + loc.dir() + ": " + check->reason +
                                 "; not the volume dir volumemanager set up: released from its "
                                 "ownership, nothing written, left in place",
                             EXDEV);
}

// Whether the existing volume dir `vol_fd` that the journal does not list may be written: on the
// pod dir's mount and the root's filesystem, and empty or a volume a writer set up (its `..data`
// names a version dir of its own). Anything else holds what no volume writer made.
base::Status CheckAdoption(Env& env, int root, const SetUpRequest& request, int vol_fd,
                           const std::string& dir) {
  auto check = CheckOwnedVolumeDir(env, root, request.location, 0);
  if (!check.ok()) return check.status();
  if (check->foreign) {
    return base::Status::Error(RefusedAdoption(request, dir, "but " + check->reason), EXDEV);
  }
  if (IsEmptyDir(env, vol_fd)) return base::Status::OK();
  base::Result<int> data = OpenDataVersion(env, vol_fd, dir);
  if (data.ok() && *data >= 0) {
    env.Close(*data);
    return base::Status::OK();
  }
  return base::Status::Error(
      RefusedAdoption(request, dir,
                      "and holds entries but no ..data link to a version dir of its own"),
      EEXIST);
}

}  // namespace

std::string VolumeLocation::dir() const {
  return VolumeDir(root_dir, pod_uid, plugin_dir, volume_name);
}

std::string VolumeLocation::rel() const {
  return OwnershipJournal::VolumePath(pod_uid, plugin_dir, volume_name);
}

base::Result<base::UniqueFd> OpenVolumeDir(Env& env, const VolumeLocation& loc) {
  if (base::Status s = CheckLocation(loc); !s.ok()) return s;
  auto root = OpenRoot(env, loc.root_dir);
  if (!root.ok()) return root.status();
  auto fd = atomicwriter::OpenDirBeneath(env, root->get(), loc.rel(), loc.dir());
  if (!fd.ok()) return fd.status();
  return UniqueFd(*fd);
}

base::Result<LiveTmpfsBytes> LiveVersionTmpfsBytes(Env& env, const VolumeLocation& loc) {
  auto vol = OpenVolumeDir(env, loc);
  if (!vol.ok()) return vol.status();
  struct statfs sfs {};
  if (env.Fstatfs(vol->get(), &sfs) != 0) return base::ErrnoError("statfs", loc.dir(), errno);
  if (sfs.f_type != TMPFS_MAGIC) return LiveTmpfsBytes{};
  LiveTmpfsBytes out;
  auto version = OpenDataVersion(env, vol->get(), loc.dir(), &out.version);
  if (!version.ok()) return version.status();
  if (*version < 0) return LiveTmpfsBytes{};
  const long page_size = ::sysconf(_SC_PAGESIZE);
  out.bytes =
      PageBytesBeneath(env, *version, page_size > 0 ? static_cast<uint64_t>(page_size) : 4096,
                       /*depth=*/64);
  return out;
}

base::Result<bool> KubeletHasSetUp(Env& env, const VolumeLocation& loc) {
  auto vol = OpenVolumeDir(env, loc);
  if (!vol.ok()) {
    if (vol.status().sys_errno() == ENOENT) return false;
    return vol.status();
  }
  return KubeletHasSetUpAt(env, vol->get(), loc.dir());
}

base::Result<std::shared_ptr<const RootDirCache::Root>> RootDirCache::Get(Env& env,
                                                                          const std::string& path) {
  struct stat st {};
  uint64_t mount_id = 0;
  const bool stated = env.StatMount(AT_FDCWD, path, 0, &st, &mount_id) == 0 && mount_id != 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stated && root_ != nullptr && path_ == path && root_->mount_id == mount_id &&
        root_->st.st_dev == st.st_dev && root_->st.st_ino == st.st_ino &&
        root_->st.st_ctim.tv_sec == st.st_ctim.tv_sec &&
        root_->st.st_ctim.tv_nsec == st.st_ctim.tv_nsec) {
      return root_;
    }
  }
  auto fd = atomicwriter::OpenRootDir(env, path);
  if (!fd.ok()) return fd.status();
  auto root = std::make_shared<Root>();
  root->fd.reset(*fd);
  // What the descriptor names, not the path: the path may have changed since its stat.
  if (env.Fstat(root->fd.get(), &root->st) != 0) return ErrnoError("stat", path, errno);
  if (env.MountId(root->fd.get(), &root->mount_id) != 0) root->mount_id = 0;
  std::lock_guard<std::mutex> lock(mu_);
  ++opens_;
  if (root->mount_id != 0) {
    path_ = path;
    root_ = root;
  } else {
    root_.reset();
  }
  return std::shared_ptr<const Root>(std::move(root));
}

uint64_t RootDirCache::OpensForTesting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return opens_;
}

base::Result<atomicwriter::WriteResult> SetUpVolume(Env& env, const SetUpRequest& request,
                                                    RootDirCache* roots) {
  const VolumeLocation& loc = request.location;
  if (base::Status s = CheckLocation(loc); !s.ok()) return s;
  std::shared_ptr<const RootDirCache::Root> cached_root;
  UniqueFd opened_root;
  if (roots != nullptr) {
    auto got = roots->Get(env, loc.root_dir);
    if (!got.ok()) return got.status();
    cached_root = std::move(got).value();
  } else {
    auto got = OpenRoot(env, loc.root_dir);
    if (!got.ok()) return got.status();
    opened_root = std::move(got).value();
  }
  const int root = cached_root != nullptr ? cached_root->fd.get() : opened_root.get();
  const struct stat* root_st = cached_root != nullptr ? &cached_root->st : nullptr;
  const std::string dir = loc.dir();
  const std::string volume_rel = loc.rel();
  if (request.refresh_only) {
    // Beside the kubelet: its volume, its directories, its tmpfs; the daemon only writes content.
    auto writer = OpenWriter(env, root, volume_rel, dir, request, /*owned=*/false);
    if (!writer.ok()) return writer.status();
    if (!request.kubelet_set_up_checked) {
      base::Result<bool> set_up = KubeletHasSetUpAt(env, (*writer)->dir_fd(), dir);
      if (!set_up.ok()) return set_up.status();
      if (!*set_up) {
        return base::Status::Error("volume dir " + dir +
                                   " has no ..data link: the kubelet has not set it up (yet)");
      }
    }
    return (*writer)->Write(request.payload, request.set_permissions);
  }
  if (request.journal == nullptr) return base::Status::Error("set-up without an ownership journal");
  OwnershipJournal& journal = *request.journal;
  // The common case, a change, remount or resync of a live volume, needs no directory work at
  // all: the writer's open of the volume dir (beneath the root, through no link) is the check that
  // it exists, and the write goes through that same descriptor.
  std::unique_ptr<atomicwriter::AtomicWriter> writer;
  const bool listed = journal.Owns(OwnedKind::kVolume, volume_rel);
  if (auto opened = OpenWriter(env, root, volume_rel, dir, request, listed); opened.ok()) {
    writer = std::move(opened).value();
  } else if (opened.status().sys_errno() != ENOENT) {
    // A link or a file where a directory should be (never followed, never removed), or another
    // failure: nothing is created.
    return opened.status();
  }
  const bool existed = writer != nullptr;
  std::vector<std::string> created;  // relative to the root dir, in the order made
  std::vector<OwnedPath> recorded;
  UniqueFd vol;  // the volume dir when this call made it
  if (!existed) {
    std::unique_lock<std::mutex> lock(PodDirsMutex(loc.pod_uid));
    // Everything this call is about to create goes into the journal first.
    const std::string parents[] = {OwnershipJournal::PodPath(loc.pod_uid),
                                   OwnershipJournal::PodVolumesPath(loc.pod_uid),
                                   OwnershipJournal::PluginPath(loc.pod_uid, loc.plugin_dir)};
    for (const std::string& rel : parents) {
      const UniqueFd fd(atomicwriter::OpenBeneath(env, root, rel, O_RDONLY | O_DIRECTORY));
      if (fd.valid()) continue;
      if (errno != ENOENT) return atomicwriter::OpenBeneathError(loc.root_dir + "/" + rel, errno);
      recorded.push_back(OwnedPath{OwnedKind::kDir, rel});
    }
    recorded.push_back(OwnedPath{OwnedKind::kVolume, volume_rel});
    base::Status s = journal.Add(recorded);
    if (!s.ok()) return base::Status::Error("recording ownership of " + dir + ": " + s.message());
    // Each level made (or found) and then opened from its parent's descriptor, never through a
    // link: the pods dir, the pod dir, volumes/, the plugin dir, the volume dir.
    const std::pair<std::string, mode_t> levels[] = {{"pods", kPodDirMode},
                                                     {loc.pod_uid, kPodDirMode},
                                                     {"volumes", kPodDirMode},
                                                     {loc.plugin_dir, kPodDirMode},
                                                     {loc.volume_name, kVolumeDirMode}};
    UniqueFd at(env.Dup(root));
    if (!at.valid()) {
      s = ErrnoError("open", loc.root_dir, errno);
      lock.unlock();
      Undo(env, root, created, volume_rel, journal, recorded, loc);
      return s;
    }
    std::string rel;
    for (const auto& [name, mode] : levels) {
      rel += (rel.empty() ? "" : "/") + name;
      const bool made = env.MkdirAt(at.get(), name, mode) == 0;
      if (!made && errno != EEXIST) s = ErrnoError("mkdir", loc.root_dir + "/" + rel, errno);
      if (made) created.push_back(rel);
      UniqueFd next;
      if (s.ok()) {
        next.reset(env.OpenAt(at.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0));
        if (!next.valid()) s = atomicwriter::OpenBeneathError(loc.root_dir + "/" + rel, errno);
      }
      // The volume dir gets its mode whatever the umask, as the kubelet's wrapper does.
      if (s.ok() && made && rel == volume_rel && env.Fchmod(next.get(), kVolumeDirMode) != 0) {
        s = ErrnoError("chmod", dir, errno);
      }
      // Its identity, before anything is written in or mounted on it.
      if (s.ok() && made && rel == volume_rel) {
        struct stat st {};
        if (env.Fstat(next.get(), &st) != 0) {
          s = ErrnoError("stat", dir, errno);
        } else if (base::Status r = journal.SetVolumeInode(volume_rel, st.st_ino); !r.ok()) {
          s = base::Status::Error("recording the identity of " + dir + ": " + r.message());
        }
      }
      if (!s.ok()) {
        lock.unlock();
        Undo(env, root, created, volume_rel, journal, recorded, loc);
        return s;
      }
      at = std::move(next);
    }
    vol = std::move(at);
    // A directory that appeared between the check and the mkdir (another writer made it) is not
    // this daemon's.
    std::vector<OwnedPath> not_made;
    for (const OwnedPath& p : recorded) {
      if (std::find(created.begin(), created.end(), p.path) == created.end()) not_made.push_back(p);
    }
    if (!not_made.empty()) journal.Remove(not_made).IgnoreError();
  }
  // Owned: made by this call (a dir that appeared between the check and the mkdir is another
  // writer's), or recorded as the daemon's.
  const bool owned = std::find(created.begin(), created.end(), volume_rel) != created.end() ||
                     journal.Owns(OwnedKind::kVolume, volume_rel);
  // A new volume dir, or one of ours left empty (e.g. its tmpfs vanished with a reboot), gets its
  // tmpfs. Never one the daemon does not own: the kubelet may be setting it up right now.
  const int vol_fd = writer != nullptr ? writer->dir_fd() : vol.get();
  if (existed && listed) {
    // Still the dir the daemon made (nothing bound or mounted over it or above it since)?
    if (base::Status c =
            CheckBeforeWrite(env, root, root_st, request, volume_rel, journal, *writer);
        !c.ok()) {
      return c;
    }
  } else if (!owned) {
    // Another's dir, refreshed only when it is a volume some writer set up, where the pod dir is.
    if (base::Status c = CheckAdoption(env, root, request, vol_fd, dir); !c.ok()) return c;
  }
  bool mount_tmpfs = request.tmpfs && owned && vol_fd >= 0;
  if (mount_tmpfs && existed) {
    mount_tmpfs = MayBeEmpty(env, vol_fd) && IsEmptyDir(env, vol_fd);
    if (mount_tmpfs) {
      auto mounted = IsMountRoot(env, vol_fd, dir);
      mount_tmpfs = mounted.ok() && !*mounted;
    }
  }
  if (mount_tmpfs) {
    auto mounted = MountTmpfs(env, vol_fd, dir);
    if (!mounted.ok()) {
      if (!existed) Undo(env, root, created, volume_rel, journal, recorded, loc);
      return mounted.status();
    }
    // The descriptor opened before the mount names the dir beneath it.
    if (*mounted) writer.reset();
  }
  vol.reset();

  if (writer == nullptr) {
    auto opened = OpenWriter(env, root, volume_rel, dir, request, owned);
    if (!opened.ok()) {
      if (!existed) Undo(env, root, created, volume_rel, journal, recorded, loc);
      return opened.status();
    }
    writer = std::move(opened).value();
  }
  auto result = writer->Write(request.payload, request.set_permissions);
  // Only a write that published nothing may be undone (the writer never reports failure after
  // its point of no return).
  if (!result.ok() && !existed) {
    writer.reset();
    Undo(env, root, created, volume_rel, journal, recorded, loc);
  }
  return result;
}

bool IsMountPoint(Env& env, const std::string& dir) {
  const UniqueFd fd(env.OpenAt(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0));
  if (!fd.valid()) return false;
  auto mounted = IsMountRoot(env, fd.get(), dir);
  return mounted.ok() && *mounted;
}

base::Result<TearDownOutcome> TearDownVolume(Env& env, const VolumeLocation& location,
                                             OwnershipJournal& journal) {
  const std::string volume_rel = location.rel();
  if (base::Status s = CheckLocation(location); !s.ok()) return s;
  if (!journal.Owns(OwnedKind::kVolume, volume_rel)) {
    // Not the daemon's, or removed by an earlier teardown that could not remove the pod's dirs.
    base::Status s = RemoveOwnedEmptyPodDirs(env, location.root_dir, location.pod_uid, journal);
    if (!s.ok()) return s;
    return TearDownOutcome::kNotOwned;
  }
  auto root = OpenRoot(env, location.root_dir);
  if (!root.ok()) return root.status();
  const std::string dir = location.dir();
  // Something else than a directory where the daemon made the volume dir (a link, a file) is no
  // longer the daemon's: released, left in place, never followed or removed.
  struct stat st {};
  std::string name;
  if (auto parent = OpenParentBeneath(env, root->get(), location.root_dir, volume_rel, &name);
      parent.ok() && env.FstatAt(parent->get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      !S_ISDIR(st.st_mode)) {
    journal.Remove({OwnedPath{OwnedKind::kVolume, volume_rel}}).IgnoreError();
    return base::Status::Error(dir + ": no longer the directory volumemanager made (" +
                                   (S_ISLNK(st.st_mode) ? "a symlink" : "not a directory") +
                                   "); released from its ownership and left in place, not followed",
                               S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR);
  }
  // Still the dir the daemon made? A dir bound or mounted over it or above it since (or in a
  // stop) is another's: released, left in place, nothing of it removed.
  auto check = CheckOwnedVolumeDir(env, root->get(), location, journal.VolumeInode(volume_rel));
  if (!check.ok()) return check.status();
  if (check->foreign) {
    journal.Remove({OwnedPath{OwnedKind::kVolume, volume_rel}}).IgnoreError();
    journal.NoteForeignVolumeDir(volume_rel, check->reason);
    return base::Status::Error(dir + ": not the volume dir volumemanager set up (" + check->reason +
                                   "); released from its ownership and left in place, nothing "
                                   "removed",
                               EXDEV);
  }
  base::Status s = RemoveVolumeDir(env, root->get(), location.root_dir, volume_rel);
  if (!s.ok()) return s;
  s = journal.Remove({OwnedPath{OwnedKind::kVolume, volume_rel}});
  if (!s.ok()) return s;
  s = RemoveOwnedEmptyPodDirs(env, location.root_dir, location.pod_uid, journal);
  if (!s.ok()) {
    return base::Status::Error(
        dir + " removed, but " + s.message() + "; tried again with the teardown", s.sys_errno());
  }
  return TearDownOutcome::kRemoved;
}

base::Status RemoveOwnedEmptyPodDirs(Env& env, const std::string& root_dir,
                                     const std::string& pod_uid, OwnershipJournal& journal) {
  if (base::Status s = CheckPathComponent(pod_uid, "pod UID"); !s.ok()) return s;
  std::vector<OwnedPath> dirs;
  for (const OwnedPath& p : journal.EntriesOfPod(pod_uid)) {
    if (p.kind == OwnedKind::kDir) dirs.push_back(p);
  }
  if (dirs.empty()) return base::Status::OK();
  auto root = OpenRoot(env, root_dir);
  if (!root.ok()) return root.status();
  std::lock_guard<std::mutex> lock(PodDirsMutex(pod_uid));
  // Deepest first: longer paths below the pod dir sort after their parents.
  std::sort(dirs.begin(), dirs.end(),
            [](const OwnedPath& a, const OwnedPath& b) { return a.path.size() > b.path.size(); });
  std::vector<OwnedPath> removed;
  base::Status failed;
  for (const OwnedPath& p : dirs) {
    if (RemoveEmptyDirBeneath(env, root->get(), root_dir, p.path) == 0 || errno == ENOENT) {
      removed.push_back(p);
    } else if (errno != ENOTEMPTY && errno != EEXIST && errno != ELOOP && errno != ENOTDIR &&
               failed.ok()) {
      // Still holding another volume, or not a directory of the daemon's any more: kept, as it
      // should be. Anything else is a failure to report (and to try again).
      failed = ErrnoError("remove the empty dir", root_dir + "/" + p.path, errno);
    }
  }
  base::Status s = journal.Remove(removed);
  return failed.ok() ? s : failed;
}

}  // namespace volumemanager
