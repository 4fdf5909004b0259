#include "atomicwriter/filesystem.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace atomicwriter {
namespace {

class Posix final : public Filesystem {
 public:
  int OpenAt(int dirfd, const std::string& path, int flags, mode_t mode) override {
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

  int ReadAll(int fd, std::string* out) override {
    out->clear();
    char buf[64 * 1024];
    for (;;) {
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      if (r == 0) return 0;
      out->append(buf, static_cast<size_t>(r));
    }
  }

  int Fsync(int fd) override { return ::fsync(fd); }
  int Fchmod(int fd, mode_t mode) override { return ::fchmod(fd, mode); }
  int Fchown(int fd, uid_t uid, gid_t gid) override { return ::fchown(fd, uid, gid); }
  int FchmodAt(int dirfd, const std::string& path, mode_t mode, int flags) override {
    return ::fchmodat(dirfd, path.c_str(), mode, flags);
  }
  int FchownAt(int dirfd, const std::string& path, uid_t uid, gid_t gid, int flags) override {
    return ::fchownat(dirfd, path.c_str(), uid, gid, flags);
  }
  int FstatAt(int dirfd, const std::string& path, struct stat* st, int flags) override {
    return ::fstatat(dirfd, path.c_str(), st, flags);
  }
  int MkdirAt(int dirfd, const std::string& path, mode_t mode) override {
    return ::mkdirat(dirfd, path.c_str(), mode);
  }
  int SymlinkAt(const std::string& target, int dirfd, const std::string& linkpath) override {
    return ::symlinkat(target.c_str(), dirfd, linkpath.c_str());
  }
  int ReadlinkAt(int dirfd, const std::string& path, std::string* out) override {
    char buf[PATH_MAX];
    ssize_t n = ::readlinkat(dirfd, path.c_str(), buf, sizeof(buf));
    if (n < 0) return -1;
    out->assign(buf, static_cast<size_t>(n));
    return 0;
  }
  int RenameAt(int olddirfd, const std::string& oldpath, int newdirfd,
               const std::string& newpath) override {
    return ::renameat(olddirfd, oldpath.c_str(), newdirfd, newpath.c_str());
  }
  int UnlinkAt(int dirfd, const std::string& path, int flags) override {
    return ::unlinkat(dirfd, path.c_str(), flags);
  }

  int ReadDir(int dirfd, std::vector<std::string>* names) override {
    names->clear();
    // fdopendir takes ownership of its descriptor and shares the offset, so list through a fresh
    // descriptor of the same directory.
    int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
      int saved = errno;
      ::close(fd);
      errno = saved;
      return -1;
    }
    errno = 0;
    while (struct dirent* e = ::readdir(dir)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names->push_back(std::move(name));
      errno = 0;
    }
    int saved = errno;
    ::closedir(dir);
    errno = saved;
    return saved == 0 ? 0 : -1;
  }
};

}  // namespace

Filesystem* PosixFilesystem() {
  static Posix* fs = new Posix();
  return fs;
}

}  // namespace atomicwriter
