#include "volumemanager/volume_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
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

#include "atomicwriter/remove_tree.h"
#include "base/errno_error.h"
#include "volumemanager/volume_paths.h"

namespace volumemanager {
namespace {

constexpr mode_t kPodDirMode = 0750;
constexpr mode_t kVolumeDirMode = 0777;

using base::ErrnoError;

// mkdir that records what it created, so a failed first mount can undo exactly that.
base::Status MakeDir(const std::string& path, mode_t mode, std::vector<std::string>* created) {
  if (::mkdir(path.c_str(), mode) == 0) {
    created->push_back(path);
    return base::Status::OK();
  }
  if (errno != EEXIST) return ErrnoError("mkdir", path, errno);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return ErrnoError("lstat", path, errno);
  if (!S_ISDIR(st.st_mode)) return base::Status::Error(path + " exists and is not a directory");
  return base::Status::OK();
}

bool IsEmptyDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool empty = true;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

base::Status Unmount(const std::string& dir) {
  if (::umount2(dir.c_str(), 0) == 0) return base::Status::OK();
  // Busy (a reader holds a file open): detach now, the kernel frees it when the last user goes.
  if (errno == EBUSY && ::umount2(dir.c_str(), MNT_DETACH) == 0) return base::Status::OK();
  return ErrnoError("unmount", dir, errno);
}

// Mounts a tmpfs on `dir` (no options, as the kubelet: the root shows mode 1777). Returns
// whether it mounted; an unprivileged process gets a plain directory and one warning.
base::Result<bool> MountTmpfs(const std::string& dir) {
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, nullptr) == 0) return true;
  if (errno != EPERM && errno != EACCES) return ErrnoError("mount tmpfs on", dir, errno);
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

// Removes what a failed first mount created: the volume dir with its content, the parent dirs
// only while empty (another volume of the same pod may be mounting into them right now), and
// releases in the journal what this call recorded and what was not left behind.
void Undo(const std::vector<std::string>& created, const std::string& volume_dir,
          OwnershipJournal& journal, const std::vector<OwnedPath>& recorded,
          const VolumeLocation& loc) {
  const std::string& root_dir = loc.root_dir;
  std::lock_guard<std::mutex> lock(PodDirsMutex(loc.pod_uid));
  std::vector<std::string> left;
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    if (*it == volume_dir) {
      if (IsMountPoint(*it)) Unmount(*it).IgnoreError();
      if (!atomicwriter::RemoveTree(*it).ok()) left.push_back(*it);
    } else if (::rmdir(it->c_str()) != 0 && errno != ENOENT) {
      left.push_back(*it);
    }
  }
  std::vector<OwnedPath> release;
  for (const OwnedPath& p : recorded) {
    bool still_there = false;
    for (const std::string& dir : left) still_there |= dir == root_dir + "/" + p.path;
    if (!still_there) release.push_back(p);
  }
  journal.Remove(release).IgnoreError();  // an entry for a missing path is dropped at next start
}

// The atomic writer for an existing volume dir (opened without following a link at its path).
// `owned`: the ownership journal lists the volume, so no other writer touches it, and the version
// a write replaces may go at once where deferring its removal costs more (ext4 without a journal).
base::Result<std::unique_ptr<atomicwriter::AtomicWriter>> OpenWriter(const std::string& dir,
                                                                     const SetUpRequest& request,
                                                                     bool owned) {
  atomicwriter::Options options;
  options.durable = request.durable;
  options.ledger = request.ledger;
  options.unpublished_grace = request.unpublished_grace;
  options.removals = request.removals;
  if (owned) options.replaced_version = atomicwriter::ReplacedVersion::kAtOnceWhereFreedInodesWait;
  return atomicwriter::AtomicWriter::Open(dir, options);
}

// The payload through the atomic writer, into an existing volume dir the kubelet owns.
base::Result<atomicwriter::WriteResult> WriteContent(const std::string& dir,
                                                     const SetUpRequest& request) {
  auto writer = OpenWriter(dir, request, /*owned=*/false);
  if (!writer.ok()) return writer.status();
  return (*writer)->Write(request.payload, request.set_permissions);
}

// Whether a volume dir that holds a `..data` entry (the common case: a live volume) may instead
// be empty: only then are the emptiness and mount checks worth their system calls.
bool MayBeEmpty(int dir_fd) {
  struct stat st {};
  return ::fstatat(dir_fd, atomicwriter::kDataDirName, &st, AT_SYMLINK_NOFOLLOW) != 0;
}

}  // namespace

