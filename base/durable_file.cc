#include "base/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/errno_error.h"

namespace base {
Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

std::string FileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

namespace {

// "<path>: <why>": the one shape of ReadRegularFile's errors, so callers can prefix them.
Status ReadError(const std::string& path, int err) {
  return Status::Error(path + ": " + std::strerror(err), err);
}

const char* FileTypeName(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

}  // namespace

Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes,
                                    bool follow_symlinks) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, for ever. It changes
  // nothing for a regular file.
  const int flags =
      O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (follow_symlinks ? 0 : O_NOFOLLOW);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return ReadError(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ReadError(path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(path + ": not a regular file (" + FileTypeName(st.st_mode) + ")");
  }
  // Read straight into the string, sized as fstat says plus the byte that shows the end (no
  // bounce buffer on the stack: each pool thread that reads manifests would keep it resident),
  // doubled when the file is larger than it said; never more than one byte past the limit,
  // whatever the file claims or grows to.
  const bool size_known = st.st_size > 0;
  std::string data;
  data.resize(size_known ? std::min(static_cast<size_t>(st.st_size), max_bytes) + 1
                         : std::min<size_t>(4096, max_bytes + 1));
  size_t len = 0;
  for (;;) {
    if (len == data.size()) data.resize(std::min(data.size() * 2, max_bytes + 1));
    const ssize_t n = ::read(fd, data.data() + len, data.size() - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ReadError(path, err);
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
    if (len > max_bytes) {
      ::close(fd);
      return Status::Error(path + ": larger than the limit of " + std::to_string(max_bytes) +
                           " bytes");
    }
  }
  ::close(fd);
  data.resize(len);
  if (!size_known || data.capacity() > 2 * len + 64) data.shrink_to_fit();
  return data;
}

Result<std::string> ReadWholeFile(const std::string& path) {
  return ReadRegularFile(path, kMaxWholeFileBytes, /*follow_symlinks=*/false);
}

std::string DurableTempName(const std::string& name) {
  // The pid alone is not unique: the daemons of a rolling update each run in a PID namespace of
  // their own, often both as pid 1. A random number drawn once per process, and a counter for
  // the writes of its threads, make the name this write's own.
  static const uint64_t process_random = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<uint64_t> counter{0};
  char suffix[64];
  std::snprintf(suffix, sizeof(suffix), ".tmp.%ld.%016llx.%llu", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(process_random),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return name + suffix;
}

Status WriteFileDurably(const std::string& dir, const std::string& name, std::string_view data) {
  const std::string file = dir + "/" + name;
  const std::string tmp = dir + "/" + DurableTempName(name);
  // O_EXCL: never another writer's file, whatever the name.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoError("create", tmp, errno);
  Status s = WriteAll(fd, data, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoError("fsync", tmp, errno);
  if (::close(fd) != 0 && s.ok()) s = ErrnoError("close", tmp, errno);
  if (s.ok() && ::rename(tmp.c_str(), file.c_str()) != 0) s = ErrnoError("rename", tmp, errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return SyncDir(dir);
}

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? Status::OK() : ErrnoError("fsync", dir, err);
}

}  // namespace base
