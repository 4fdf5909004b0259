// CatchAll: the wall around a C callback (libuv, libcurl). The callback's body runs inside it, and
// whatever the body throws comes back as a failed Status instead of unwinding into C code, which
// would terminate the daemon.
//
// CatchAll itself never throws: when even the error message cannot be built (out of memory), the
// Status says only "callback threw", which needs no allocation.
#ifndef VOLUMEMANAGER_BASE_CATCH_ALL_H_
#define VOLUMEMANAGER_BASE_CATCH_ALL_H_

#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "base/status.h"

namespace base {

// Runs `body()`. Returns its Status when it returns one, OK when it returns nothing, and
// "<where> threw: <what>" when it throws.
template <typename Body>
Status CatchAll(std::string_view where, Body&& body) noexcept {
  try {
    if constexpr (std::is_same_v<std::invoke_result_t<Body>, Status>) {
      return std::forward<Body>(body)();
    } else {
      std::forward<Body>(body)();
      return Status::OK();
    }
  } catch (const std::exception& e) {
    try {
      return Status::Error(std::string(where) + " threw: " + e.what());
    } catch (...) {
    }
  } catch (...) {
    try {
      return Status::Error(std::string(where) + " threw a non-standard exception");
    } catch (...) {
    }
  }
  return Status::Error("callback threw");  // fits the small-string buffer: no allocation
}

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_CATCH_ALL_H_