std::string VolumeLocation::dir() const {
  return VolumeDir(root_dir, pod_uid, plugin_dir, volume_name);
}

bool KubeletHasSetUp(const std::string& dir) {
  const int vol = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (vol < 0) return false;
  struct stat st {};
  bool set_up = ::fstatat(vol, atomicwriter::kDataDirName, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(st.st_mode);
  // The kubelet publishes `..data` first and creates the top-level links after it. A write that
  // starts in between would create a link the kubelet is about to create, and the kubelet's
  // symlink would fail with EEXIST (a FailedMount for the user). So the set-up counts as done
  // once every top-level name of the live version exists too.
  const int data =
      set_up ? ::openat(vol, atomicwriter::kDataDirName, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (data < 0) set_up = false;
  DIR* d = data >= 0 ? ::fdopendir(data) : nullptr;
  if (data >= 0 && d == nullptr) {
    ::close(data);
    set_up = false;
  }
  while (d != nullptr && set_up) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    set_up = ::fstatat(vol, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0;
  }
  if (d != nullptr) ::closedir(d);
  ::close(vol);
  return set_up;
}

base::Result<atomicwriter::WriteResult> SetUpVolume(const SetUpRequest& request) {
  const VolumeLocation& loc = request.location;
  for (auto [value, what] :
       {std::pair{&loc.pod_uid, "pod UID"}, std::pair{&loc.plugin_dir, "plugin dir"},
        std::pair{&loc.volume_name, "volume name"}}) {
    base::Status s = CheckPathComponent(*value, what);
    if (!s.ok()) return s;
  }
  if (request.refresh_only) {
    // Beside the kubelet: its volume, its directories, its tmpfs; the daemon only writes content.
    const std::string dir = loc.dir();
    if (!request.kubelet_set_up_checked && !KubeletHasSetUp(dir)) {
      return base::Status::Error("volume dir " + dir +
                                 " has no ..data link: the kubelet has not set it up (yet)");
    }
    return WriteContent(dir, request);
  }
  if (request.journal == nullptr) return base::Status::Error("set-up without an ownership journal");
  OwnershipJournal& journal = *request.journal;
  const std::string pods = PodsDir(loc.root_dir);
  const std::string dir = loc.dir();
  const std::string volume_path =
      OwnershipJournal::VolumePath(loc.pod_uid, loc.plugin_dir, loc.volume_name);
  // The common case, a change, remount or resync of a live volume, needs no directory work at
  // all: the writer's open of the volume dir (a real directory, not a link) is the check that it
  // exists, and the write goes through that same descriptor.
  std::unique_ptr<atomicwriter::AtomicWriter> writer;
  const bool listed = journal.Owns(OwnedKind::kVolume, volume_path);
  if (auto opened = OpenWriter(dir, request, listed); opened.ok()) {
    writer = std::move(opened).value();
  }
  struct stat st {};
  const bool existed = writer != nullptr || (::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
  std::vector<std::string> created;
  std::vector<OwnedPath> recorded;
  if (!existed) {
    std::unique_lock<std::mutex> lock(PodDirsMutex(loc.pod_uid));
    // Everything this call is about to create goes into the journal first.
    const std::pair<std::string, std::string> parents[] = {
        {PodDir(loc.root_dir, loc.pod_uid), OwnershipJournal::PodPath(loc.pod_uid)},
        {PodVolumesDir(loc.root_dir, loc.pod_uid), OwnershipJournal::PodVolumesPath(loc.pod_uid)},
        {PodVolumesDir(loc.root_dir, loc.pod_uid) + "/" + loc.plugin_dir,
         OwnershipJournal::PluginPath(loc.pod_uid, loc.plugin_dir)},
    };
    for (const auto& [path, rel] : parents) {
      struct stat pst {};
      if (::lstat(path.c_str(), &pst) != 0 && errno == ENOENT) {
        recorded.push_back(OwnedPath{OwnedKind::kDir, rel});
      }
    }
    recorded.push_back(OwnedPath{OwnedKind::kVolume, volume_path});
    base::Status s = journal.Add(recorded);
    if (!s.ok()) return base::Status::Error("recording ownership of " + dir + ": " + s.message());
    for (const std::string* p : {&pods, &parents[0].first, &parents[1].first, &parents[2].first}) {
      s = MakeDir(*p, kPodDirMode, &created);
      if (!s.ok()) {
        lock.unlock();
        Undo(created, dir, journal, recorded, loc);
        return s;
      }
    }
    const size_t before = created.size();
    s = MakeDir(dir, kVolumeDirMode, &created);
    if (s.ok() && created.size() > before && ::chmod(dir.c_str(), kVolumeDirMode) != 0) {
      s = ErrnoError("chmod", dir, errno);
    }
    if (!s.ok()) {
      lock.unlock();
      Undo(created, dir, journal, recorded, loc);
      return s;
    }
    // A directory that appeared between the lstat and the mkdir (another writer made it) is not
    // this daemon's.
    std::vector<OwnedPath> not_made;
    for (const OwnedPath& p : recorded) {
      const std::string full = loc.root_dir + "/" + p.path;
      if (std::find(created.begin(), created.end(), full) == created.end()) not_made.push_back(p);
    }
    if (!not_made.empty()) journal.Remove(not_made).IgnoreError();
  }
  // Owned: made by this call (a dir that appeared between the check and the mkdir is another
  // writer's), or recorded as the daemon's.
  const bool owned = std::find(created.begin(), created.end(), dir) != created.end() ||
                     journal.Owns(OwnedKind::kVolume, volume_path);
  // A new volume dir, or one of ours left empty (e.g. its tmpfs vanished with a reboot), gets its
  // tmpfs. Never one the daemon does not own: the kubelet may be setting it up right now.
  if (request.tmpfs && owned &&
      (!existed || ((writer == nullptr || MayBeEmpty(writer->dir_fd())) && IsEmptyDir(dir) &&
                    !IsMountPoint(dir)))) {
    auto mounted = MountTmpfs(dir);
    if (!mounted.ok()) {
      if (!existed) Undo(created, dir, journal, recorded, loc);
      return mounted.status();
    }
    // The descriptor opened before the mount names the dir beneath it.
    if (*mounted) writer.reset();
  }

  if (writer == nullptr) {
    auto opened = OpenWriter(dir, request, owned);
    if (!opened.ok()) {
      if (!existed) Undo(created, dir, journal, recorded, loc);
      return opened.status();
    }
    writer = std::move(opened).value();
  }
  auto result = writer->Write(request.payload, request.set_permissions);
  // Only a write that published nothing may be undone (the writer never reports failure after
  // its point of no return).
  if (!result.ok() && !existed) Undo(created, dir, journal, recorded, loc);
  return result;
}

bool IsMountPoint(const std::string& dir) {
  struct stat st {};
  struct stat parent {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  if (::stat((dir + "/..").c_str(), &parent) != 0) return false;
  return st.st_dev != parent.st_dev || st.st_ino == parent.st_ino;
}

base::Result<TearDownOutcome> TearDownVolume(const VolumeLocation& location,
                                             OwnershipJournal& journal) {
  const std::string volume_path =
      OwnershipJournal::VolumePath(location.pod_uid, location.plugin_dir, location.volume_name);
  if (!journal.Owns(OwnedKind::kVolume, volume_path)) return TearDownOutcome::kNotOwned;
  const std::string dir = location.dir();
  if (IsMountPoint(dir)) {
    // The content goes with the tmpfs; nothing of it is read or followed.
    base::Status u = Unmount(dir);
    if (!u.ok()) return u;
  }
  base::Status s = atomicwriter::RemoveTree(dir);
  if (!s.ok()) return s;
  s = journal.Remove({OwnedPath{OwnedKind::kVolume, volume_path}});
  if (!s.ok()) return s;
  RemoveOwnedEmptyPodDirs(location.root_dir, location.pod_uid, journal);
  return TearDownOutcome::kRemoved;
}

void RemoveOwnedEmptyPodDirs(const std::string& root_dir, const std::string& pod_uid,
                             OwnershipJournal& journal) {
  if (!CheckPathComponent(pod_uid, "pod UID").ok()) return;
  std::lock_guard<std::mutex> lock(PodDirsMutex(pod_uid));
  std::vector<OwnedPath> dirs;
  for (const OwnedPath& p : journal.EntriesOfPod(pod_uid)) {
    if (p.kind == OwnedKind::kDir) dirs.push_back(p);
  }
  // Deepest first: longer paths below the pod dir sort after their parents.
  std::sort(dirs.begin(), dirs.end(),
            [](const OwnedPath& a, const OwnedPath& b) { return a.path.size() > b.path.size(); });
  std::vector<OwnedPath> removed;
  for (const OwnedPath& p : dirs) {
    const std::string full = root_dir + "/" + p.path;
    if (::rmdir(full.c_str()) == 0 || errno == ENOENT) removed.push_back(p);
  }
  journal.Remove(removed).IgnoreError();
}

}  // namespace volumemanager
