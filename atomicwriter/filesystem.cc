#include "atomicwriter/filesystem.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string_view>

#include "atomicwriter/open_beneath.h"
#include "base/strings.h"

namespace atomicwriter {
namespace {

// A name holding a NUL byte never reaches the kernel, which would read it only up to the NUL
// ("a/..\0x" is "a/.."): the call fails with EINVAL instead, as Go's do. Every path is checked
// before this too (ValidatePath); this is the last line, for any caller.
bool RefuseNul(const std::string& path) {
  if (!base::HasNul(path)) return false;
  errno = EINVAL;
  return true;
}
bool RefuseNul(const std::string& a, const std::string& b) { return RefuseNul(a) || RefuseNul(b); }

class Posix final : public Filesystem {
 public:
  int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override {
    if (RefuseNul(path)) return -1;
    return ::openat(dirfd, path.c_str(), flags | O_CLOEXEC, mode);
  }
  int Close(int fd) override { return ::close(fd); }

  ssize_t WriteAll(int fd, const void* buf, size_t n) override {
    const char* p = static_cast<const char*>(buf);
    size_t done = 0;
    while (done < n) {
      ssize_t w = ::write(fd, p + done, n - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      done += static_cast<size_t>(w);
    }
    return static_cast<ssize_t>(done);
  }

  ssize_t Read(int fd, void* buf, size_t n) override {
    for (;;) {
      ssize_t r = ::read(fd, buf, n);
      if (r >= 0 || errno != EINTR) return r;
    }
  }

  int Fsync(int fd) override { return ::fsync(fd); }
  int Fchmod(int fd, mode_t mode) override { return ::fchmod(fd, mode); }
  int Fchown(int fd, uid_t uid, gid_t gid) override { return ::fchown(fd, uid, gid); }
  int FchmodAt(int dirfd, const std::string& path, mode_t mode, int flags) override {
    if (RefuseNul(path)) return -1;
    return ::fchmodat(dirfd, path.c_str(), mode, flags);
  }
  int FchownAt(int dirfd, const std::string& path, uid_t uid, gid_t gid, int flags) override {
    if (RefuseNul(path)) return -1;
    return ::fchownat(dirfd, path.c_str(), uid, gid, flags);
  }
  int FstatAt(int dirfd, const std::string& path, struct stat* st, int flags) override {
    if (RefuseNul(path)) return -1;
    return ::fstatat(dirfd, path.c_str(), st, flags);
  }
  int MkdirAt(int dirfd, const std::string& path, mode_t mode) override {
    if (RefuseNul(path)) return -1;
    return ::mkdirat(dirfd, path.c_str(), mode);
  }
  int SymlinkAt(const std::string& target, int dirfd, const std::string& linkpath) override {
    if (RefuseNul(target, linkpath)) return -1;
    return ::symlinkat(target.c_str(), dirfd, linkpath.c_str());
  }
  int ReadlinkAt(int dirfd, const std::string& path, std::string* out) override {
    if (RefuseNul(path)) return -1;
    char buf[PATH_MAX];
    ssize_t n = ::readlinkat(dirfd, path.c_str(), buf, sizeof(buf));
    if (n < 0) return -1;
    out->assign(buf, static_cast<size_t>(n));
    return 0;
  }
  int RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
               const std::string& newpath) override {
    if (RefuseNul(oldpath, newpath)) return -1;
    return ::renameat(olddirfd, oldpath.c_str(), newdirfd, newpath.c_str());
  }
  int UnlinkAt(int dirfd, const std::string& path, int flags) override {
    if (RefuseNul(path)) return -1;
    return ::unlinkat(dirfd, path.c_str(), flags);
  }
  // The kernel reads and writes an int, whatever the ioctl's declared type says.
  int GetInodeFlags(int fd, int* flags) override { return ::ioctl(fd, FS_IOC_GETFLAGS, flags); }
  int SetInodeFlags(int fd, int flags) override { return ::ioctl(fd, FS_IOC_SETFLAGS, &flags); }
  int MountId(int fd, uint64_t* mount_id) override { return MountIdOf(fd, mount_id); }

  int ReadDir(int dirfd, std::vector<DirEntry>* entries) override {
    entries->clear();
    // getdents64 on the descriptor itself: no second descriptor, no fdopendir bookkeeping.
    if (::lseek(dirfd, 0, SEEK_SET) < 0) return -1;
    alignas(struct dirent64) char buf[32 * 1024];
    for (;;) {
      const ssize_t n = ::getdents64(dirfd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      if (n == 0) return 0;
      for (ssize_t off = 0; off < n;) {
        const auto* e = reinterpret_cast<const struct dirent64*>(buf + off);
        off += e->d_reclen;
        const std::string_view name = e->d_name;
        if (name == "." || name == "..") continue;
        entries->push_back(DirEntry{std::string(name), e->d_type, e->d_ino});
      }
    }
  }
};

}  // namespace

Filesystem* PosixFilesystem() {
  static Posix* fs = new Posix();
  return fs;
}

}  // namespace atomicwriter
