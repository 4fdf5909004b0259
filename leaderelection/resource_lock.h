// ResourceLock: where the leader-election record lives, as client-go's resourcelock.Interface:
// Get / Create / Update of a LeaderElectionRecord, with the lock's own concurrency control
// (a Lease's resourceVersion, a kernel file lock). LeaderElector drives it; the lock decides
// nothing about timing.
//
// Calls are asynchronous: `done` runs on the loop thread, exactly once per call unless
// CancelPending() or the destructor comes first. A lock may call `done` before the call returns
// (the file lock does: its work is a few system calls). At most one call is outstanding at a time.
// Not thread-safe.
#ifndef VOLUMEMANAGER_LEADERELECTION_RESOURCE_LOCK_H_
#define VOLUMEMANAGER_LEADERELECTION_RESOURCE_LOCK_H_

#include <uv.h>

#include <functional>
#include <string>

#include "base/status.h"
#include "leaderelection/leader_election_record.h"

namespace leaderelection {

struct GetResult {
  base::Status status;
  // The lock does not exist yet (only when status is OK): Create comes next.
  bool not_found = false;
  LeaderElectionRecord record;
};

class ResourceLock {
 public:
  virtual ~ResourceLock() = default;

  virtual void Get(std::function<void(GetResult)> done) = 0;
  // Fails when the lock exists already (someone else created it first).
  virtual void Create(const LeaderElectionRecord& record,
                      std::function<void(base::Status)> done) = 0;
  // Writes `record` over the one the last Get or Create or Update saw; fails when the lock changed
  // since then (a conflict) or cannot be held.
  virtual void Update(const LeaderElectionRecord& record,
                      std::function<void(base::Status)> done) = 0;
  // No callback of an outstanding call runs afterwards.
  virtual void CancelPending() = 0;
  // The loop the elector runs on, given once by LeaderElector before the first call: a lock may
  // watch it for what it must notice between calls (the file lock: its file replaced). The lock
  // must then be destroyed before the loop is closed. Default: unused.
  virtual void SetLoop(uv_loop_t* loop) { (void)loop; }

  // Whether the hold the last successful Create or Update confirmed lasts without renewals until
  // the lock says otherwise: a lock the kernel holds for this process (the file lock, while its
  // watches report on the loop a file replaced under it). The elector then ends the term only
  // when `suspect` runs and a renewal fails, and makes no attempt meanwhile. Default: false (a
  // Lease lapses unless renewed).
  virtual bool HeldUntilSuspect() const { return false; }
  // Given once by LeaderElector before the first call; the lock runs it on the loop thread when
  // its hold may be gone (never from inside one of its own calls).
  virtual void SetOnSuspect(std::function<void()> suspect) { (void)suspect; }

  // For log lines, e.g. "file /var/lib/volumemanager/leader.lock" or "lease vm-system/x".
  virtual std::string Describe() const = 0;
};

}  // namespace leaderelection

#endif  // VOLUMEMANAGER_LEADERELECTION_RESOURCE_LOCK_H_
