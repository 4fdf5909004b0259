#include "atomicwriter/open_beneath.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <utility>
#include <vector>

#include "base/errno_error.h"

namespace atomicwriter {
namespace {

std::atomic<bool> force_walk{false};

// Calls fn(name) for each name of `rel`; false for an empty, absolute, ".", ".." or NUL-holding
// path (fn may have been called for the names before the bad one).
template <typename Fn>
bool ForEachPlainName(std::string_view rel, Fn&& fn) {
  if (rel.empty() || rel.front() == '/' || rel.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  for (;;) {
    const size_t slash = rel.find('/', start);
    const std::string_view name =
        rel.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (name.empty() || name == "." || name == "..") return false;
    fn(name);
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// Whether `rel` is a plain relative path, checked without copying it (the common case never
// walks).
bool IsPlain(std::string_view rel) {
  return ForEachPlainName(rel, [](std::string_view) {});
}

// Splits `rel` into its names; false when it is not plain.
bool SplitPlain(std::string_view rel, std::vector<std::string>* names) {
  return ForEachPlainName(rel, [names](std::string_view name) { names->emplace_back(name); });
}

// The errno for a failed open of `name` in `dir`: ENOTDIR is what the kernel says for a symlink
// opened with O_DIRECTORY | O_NOFOLLOW; a caller is told ELOOP for a link, as for any other.
int OpenErrno(Env& env, int dir, const std::string& name, int err) {
  struct stat st {};
  if (err == ENOTDIR && env.FstatAt(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode)) {
    return ELOOP;
  }
  return err;
}

int Walk(Env& env, int dirfd, const std::vector<std::string>& names, int flags, mode_t mode) {
  int cur = dirfd;
  for (size_t i = 0; i + 1 < names.size(); ++i) {
    const int next = env.OpenAt(cur, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    const int err = next < 0 ? OpenErrno(env, cur, names[i], errno) : 0;
    if (cur != dirfd) env.Close(cur);
    if (next < 0) {
      errno = err;
      return -1;
    }
    cur = next;
  }
  const int fd = env.OpenAt(cur, names.back(), flags | O_NOFOLLOW, mode);
  const int err = fd < 0 ? OpenErrno(env, cur, names.back(), errno) : 0;
  if (cur != dirfd) env.Close(cur);
  errno = err;
  return fd;
}

}  // namespace

int OpenBeneath(Env& env, int dirfd, std::string_view rel, int flags, mode_t mode) {
  if (!IsPlain(rel)) {
    errno = EINVAL;
    return -1;
  }
  if (!force_walk.load(std::memory_order_relaxed)) {
    const int fd = env.OpenAt2Beneath(dirfd, std::string(rel), flags, mode);
    if (fd >= 0) return fd;
    // ENOTDIR: a file, or a link opened with O_DIRECTORY; the walk below tells which (rare: a
    // failure either way). ENOSYS: no openat2 here; the walk gives the same answers.
    if (errno != ENOTDIR && errno != ENOSYS) return -1;
  }
  std::vector<std::string> names;
  SplitPlain(rel, &names);
  return Walk(env, dirfd, names, flags, mode);
}

int OpenParentBeneath(Env& env, int dirfd, std::string_view rel, std::string* name) {
  const size_t slash = rel.rfind('/');
  *name = std::string(slash == std::string_view::npos ? rel : rel.substr(slash + 1));
  if (name->empty() || *name == "." || *name == ".." || name->find('\0') != std::string::npos) {
    errno = EINVAL;
    return -1;
  }
  if (slash == std::string_view::npos) return env.Dup(dirfd);
  return OpenBeneath(env, dirfd, rel.substr(0, slash), O_RDONLY | O_DIRECTORY);
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

base::Result<int> OpenDirBeneath(Env& env, int dirfd, std::string_view rel,
                                 const std::string& shown, int flags) {
  const int fd = OpenBeneath(env, dirfd, rel, flags | O_RDONLY | O_DIRECTORY);
  if (fd < 0) return OpenBeneathError(shown, errno);
  return fd;
}

base::Result<int> OpenRootDir(Env& env, const std::string& path) {
  if (path.find('\0') != std::string::npos) {
    return base::Status::Error("root dir " + path + ": holds a NUL byte", EINVAL);
  }
  const int fd = env.OpenAt(AT_FDCWD, path, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) return base::ErrnoError("open root dir", path, errno);
  return fd;
}

void ForceOpenBeneathWalkForTesting(bool walk) { force_walk.store(walk); }

}  // namespace atomicwriter
