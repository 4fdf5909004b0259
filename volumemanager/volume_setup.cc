#include "volumemanager/volume_setup.h"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
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

// Removes what a failed first mount created: the volume dir with its content, the parent dirs
// only while empty (another volume of the same pod may be mounting into them right now).
void Undo(const std::vector<std::string>& created, const std::string& volume_dir) {
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    if (*it == volume_dir) {
      if (IsMountPoint(*it)) Unmount(*it).IgnoreError();
      atomicwriter::RemoveTree(*it).IgnoreError();
    } else {
      ::rmdir(it->c_str());
    }
  }
}

}  // namespace

std::string VolumeLocation::dir() const {
  return VolumeDir(root_dir, pod_uid, plugin_dir, volume_name);
}

base::Result<atomicwriter::WriteResult> SetUpVolume(const SetUpRequest& request) {
  const VolumeLocation& loc = request.location;
  for (auto [value, what] :
       {std::pair{&loc.pod_uid, "pod UID"}, std::pair{&loc.plugin_dir, "plugin dir"},
        std::pair{&loc.volume_name, "volume name"}}) {
    base::Status s = CheckPathComponent(*value, what);
    if (!s.ok()) return s;
  }
  std::vector<std::string> created;
  const std::string pods = PodsDir(loc.root_dir);
  const std::string pod = PodDir(loc.root_dir, loc.pod_uid);
  const std::string volumes = PodVolumesDir(loc.root_dir, loc.pod_uid);
  const std::string plugin = volumes + "/" + loc.plugin_dir;
  const std::string dir = loc.dir();
  // The common case, a remount or resync of a live volume, needs no directory work at all: one
  // lstat, and the writer's own reads.
  struct stat st {};
  const bool existed = ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (!existed) {
    for (const std::string* p : {&pods, &pod, &volumes, &plugin}) {
      base::Status s = MakeDir(*p, kPodDirMode, &created);
      if (!s.ok()) {
        Undo(created, dir);
        return s;
      }
    }
    const size_t before = created.size();
    base::Status s = MakeDir(dir, kVolumeDirMode, &created);
    if (s.ok() && created.size() > before && ::chmod(dir.c_str(), kVolumeDirMode) != 0) {
      s = ErrnoError("chmod", dir, errno);
    }
    if (!s.ok()) {
      Undo(created, dir);
      return s;
    }
  }
  // A new volume dir, or one left empty (e.g. its tmpfs vanished with a reboot), gets its tmpfs.
  if (request.tmpfs && (!existed || (IsEmptyDir(dir) && !IsMountPoint(dir)))) {
    auto mounted = MountTmpfs(dir);
    if (!mounted.ok()) {
      Undo(created, dir);
      return mounted.status();
    }
  }

  atomicwriter::Options options;
  options.durable = request.durable;
  auto writer = atomicwriter::AtomicWriter::Open(dir, options);
  if (!writer.ok()) {
    Undo(created, dir);
    return writer.status();
  }
  auto result = (*writer)->Write(request.payload, request.set_permissions);
  if (!result.ok()) Undo(created, dir);
  return result;
}

bool IsMountPoint(const std::string& dir) {
  struct stat st {};
  struct stat parent {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  if (::stat((dir + "/..").c_str(), &parent) != 0) return false;
  return st.st_dev != parent.st_dev || st.st_ino == parent.st_ino;
}

base::Status TearDownVolume(const VolumeLocation& location) {
  const std::string dir = location.dir();
  if (IsMountPoint(dir)) {
    // The content goes with the tmpfs; nothing of it is read or followed.
    base::Status u = Unmount(dir);
    if (!u.ok()) return u;
  }
  base::Status s = atomicwriter::RemoveTree(dir);
  if (!s.ok()) return s;
  RemoveEmptyPodDirs(location.root_dir, location.pod_uid);
  return base::Status::OK();
}

void RemoveEmptyPodDirs(const std::string& root_dir, const std::string& pod_uid) {
  if (!CheckPathComponent(pod_uid, "pod UID").ok()) return;
  const std::string volumes = PodVolumesDir(root_dir, pod_uid);
  std::error_code ec;
  // increment(ec): a range-for would throw when reading the next entry fails.
  for (std::filesystem::directory_iterator it(volumes, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::rmdir(it->path().c_str());
  }
  ::rmdir(volumes.c_str());
  ::rmdir(PodDir(root_dir, pod_uid).c_str());
}

}  // namespace volumemanager
