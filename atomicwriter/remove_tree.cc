#include "atomicwriter/remove_tree.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "base/errno_error.h"

namespace atomicwriter {

using base::ErrnoError;

namespace {

// RemoveTreeAt below a directory on mount `mount`.
base::Status RemoveOnMount(Env& fs, int dirfd, const std::string& name, const std::string& shown,
                           unsigned char type, uint64_t mount) {
  if (type != DT_DIR) {
    if (fs.UnlinkAt(dirfd, name, 0) == 0 || errno == ENOENT) return base::Status::OK();
    if (errno != EISDIR) return ErrnoError("remove", shown, errno);
  }
  const int fd = fs.OpenAt(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
  if (fd < 0) {
    if (errno == ENOENT) return base::Status::OK();
    // Replaced by a file or a link since it was listed: removed as one.
    if (type == DT_DIR && (errno == ENOTDIR || errno == ELOOP)) {
      return RemoveOnMount(fs, dirfd, name, shown, DT_UNKNOWN, mount);
    }
    return ErrnoError("open", shown, errno);
  }
  // Never into another mount: a bind mount of the same filesystem (even of the tree's own
  // parent: a bind loop) shows the same st_dev, so the mount id decides. A file bind-mounted
  // here fails its unlink with EBUSY on its own.
  uint64_t here = 0;
  if (fs.MountId(fd, &here) != 0) {
    const int err = errno;
    fs.Close(fd);
    return ErrnoError("read the mount of", shown, err);
  }
  if (here != mount) {
    fs.Close(fd);
    return base::Status::Error(
        "remove " + shown +
            ": a mount point (another mount than its parent's); left in place, "
            "nothing below it removed",
        EXDEV);
  }
  std::vector<DirEntry> children;
  base::Status s;
  if (fs.ReadDir(fd, &children) != 0) s = ErrnoError("read dir", shown, errno);
  // In inode order rather than the directory's hash order: the inode table blocks an ext4
  // removal updates are then visited once each, in order.
  std::sort(children.begin(), children.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.ino < b.ino; });
  for (size_t i = 0; s.ok() && i < children.size(); ++i) {
    s = RemoveOnMount(fs, fd, children[i].name, shown + "/" + children[i].name, children[i].type,
                      mount);
  }
  if (!s.ok()) {
    fs.Close(fd);
    return s;
  }
  // Removed while still open: the directory's last reference then goes with the close, after
  // rmdir has let go of the parent's lock. Freeing its blocks (on a `discard` mount, a discard
  // waited for) then no longer holds up every create and rename in the parent meanwhile.
  const int rc = fs.UnlinkAt(dirfd, name, AT_REMOVEDIR);
  const int err = errno;
  fs.Close(fd);
  if (rc == 0 || err == ENOENT) return base::Status::OK();
  return ErrnoError("remove", shown, err);
}

}  // namespace

base::Status RemoveTreeAt(Env& fs, int dirfd, const std::string& name, const std::string& shown,
                          unsigned char type) {
  uint64_t mount = 0;
  if (fs.MountId(dirfd, &mount) != 0)
    return ErrnoError("read the mount of the dir of", shown, errno);
  return RemoveOnMount(fs, dirfd, name, shown, type, mount);
}

base::Status RemoveTree(const std::string& path, Env* fs) {
  if (fs == nullptr) fs = PosixEnv();
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const size_t slash = trimmed.rfind('/');
  const std::string parent =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : trimmed.substr(0, slash));
  const std::string name = slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return base::Status::Error("remove " + path + ": not a removable path");
  }
  const int dirfd = fs->OpenAt(AT_FDCWD, parent, O_RDONLY | O_DIRECTORY, 0);
  if (dirfd < 0) {
    if (errno == ENOENT) return base::Status::OK();
    return ErrnoError("open", parent, errno);
  }
  base::Status s = RemoveTreeAt(*fs, dirfd, name, trimmed);
  fs->Close(dirfd);
  return s;
}

}  // namespace atomicwriter
