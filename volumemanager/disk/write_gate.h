// WriteGate: whether this process may write to the root dir now, readable from any thread.
//
// One writer per node: the program (cmd/volumemanager/) opens the gate until the end of the node
// lock's term each time the lock is acquired or renewed (the elector's loss deadline), and closes
// it at once when the lock is lost or given up. The gate itself holds only that monotonic
// deadline, in one atomic: a pool thread asks it right before an operation's first filesystem
// call (OperationExecutor), right before a `..data` rename (SetUpVolume) and right before a
// subPath copy writes (UpdateSubPaths), the removal queue's worker right before each removal,
// and each gets the truth even while the loop thread is stalled and late to run the elector's
// timers. A process that
// takes no lock opens the gate for good (OpenForever).
//
// The writer identity names this process in the log lines of writes that finish after the gate
// closed (those already past their first filesystem call finish: see OperationExecutor). What the
// gate refuses ends as CancelledStatus(), which IsCancelled() tells from a failure.
//
// Thread safety: every method may be called from any thread.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_DISK_WRITE_GATE_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_DISK_WRITE_GATE_H_

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "base/status.h"

namespace volumemanager {

// The outcome of an operation that did not run because writes were revoked (the node lock was
// lost) before its first filesystem call: not a failure (no backoff, no Event, no failure
// counted); the volume is due again once writes are allowed.
inline base::Status CancelledStatus() {
  return base::Status::Error("operation cancelled: writes were revoked", ECANCELED);
}
inline bool IsCancelled(const base::Status& s) { return !s.ok() && s.sys_errno() == ECANCELED; }

class WriteGate {
 public:
  using Clock = std::chrono::steady_clock;

  // Closed until OpenUntil or OpenForever.
  explicit WriteGate(std::string writer = "") : writer_(std::move(writer)) {}
  WriteGate(const WriteGate&) = delete;
  WriteGate& operator=(const WriteGate&) = delete;

  // Open while the monotonic clock is before `deadline` (a deadline in the past closes it).
  void OpenUntil(Clock::time_point deadline) {
    deadline_ns_.store(deadline.time_since_epoch() / std::chrono::nanoseconds(1),
                       std::memory_order_release);
  }
  void OpenForever() { deadline_ns_.store(kForever, std::memory_order_release); }
  void Close() { deadline_ns_.store(kClosed, std::memory_order_release); }

  bool Open(Clock::time_point now) const {
    const int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
    return deadline == kForever || now.time_since_epoch() / std::chrono::nanoseconds(1) < deadline;
  }
  bool Open() const { return Open(Clock::now()); }

  const std::string& writer() const { return writer_; }

  // The gate of the operation running on this thread (set by OperationExecutor around an
  // operation's work), or null: how code deep in a write (SetUpVolume's `..data` rename) asks
  // the gate that governs it without every request carrying it.
  static const WriteGate* Current() { return current_; }
  // Makes `gate` the current one on this thread for the scope's lifetime.
  class Scope {
   public:
    explicit Scope(const WriteGate* gate) : previous_(std::exchange(current_, gate)) {}
    ~Scope() { current_ = previous_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const WriteGate* previous_;
  };

 private:
  static constexpr int64_t kClosed = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

  const std::string writer_;
  std::atomic<int64_t> deadline_ns_{kClosed};
  static inline thread_local const WriteGate* current_ = nullptr;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_DISK_WRITE_GATE_H_
