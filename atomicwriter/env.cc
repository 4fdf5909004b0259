#include "atomicwriter/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

#include "base/errno_error.h"
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

// 0: not known yet, 1: openat2 works, 2: the kernel lacks it (or a seccomp filter refuses it).
std::atomic<int> openat2_state{0};

int MountIdOf(int fd, uint64_t* mount_id) {
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_MNT_ID,
              &stx) == 0 &&
      (stx.stx_mask & STATX_MNT_ID) != 0) {
    *mount_id = stx.stx_mnt_id;
    return 0;
  }
  const std::string info = "/proc/self/fdinfo/" + std::to_string(fd);
  FILE* f = std::fopen(info.c_str(), "re");
  if (f == nullptr) return -1;
  char line[256];
  bool found = false;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long long id = 0;
    if (std::sscanf(line, "mnt_id: %llu", &id) == 1) {
      *mount_id = id;
      found = true;
      break;
    }
  }
  std::fclose(f);
  if (!found) errno = ENOTSUP;
  return found ? 0 : -1;
}

// mountinfo escapes space, tab, newline and backslash in paths as a backslash and three octal
// digits.
std::string UnescapeMountField(const std::string& field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const char a = field[i + 1], b = field[i + 2], c = field[i + 3];
      if (a >= '0' && a <= '3' && b >= '0' && b <= '7' && c >= '0' && c <= '7') {
        out.push_back(static_cast<char>((a - '0') * 64 + (b - '0') * 8 + (c - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

// The mount table of this process's mount namespace as /proc/self/mountinfo lists it, kept
// between lookups and read again only once the kernel says it changed: a subPath check or a
// teardown asks for one or two mounts, and parsing every mount of a node with thousands of them
// at each ask made each O(mounts). poll(2) on an open mountinfo file reports POLLPRI once a mount
// was added, removed or changed in the namespace since that file's previous poll; the poll comes
// before the read it validates, so a change during a read is reported at the next lookup. A
// lookup after a change, the daemon's own unmounts included, reads the table again: no worse
// than a read per lookup. What is kept: the file's text (its line, about 150 bytes, per mount)
// and an index by mount id (16 bytes per mount). A lookup costs a stat of /proc/self/ns/mnt, a
// poll and a binary search. Lookups come from the thread pool: one mutex.
class MountTable {
 public:
  bool Find(uint64_t mount_id, MountInfo* out) {
    std::lock_guard<std::mutex> lock(mu_);
    // The open file lists the namespace the process had when it was opened: after a setns or an
    // unshare it is opened again.
    struct stat ns {};
    if (fd_ >= 0 &&
        (::stat("/proc/self/ns/mnt", &ns) != 0 || ns.st_ino != ns_ino_ || ns.st_dev != ns_dev_)) {
      ::close(fd_);
      fd_ = -1;
      read_ = false;
    }
    if (!Current() && !Read()) return false;
    auto it = std::lower_bound(index_.begin(), index_.end(), std::make_pair(mount_id, size_t{0}));
    if (it == index_.end() || it->first != mount_id) {
      errno = ENOENT;
      return false;
    }
    const size_t end = text_.find('\n', it->second);
    return ParseLine(text_.substr(it->second, end == std::string::npos ? end : end - it->second),
                     out);
  }
  uint64_t reads() const { return reads_.load(); }

 private:
  bool Current() {
    if (fd_ < 0 || !read_) return false;
    pollfd p{fd_, POLLPRI, 0};
    int rc;
    do {
      rc = ::poll(&p, 1, 0);
    } while (rc < 0 && errno == EINTR);
    return rc >= 0 && (p.revents & (POLLPRI | POLLERR | POLLNVAL)) == 0;
  }

  bool Read() {
    read_ = false;
    if (fd_ < 0) {
      struct stat ns {};
      if (::stat("/proc/self/ns/mnt", &ns) != 0) return false;
      fd_ = ::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) return false;
      ns_ino_ = ns.st_ino;
      ns_dev_ = ns.st_dev;
    } else if (::lseek(fd_, 0, SEEK_SET) != 0) {
      ::close(fd_);
      fd_ = -1;
      return false;
    }
    ++reads_;
    // Straight into text_ (its capacity kept from the last read), no bounce buffer on the stack
    // of the pool thread that reads.
    text_.clear();
    size_t len = 0;
    for (;;) {
      if (text_.size() - len < 4096) text_.resize(std::max<size_t>(2 * text_.size(), 16384));
      const ssize_t n = ::read(fd_, text_.data() + len, text_.size() - len);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ::close(fd_);
        fd_ = -1;
        text_.clear();
        return false;
      }
      if (n == 0) break;
      len += static_cast<size_t>(n);
    }
    text_.resize(len);
    index_.clear();
    for (size_t at = 0; at < text_.size();) {
      const size_t end = text_.find('\n', at);
      index_.emplace_back(std::strtoull(text_.c_str() + at, nullptr, 10), at);
      if (end == std::string::npos) break;
      at = end + 1;
    }
    std::sort(index_.begin(), index_.end());
    text_.shrink_to_fit();
    index_.shrink_to_fit();
    read_ = true;
    return true;
  }

  // "<id> <parent> <major:minor> <root> <mount point> <options> [optional...] - <type> <source>
  // <super options>"
  static bool ParseLine(std::string line, MountInfo* out) {
    std::vector<std::string> fields;
    char* save = nullptr;
    for (char* tok = ::strtok_r(line.data(), " \n", &save); tok != nullptr;
         tok = ::strtok_r(nullptr, " \n", &save)) {
      fields.emplace_back(tok);
    }
    if (fields.size() < 7) return false;
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 2 >= fields.size()) return false;
    out->root = UnescapeMountField(fields[3]);
    out->mount_point = UnescapeMountField(fields[4]);
    out->device = fields[2];
    out->fs_type = fields[dash + 1];
    out->source = fields[dash + 2];
    return true;
  }

  std::mutex mu_;
  int fd_ = -1;       // kept open: its polls tell whether the table changed
  ino_t ns_ino_ = 0;  // the mount namespace it lists (/proc/self/ns/mnt)
  dev_t ns_dev_ = 0;
  bool read_ = false;
  std::string text_;
  std::vector<std::pair<uint64_t, size_t>> index_;  // (mount id, offset of its line), sorted
  std::atomic<uint64_t> reads_{0};
};

}  // namespace

int Env::StatMount(int dirfd, const std::string& path, int flags, struct stat* st,
                   uint64_t* mount_id) {
  if (FstatAt(dirfd, path, st, flags) != 0) return -1;
  const int fd =
      OpenAt(dirfd, path, O_PATH | ((flags & AT_SYMLINK_NOFOLLOW) != 0 ? O_NOFOLLOW : 0), 0);
  if (fd < 0) return -1;
  if (MountId(fd, mount_id) != 0) *mount_id = 0;
  Close(fd);
  return 0;
}

namespace {

// Never destroyed: pool threads may look up a mount while the process exits.
MountTable& ProcessMountTable() {
  static MountTable* table = new MountTable;
  return *table;
}

class Posix final : public Env {
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
  int Fdatasync(int fd) override { return ::fdatasync(fd); }
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
  int StatMount(int dirfd, const std::string& path, int flags, struct stat* st,
                uint64_t* mount_id) override {
    if (RefuseNul(path)) return -1;
    struct statx stx {};
    if (::statx(dirfd, path.c_str(), flags | AT_STATX_DONT_SYNC, STATX_BASIC_STATS | STATX_MNT_ID,
                &stx) != 0) {
      if (errno != ENOSYS) return -1;
      return Env::StatMount(dirfd, path, flags, st, mount_id);
    }
    *st = {};
    st->st_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
    st->st_ino = stx.stx_ino;
    st->st_mode = stx.stx_mode;
    st->st_nlink = stx.stx_nlink;
    st->st_uid = stx.stx_uid;
    st->st_gid = stx.stx_gid;
    st->st_rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
    st->st_size = static_cast<off_t>(stx.stx_size);
    st->st_blksize = static_cast<blksize_t>(stx.stx_blksize);
    st->st_blocks = static_cast<blkcnt_t>(stx.stx_blocks);
    st->st_atim = {stx.stx_atime.tv_sec, stx.stx_atime.tv_nsec};
    st->st_mtim = {stx.stx_mtime.tv_sec, stx.stx_mtime.tv_nsec};
    st->st_ctim = {stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec};
    *mount_id = (stx.stx_mask & STATX_MNT_ID) != 0 ? stx.stx_mnt_id : 0;
    return 0;
  }

  int Dup(int fd) override { return ::fcntl(fd, F_DUPFD_CLOEXEC, 0); }
  int Fstat(int fd, struct stat* st) override { return ::fstat(fd, st); }
  int Fstatfs(int fd, struct statfs* st) override { return ::fstatfs(fd, st); }
  ssize_t PwriteAll(int fd, const void* buf, size_t n, off_t offset) override {
    const char* p = static_cast<const char*>(buf);
    size_t done = 0;
    while (done < n) {
      const ssize_t w = ::pwrite(fd, p + done, n - done, offset + static_cast<off_t>(done));
      if (w < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      done += static_cast<size_t>(w);
    }
    return static_cast<ssize_t>(done);
  }
  int Ftruncate(int fd, off_t length) override { return ::ftruncate(fd, length); }
  ssize_t Pread(int fd, void* buf, size_t n, off_t offset) override {
    for (;;) {
      const ssize_t r = ::pread(fd, buf, n, offset);
      if (r >= 0 || errno != EINTR) return r;
    }
  }

  int OpenAt2Beneath(int dirfd, const std::string& rel, int flags, mode_t mode) override {
    if (RefuseNul(rel)) return -1;
    if (openat2_state.load(std::memory_order_relaxed) == 2) {
      errno = ENOSYS;
      return -1;
    }
    open_how how{};
    how.flags = static_cast<uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
    // The mode only goes with a create (openat2 refuses it otherwise).
    if ((flags & (O_CREAT | O_TMPFILE)) != 0) how.mode = mode;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof(how));
    if (fd >= 0) {
      openat2_state.store(1, std::memory_order_relaxed);
      return static_cast<int>(fd);
    }
    // EPERM before openat2 ever worked: a seccomp profile that does not know the call.
    if (errno == ENOSYS || (errno == EPERM && openat2_state.load() == 0)) {
      openat2_state.store(2, std::memory_order_relaxed);
      errno = ENOSYS;
    }
    return -1;
  }

  bool FindMount(uint64_t mount_id, MountInfo* out) override {
    return ProcessMountTable().Find(mount_id, out);
  }
  int Mount(const std::string& source, int fd, const std::string& fs_type, unsigned long flags,
            const std::string& data) override {
    if (RefuseNul(source, fs_type) || RefuseNul(data)) return -1;
    return ::mount(source.c_str(), FdPath(fd).c_str(), fs_type.c_str(), flags,
                   data.empty() ? nullptr : data.c_str());
  }
  int Unmount(int fd, int flags) override { return ::umount2(FdPath(fd).c_str(), flags); }
  int InotifyAddWatch(int inotify_fd, const std::string& path, uint32_t mask) override {
    if (RefuseNul(path)) return -1;
    return ::inotify_add_watch(inotify_fd, path.c_str(), mask);
  }

  std::chrono::steady_clock::time_point SteadyNow() override {
    return std::chrono::steady_clock::now();
  }
  std::chrono::system_clock::time_point WallNow() override {
    return std::chrono::system_clock::now();
  }

  int ReadDir(int dirfd, std::vector<DirEntry>* entries) override {
    entries->clear();
    // getdents64 on the descriptor itself: no second descriptor, no fdopendir bookkeeping.
    if (::lseek(dirfd, 0, SEEK_SET) < 0) return -1;
    // 8 KiB: a dir of 1,000 entries takes a few calls more, and the pool thread's stack stays
    // small (its pages, once touched, stay resident).
    alignas(struct dirent64) char buf[8 * 1024];
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

base::Status MountLookupError(const std::string& shown, int err) {
  if (err == ENOENT) {
    return base::Status::Error(shown + ": its mount is not listed in /proc/self/mountinfo");
  }
  return base::ErrnoError("read /proc/self/mountinfo for", shown, err);
}

bool FileHolds(Env& env, int fd, std::string_view data, off_t size) {
  if (size < 0 || static_cast<size_t>(size) != data.size()) return false;
  std::vector<char> buf(std::min<size_t>(64 * 1024, data.size() + 1));
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n =
        env.Pread(fd, buf.data(), std::min(buf.size(), data.size() - off), static_cast<off_t>(off));
    if (n <= 0) return false;
    if (std::memcmp(buf.data(), data.data() + off, static_cast<size_t>(n)) != 0) return false;
    off += static_cast<size_t>(n);
  }
  char past = 0;
  return env.Pread(fd, &past, 1, static_cast<off_t>(off)) == 0;
}

std::string FdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

Env* PosixEnv() {
  static Posix* fs = new Posix();
  return fs;
}

uint64_t MountTableReadsForTesting() { return ProcessMountTable().reads(); }

}  // namespace atomicwriter
