// OperationExecutor: runs volume operations (mount, remount, teardown) with at most one in flight
// per volume, the filesystem work on the libuv thread pool, and per-volume exponential backoff
// after failures (docs/kubelet-behavior.md §6.5). A failing volume never blocks another.
//
// One writer per node: with a WriteGate (write_gate.h), the pool thread asks the gate right before
// an operation's work runs; when it is closed (the node's lock was lost after the operation was
// queued) the work does not run and the operation completes with CancelledStatus(): its own
// outcome, not a failure (no backoff, no last error; the caller retries it once writes are
// allowed again). Work already running when the gate closes finishes, and is logged with the
// gate's writer when it ends after the close. While work runs, WriteGate::Current() on its thread
// is the gate.
//
// Loop-thread only: Run, Forget and the queries must be called on the loop thread, and
// `done` callbacks run there. `work` runs on a pool thread and must not touch loop-owned state.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_OPERATION_EXECUTOR_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_OPERATION_EXECUTOR_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "base/status.h"
#include "volumemanager/disk/write_gate.h"
#include "volumemanager/reconciler/exponential_backoff.h"
#include "volumemanager/state/volume_key.h"

namespace volumemanager {

// What the reconciler needs of an executor: one operation per volume on the pool and each
// volume's backoff. OperationExecutor is the daemon's; the reconciler's unit tests substitute a
// fake that runs the work when told to.
class OperationRunner {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  virtual ~OperationRunner() = default;
  virtual bool CanStart(const VolumeKey& key, SteadyTime now) const = 0;
  virtual bool Run(const VolumeKey& key, std::function<base::Status()> work,
                   std::function<void(const base::Status&)> done) = 0;
  virtual const ExponentialBackoff* Backoff(const VolumeKey& key) const = 0;
  virtual bool InFlight(const VolumeKey& key) const = 0;
  virtual void Forget(const VolumeKey& key) = 0;
};

class OperationExecutor final : public OperationRunner {
 public:
  using Clock = std::chrono::steady_clock;

  // `clock` (tests) tells when an operation ended, for its backoff. `gate` (not owned; null: always
  // open) is asked on the pool thread before each operation's work.
  explicit OperationExecutor(uv_loop_t* loop,
                             std::function<Clock::time_point()> clock = &Clock::now,
                             const WriteGate* gate = nullptr)
      : loop_(loop), clock_(std::move(clock)), gate_(gate) {}
  OperationExecutor(const OperationExecutor&) = delete;
  OperationExecutor& operator=(const OperationExecutor&) = delete;

  // True when an operation for `key` may start now: none in flight and no backoff pending.
  bool CanStart(const VolumeKey& key, Clock::time_point now) const override;

  // Starts `work` on the thread pool unless CanStart is false (then returns false and does
  // nothing). `done` gets work's status on the loop thread, after the backoff was updated: reset
  // on success, grown on failure, untouched when cancelled (IsCancelled: the gate was closed and
  // `work` did not run, or the work reported CancelledStatus() itself).
  bool Run(const VolumeKey& key, std::function<base::Status()> work,
           std::function<void(const base::Status&)> done) override;

  // Backoff state of `key`, for messages: when it may retry and the current delay.
  const ExponentialBackoff* Backoff(const VolumeKey& key) const override;
  // The error of `key`'s last operation, "" after a success (also of a volume that never
  // mounted, which the actual state does not hold).
  std::string LastError(const VolumeKey& key) const;
  // The same error as a Status (with the API's code and reason when it is an API answer, e.g. a
  // 403 on an object the volume reads); OK after a success or when there is none.
  base::Status LastErrorStatus(const VolumeKey& key) const;

  // True while an operation for `key` runs.
  bool InFlight(const VolumeKey& key) const override {
    auto it = entries_.find(key);
    return it != entries_.end() && it->second.in_flight;
  }

  // Lets `key` retry at once (what its last attempt failed on changed); its delay is kept for the
  // next failure. No-op when it has no backoff.
  void RetryNow(const VolumeKey& key);

  // Forgets a volume's backoff (its pod is gone). No-op while an operation for it is in flight.
  void Forget(const VolumeKey& key) override;

  int in_flight() const { return in_flight_count_; }
  // Operations cancelled by the closed gate so far (tests, metrics).
  uint64_t cancelled() const { return cancelled_count_; }
  // Volumes with an operation in flight or a backoff remembered (bounded memory, tests).
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    bool in_flight = false;
    ExponentialBackoff backoff;
    base::Status last_error;
  };
  struct Request;

  uv_loop_t* loop_;
  std::function<Clock::time_point()> clock_;
  const WriteGate* gate_;
  std::map<VolumeKey, Entry> entries_;
  int in_flight_count_ = 0;
  uint64_t cancelled_count_ = 0;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_OPERATION_EXECUTOR_H_
