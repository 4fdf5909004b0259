// ErrnoError: the Status of a failed system call, "<op> <path>: <strerror(err)>" with the errno
// kept (Status::sys_errno), so callers can branch on ENOENT, ENOSPC, ... and users read what failed
// where.
#ifndef VOLUMEMANAGER_BASE_ERRNO_ERROR_H_
#define VOLUMEMANAGER_BASE_ERRNO_ERROR_H_

#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace base {

// `op` names the call as a user reads it ("open", "rename ..data_tmp to"), `path` what it acted on.
inline Status ErrnoError(std::string_view op, std::string_view path, int err) {
  std::string message(op);
  message += ' ';
  message += path;
  message += ": ";
  message += std::strerror(err);
  return Status::Error(std::move(message), err);
}

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_ERRNO_ERROR_H_
