// Status and Result<T>: errors as values at module boundaries (no exception crosses a module, a
// libuv callback or a libcurl callback).
//
// A Status is either OK or a failure carrying a human-readable message, a StatusCode saying what
// kind of failure it is (for callers that branch on the kind: never on the message's text) and,
// when the failure came from a system call, its errno, or, when it is a Kubernetes API server's
// answer, the HTTP code and Status reason (403 "Forbidden", 404 "NotFound": what client-go's
// StatusError carries).
// Result<T> holds either a T or a failed Status. Both are plain values: copyable, movable, and safe
// to hand between threads like any other value.
#ifndef VOLUMEMANAGER_BASE_STATUS_H_
#define VOLUMEMANAGER_BASE_STATUS_H_

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace base {

// The kind of a failure, in the manner of LevelDB's and Abseil's status codes, limited to the
// kinds some caller branches on. A failure made without a code is kUnknown.
enum class StatusCode : uint8_t {
  kOk = 0,
  // A failure no caller tells apart from others.
  kUnknown,
  // Refused by policy or configuration: nothing was tried (a reload action to an address it may
  // not call, a signal action where signals are not enabled).
  kRefused,
  // Not sent: the target was not there to receive it (a reload action to a pod that stopped,
  // changed its IP or has no running container to signal).
  kNotSent,
  // The input could not be read (an object manifest file's read failed).
  kUnavailable,
  // The server does not serve the operation (SelfSubjectReview before Kubernetes 1.28) and
  // nothing else answers it.
  kUnimplemented,
};

class [[nodiscard]] Status {
 public:
  // OK.
  Status() = default;

  static Status OK() { return Status(); }
  // A failure of kind kUnknown. `sys_errno` is the errno of the system call that failed, or 0.
  static Status Error(std::string message, int sys_errno = 0) {
    return Error(StatusCode::kUnknown, std::move(message), sys_errno);
  }
  // A failure of kind `code` (kOk is taken as kUnknown: a failure is never OK).
  static Status Error(StatusCode code, std::string message, int sys_errno = 0) {
    Status s;
    s.code_ = code == StatusCode::kOk ? StatusCode::kUnknown : code;
    s.message_ = std::move(message);
    s.sys_errno_ = sys_errno;
    return s;
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  // kOk for OK; the kind of a failure otherwise.
  StatusCode code() const { return code_; }
  // Empty for OK.
  const std::string& message() const { return message_; }
  // The errno of a failed system call, 0 otherwise.
  int sys_errno() const { return sys_errno_; }

  // The HTTP code and Status reason of the API answer this failure is (0 and "" otherwise).
  int api_code() const { return api_code_; }
  const std::string& api_reason() const { return api_reason_; }
  // The same failure marked as the API's answer `code` with `reason`; OK stays OK.
  Status WithApiStatus(int code, std::string reason) const {
    if (ok()) return *this;
    Status s = *this;
    s.api_code_ = code;
    s.api_reason_ = std::move(reason);
    return s;
  }

  // The same failure as kind `code` (kOk is taken as kUnknown); OK stays OK.
  Status WithCode(StatusCode code) const {
    if (ok()) return *this;
    Status s = *this;
    s.code_ = code == StatusCode::kOk ? StatusCode::kUnknown : code;
    return s;
  }

  // The same failure (same code, errno and API status) with "<context>: " in front of the
  // message; OK stays OK.
  Status WithContext(std::string_view context) const {
    if (ok()) return *this;
    Status s = *this;
    s.message_ = std::string(context) + ": " + message_;
    return s;
  }

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int sys_errno_ = 0;
  int api_code_ = 0;
  std::string api_reason_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // `status` must be a failure.
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }

  // Precondition: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_STATUS_H_
