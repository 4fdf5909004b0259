// LeaderElector: client-go's tools/leaderelection on the libuv loop, over a ResourceLock
// (docs/kubernetes-api.md §6). One elector per process and lock; at most one process leads.
//
// * Acquire: an attempt at Start, then one every retryPeriod x (1 + rand x jitter) until one
//   succeeds; then OnStartedLeading.
// * Renew: retryPeriod after each successful renewal, attempts every retryPeriod. If none has
//   succeeded within retryPeriod + renewDeadline of sending the last successful one, leadership
//   is lost at once: the attempt in flight is cancelled and OnStoppedLeading runs, even while a
//   request hangs. Counting from the send (client-go counts from the answer) keeps a slow answer
//   from stretching the term: the others' lease duration starts no earlier than the server's write.
//   An attempt that finds the lock held by someone else ends leadership at once too.
// * A lock the kernel holds for this process (ResourceLock::HeldUntilSuspect: the file lock with
//   its watches) is not renewed: after the acquire the term has no end (on_term_extended gets
//   time_point::max()) and no timer runs, so a leader's loop wakes for nothing. When the lock
//   suspects its hold is gone (its file replaced), a renewal runs at once and the term ends
//   retryPeriod + renewDeadline later unless one succeeds, as for a Lease.
// * One attempt (client-go's tryAcquireOrRenew): while leading with an unexpired lease, an Update
//   of the cached record with a new renewTime; otherwise (or when that fails) Get; Create when
//   the lock does not exist; a record held by someone else is respected until it has not changed
//   for its leaseDurationSeconds, as timed on this process's monotonic clock from when this
//   process saw it change (never by comparing the record's timestamps with our clock: skew between
//   writers does not matter); else Update with us as holder (acquireTime and leaseTransitions kept
//   when already ours, else acquireTime now and leaseTransitions + 1). Any failure (a 409
//   included) fails the attempt; the loop tries again. An attempt not answered within
//   renewDeadline is cancelled and counts as failed.
// * OnNewLeader runs when the holder seen in the record changes ("" when released).
// * Stop: cancels what is in flight; if leading, runs OnStoppedLeading first (the owner stops its
//   writes there), then, with release_on_cancel, writes a released record (no holder, lease 1 s,
//   same leaseTransitions; on failure reads the lock again and retries while it is still ours,
//   for at most renewDeadline), so a waiting contender takes over at its next attempt.
//
// Unlike client-go, OnStoppedLeading runs only at the end of a term (never for an elector that
// did not lead). After leadership is lost the elector is stopped; Start() campaigns again (it may
// be called from inside OnStoppedLeading). Callbacks run on the loop thread; they must not
// destroy the elector. Not thread-safe: loop thread only. Destroying it cancels everything and
// runs no callback (no release: call Stop first and wait for its `done`).
#ifndef VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTOR_H_
#define VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTOR_H_

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "leaderelection/leader_election_config.h"
#include "leaderelection/resource_lock.h"

namespace leaderelection {

struct LeaderCallbacks {
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;
  // Each time a term starts (before on_started_leading) or is renewed: the monotonic time at
  // which it ends unless renewed again, the deadline IsLeader() checks. For a check of the term
  // off the loop thread (e.g. volumemanager::WriteGate).
  std::function<void(std::chrono::steady_clock::time_point loss_deadline)> on_term_extended;
};

struct LeaderElectorOptions {
  // Unique per process (NewIdentity); written into the lock as holderIdentity.
  std::string identity;
  LeaderElectionTiming timing = DefaultTiming(LockType::kFile);
  double jitter_factor = kJitterFactor;
  bool release_on_cancel = true;
  // Tests: the monotonic clock (expiry, deadlines, liveness), the wall clock (acquireTime and
  // renewTime text only) and the random source of the jitter, in [0, 1).
  std::function<std::chrono::steady_clock::time_point()> steady_clock;
  std::function<std::chrono::system_clock::time_point()> wall_clock;
  std::function<double()> random01;
};

class LeaderElector {
 public:
  using Clock = std::chrono::steady_clock;

  // Fails when the identity is empty or the timing is invalid for a file lock's rules (the lock
  // type's own rules are ResolveTiming's).
  static base::Result<std::unique_ptr<LeaderElector>> Create(uv_loop_t* loop,
                                                             std::unique_ptr<ResourceLock> lock,
                                                             LeaderElectorOptions options,
                                                             LeaderCallbacks callbacks);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Starts campaigning (the first attempt on the next loop iteration). No-op unless stopped.
  void Start();
  // See above. `done` (optional) runs on the loop thread once stopped and released; at once when
  // not running.
  void Stop(std::function<void()> done = nullptr);

