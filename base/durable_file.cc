#include "base/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

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

Result<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoError("open", path, errno);
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ErrnoError("read", path, err);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

Status WriteFileDurably(const std::string& dir, const std::string& name, std::string_view data) {
  const std::string file = dir + "/" + name;
  const std::string tmp = file + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
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
