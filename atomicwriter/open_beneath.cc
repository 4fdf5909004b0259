#include "atomicwriter/open_beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
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

}  // namespace

bool FindMount(uint64_t mount_id, MountInfo* out) {
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (f == nullptr) return false;
  bool found = false;
  char* line = nullptr;
  size_t cap = 0;
  while (!found && ::getline(&line, &cap, f) > 0) {
    // "<id> <parent> <major:minor> <root> <mount point> <options> [optional...] - <type> <source>
    // <super options>"
    std::vector<std::string> fields;
    char* save = nullptr;
    for (char* tok = ::strtok_r(line, " \n", &save); tok != nullptr;
         tok = ::strtok_r(nullptr, " \n", &save)) {
      fields.emplace_back(tok);
    }
    if (fields.size() < 7 || std::strtoull(fields[0].c_str(), nullptr, 10) != mount_id) continue;
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 2 >= fields.size()) continue;
    out->root = UnescapeMountField(fields[3]);
    out->mount_point = UnescapeMountField(fields[4]);
    out->device = fields[2];
    out->fs_type = fields[dash + 1];
    out->source = fields[dash + 2];
    found = true;
  }
  std::free(line);
  std::fclose(f);
  return found;
}

void ForceOpenBeneathWalkForTesting(bool walk) { force_walk.store(walk); }

}  // namespace atomicwriter