  // Leading, and the loss deadline not passed (checked against the clock too, so the answer is
  // right even while the loop is late to run the deadline timer).
  bool IsLeader() const;
  // The holder last seen in the record ("" when none).
  const std::string& leader() const { return reported_leader_; }
  const std::string& identity() const { return options_.identity; }
  bool running() const { return state_ == State::kAcquiring || state_ == State::kLeading; }

  // Liveness for /healthz: when the elector's loop last did something (an attempt started or
  // answered, a timer fired). While running it does something at least every quiet_limit(),
  // except while leading on a lock held until suspect (ResourceLock::HeldUntilSuspect), which
  // needs nothing done.
  Clock::time_point last_activity() const { return last_activity_; }
  std::chrono::milliseconds quiet_limit() const;
  // running() and last_activity() within quiet_limit() of `now` (or a term needing no renewal).
  bool Alive(Clock::time_point now) const;

  // Attempts started so far (acquire and renew), for tests and metrics.
  uint64_t attempts() const { return attempts_; }
  // Why the last attempt could not use the lock (an error other than "held by another": a lock
  // file that is a symlink, an API error), or "" once an attempt could. Each distinct error is
  // logged once, not at every retry (/debug/state and a metric show it for as long as it lasts).
  const std::string& last_error() const { return last_error_; }
  ResourceLock* lock() const { return lock_.get(); }

 private:
  enum class State { kIdle, kAcquiring, kLeading, kStopping, kStopped };
  enum class Outcome { kSucceeded, kFailed, kHeldByOther };

  LeaderElector(uv_loop_t* loop, std::unique_ptr<ResourceLock> lock, LeaderElectorOptions options,
                LeaderCallbacks callbacks);

  Clock::time_point Now() const;
  std::string WallNow() const;
  std::chrono::milliseconds JitteredRetry();
  void Touch() { last_activity_ = Now(); }

  // One tryAcquireOrRenew; `done` runs once unless the attempt is cancelled (generation moves).
  void TryAcquireOrRenew(std::function<void(Outcome)> done);
  void SlowPath(LeaderElectionRecord desired, uint64_t generation,
                std::function<void(Outcome)> done);
  // Notes `record` with the time now when it differs from the one seen last (or `force`: our own
  // successful write).
  void Observe(const LeaderElectionRecord& record, bool force);
  bool ObservedIsUs() const { return observed_record_.holder_identity == options_.identity; }
  bool ObservedLeaseValid(Clock::time_point now) const;
  void MaybeReportTransition();

  void ScheduleAttempt(std::chrono::milliseconds delay);
  void ArmDeadline(std::chrono::milliseconds delay);
  void RunAttempt();
  void OnAttemptDone(uint64_t generation, Outcome outcome);
  void OnDeadline();
  void BecomeLeader();
  // After an acquire or a successful renewal: the next renewal and the loss deadline, or, for a
  // lock held until suspect, neither.
  void ContinueTerm();
  // The lock's hold may be gone: renew at once, the term ending as if renewed now.
  void OnSuspect();
  void ArmLossDeadline();
  void Lose(const std::string& why);
  void CancelAttempt();
  // Writes the released record; `reread` reads the lock first (after a failed write).
  void ReleaseAttempt(bool reread);
  // Records the outcome of a lock call: an error is logged when it differs from the last one; OK
  // clears it (logged when there was one).
  void NoteError(const base::Status& s);
  void FinishStop();

  // Runs a callback body behind base::CatchAll; a throw is logged.
  template <typename F>
  void Guarded(const char* where, F&& body);

  std::unique_ptr<ResourceLock> lock_;
  LeaderElectorOptions options_;
  LeaderCallbacks callbacks_;
  State state_ = State::kIdle;

  uv_timer_t* attempt_timer_;   // next attempt
  uv_timer_t* deadline_timer_;  // acquiring: attempt timeout; leading: loss deadline;
                                // stopping: release deadline
  uint64_t generation_ = 0;     // moves when an attempt is cancelled
  bool attempt_in_flight_ = false;
  Clock::time_point attempt_sent_{};
  Clock::time_point last_renew_sent_{};
  Clock::time_point lost_at_{};
  bool quiet_term_ = false;  // leading on a lock held until suspect: no attempt, no deadline

  LeaderElectionRecord observed_record_;
  bool observed_ = false;
  Clock::time_point observed_time_{};
  std::string reported_leader_;
  bool reported_ = false;

  std::function<void()> stop_done_;
  Clock::time_point last_activity_{};
  uint64_t attempts_ = 0;
  std::string last_error_;
};

}  // namespace leaderelection

#endif  // VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTOR_H_
