#include "atomicwriter/open_beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "base/errno_error.h"

namespace atomicwriter {
namespace {

// 0: not known yet, 1: openat2 works, 2: the kernel lacks it (or a seccomp filter refuses it).
std::atomic<int> openat2_state{0};
std::atomic<bool> force_walk{false};

// Splits `rel` into its names; false for an empty, absolute, ".", ".." or NUL-holding path.
bool SplitPlain(std::string_view rel, std::vector<std::string>* names) {
  if (rel.empty() || rel.front() == '/' || rel.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  for (;;) {
    const size_t slash = rel.find('/', start);
    const std::string_view name =
        rel.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (name.empty() || name == "." || name == "..") return false;
    names->emplace_back(name);
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// The errno for a failed open of `name` in `dir`: ENOTDIR is what the kernel says for a symlink
// opened with O_DIRECTORY | O_NOFOLLOW; a caller is told ELOOP for a link, as for any other.
int OpenErrno(int dir, const std::string& name, int err) {
  struct stat st {};
  if (err == ENOTDIR && ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode)) {
    return ELOOP;
  }
  return err;
}

int Walk(int dirfd, const std::vector<std::string>& names, int flags, mode_t mode) {
  int cur = dirfd;
  for (size_t i = 0; i + 1 < names.size(); ++i) {
    const int next =
        ::openat(cur, names[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = next < 0 ? OpenErrno(cur, names[i], errno) : 0;
    if (cur != dirfd) ::close(cur);
    if (next < 0) {
      errno = err;
      return -1;
    }
    cur = next;
  }
  const int fd = ::openat(cur, names.back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  const int err = fd < 0 ? OpenErrno(cur, names.back(), errno) : 0;
  if (cur != dirfd) ::close(cur);
  errno = err;
  return fd;
}

}  // namespace

int OpenBeneath(int dirfd, std::string_view rel, int flags, mode_t mode) {
  std::vector<std::string> names;
  if (!SplitPlain(rel, &names)) {
    errno = EINVAL;
    return -1;
  }
  if (!force_walk.load(std::memory_order_relaxed) &&
      openat2_state.load(std::memory_order_relaxed) != 2) {
    const std::string path(rel);
    open_how how{};
    how.flags = static_cast<uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
    // The mode only goes with a create (openat2 refuses it otherwise).
    if ((flags & (O_CREAT | O_TMPFILE)) != 0) how.mode = mode;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof(how));
    if (fd >= 0) {
      openat2_state.store(1, std::memory_order_relaxed);
      return static_cast<int>(fd);
    }
    // ENOTDIR: a file, or a link opened with O_DIRECTORY; the walk below tells which (rare: a
    // failure either way). ENOSYS: an older kernel; EPERM from a seccomp profile that does not
    // know the call: the walk gives the same answers.
    if (errno == ENOTDIR) return Walk(dirfd, names, flags, mode);
    if (!(errno == ENOSYS || (errno == EPERM && openat2_state.load() == 0))) return -1;
    openat2_state.store(2, std::memory_order_relaxed);
  }
  return Walk(dirfd, names, flags, mode);
}

int OpenParentBeneath(int dirfd, std::string_view rel, std::string* name) {
  const size_t slash = rel.rfind('/');
  *name = std::string(slash == std::string_view::npos ? rel : rel.substr(slash + 1));
  if (name->empty() || *name == "." || *name == ".." || name->find('\0') != std::string::npos) {
    errno = EINVAL;
    return -1;
  }
  if (slash == std::string_view::npos) return ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  return OpenBeneath(dirfd, rel.substr(0, slash), O_RDONLY | O_DIRECTORY);
}

base::Status OpenBeneathError(const std::string& shown, int err) {
  if (err == ELOOP) {
    return base::Status::Error(
        shown +
            ": a symlink stands where a directory of this path should be; not followed "
            "(nothing is written through, mounted on or removed below a link under the root "
            "dir)",
        err);
  }
  if (err == ENOTDIR) {
    return base::Status::Error(shown + ": a file stands where a directory of this path should be",
                               err);
  }
  if (err == EINVAL) {
    return base::Status::Error(shown + ": not a plain relative path beneath the root dir", err);
  }
  return base::ErrnoError("open", shown, err);
}

base::Result<int> OpenDirBeneath(int dirfd, std::string_view rel, const std::string& shown,
                                 int flags) {
  const int fd = OpenBeneath(dirfd, rel, flags | O_RDONLY | O_DIRECTORY);
  if (fd < 0) return OpenBeneathError(shown, errno);
  return fd;
}

base::Result<int> OpenRootDir(const std::string& path) {
  if (path.find('\0') != std::string::npos) {
    return base::Status::Error("root dir " + path + ": holds a NUL byte", EINVAL);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return base::ErrnoError("open root dir", path, errno);
  return fd;
}

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

std::string FdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

namespace {

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
    if (fd_ >= 0 && (::stat("/proc/self/ns/mnt", &ns) != 0 || ns.st_ino != ns_ino_ ||
                     ns.st_dev != ns_dev_)) {
      ::close(fd_);
      fd_ = -1;
      read_ = false;
    }
    if (!Current() && !Read()) return false;
    auto it = std::lower_bound(index_.begin(), index_.end(), std::make_pair(mount_id, size_t{0}));
    if (it == index_.end() || it->first != mount_id) return false;
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
    text_.clear();
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ::close(fd_);
        fd_ = -1;
        return false;
      }
      if (n == 0) break;
      text_.append(buf, static_cast<size_t>(n));
    }
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
  int fd_ = -1;  // kept open: its polls tell whether the table changed
  ino_t ns_ino_ = 0;  // the mount namespace it lists (/proc/self/ns/mnt)
  dev_t ns_dev_ = 0;
  bool read_ = false;
  std::string text_;
  std::vector<std::pair<uint64_t, size_t>> index_;  // (mount id, offset of its line), sorted
  std::atomic<uint64_t> reads_{0};
};

// Never destroyed: pool threads may look up a mount while the process exits.
MountTable& ProcessMountTable() {
  static MountTable* table = new MountTable;
  return *table;
}

}  // namespace

bool FindMount(uint64_t mount_id, MountInfo* out) {
  return ProcessMountTable().Find(mount_id, out);
}

uint64_t MountTableReadsForTesting() { return ProcessMountTable().reads(); }

void ForceOpenBeneathWalkForTesting(bool walk) { force_walk.store(walk); }

}  // namespace atomicwriter
