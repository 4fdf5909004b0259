// LeaderElectionConfig: the controller-manager's leader-election flags as one value, with the
// defaults of each lock and client-go's validation (plus one rule of ours, below).
//
//   --leader-elect                        bool, default true
//   --leader-elect-resource-lock          file (default) | leases
//   --leader-elect-lease-duration         default per lock (below)
//   --leader-elect-renew-deadline         default per lock
//   --leader-elect-retry-period           default per lock
//   --leader-elect-resource-namespace     leases: the Lease's namespace (no default here: in
//                                         cluster the pod's own namespace)
//   --leader-elect-resource-name          leases: default "volumemanager-<node name>"
//
// Defaults per lock:
// * file: lease 15 s, renew deadline 10 s, retry period 400 ms. The kernel gives exclusion and
//   frees the lock when its holder dies, so takeover waits only for the contender's next attempt,
//   retryPeriod x (1 + 1.2 x rand): 400-880 ms, under a second after a graceful stop or kill -9.
//   An attempt is an open, a flock and a close; a renewal a stat and an fstat. The lease duration
//   only goes into the record written for humans.
// * leases: lease 40 s, renew every 10 s (retry period), renew deadline 25 s: the kubelet's node
//   lease timing (renew interval = a quarter of the duration), so thousands of nodes add one
//   write each per 10 s instead of one per 2 s. A holder whose renewals fail stops at most
//   10 + 25 = 35 s after sending its last successful renewal, 5 s before anyone else may take
//   the Lease (the Lease duration counts from when they saw that renewal, which is later).
// Validation (client-go's NewLeaderElector): each duration > 0, leaseDuration > renewDeadline,
// renewDeadline > 1.2 x retryPeriod. Ours on top: retryPeriod + renewDeadline < leaseDuration,
// because the holder may go that long after its last successful renewal before it gives up;
// with leases, the lease duration is whole seconds (it is written as leaseDurationSeconds).
#ifndef VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTION_CONFIG_H_
#define VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTION_CONFIG_H_

#include <chrono>
#include <optional>
#include <string>

#include "base/status.h"

namespace leaderelection {

enum class LockType { kFile, kLeases };

// "file" / "leases".
const char* LockTypeName(LockType type);
// Fails naming the flag and the accepted values.
base::Result<LockType> ParseLockType(const std::string& text);

// client-go's JitterFactor: acquire attempts are retryPeriod x (1 + rand x 1.2) apart.
inline constexpr double kJitterFactor = 1.2;

struct LeaderElectionTiming {
  std::chrono::milliseconds lease_duration;
  std::chrono::milliseconds renew_deadline;
  std::chrono::milliseconds retry_period;
};

LeaderElectionTiming DefaultTiming(LockType type);

// The file name of the file lock inside the state dir.
inline constexpr char kFileLockName[] = "leader.lock";

struct LeaderElectionConfig {
  bool leader_elect = true;
  LockType resource_lock = LockType::kFile;
  // Unset: the lock's default.
  std::optional<std::chrono::nanoseconds> lease_duration;
  std::optional<std::chrono::nanoseconds> renew_deadline;
  std::optional<std::chrono::nanoseconds> retry_period;
  // Leases only.
  std::string resource_namespace;
  std::string resource_name;
};

// The timing for `config`: its durations, the lock's defaults for the unset ones, validated.
// Errors name the flags.
base::Result<LeaderElectionTiming> ResolveTiming(const LeaderElectionConfig& config);

// Validates a complete timing for a lock (the rules above).
base::Status ValidateTiming(const LeaderElectionTiming& timing, LockType type);

// "volumemanager-<node name>".
std::string DefaultLeaseName(const std::string& node_name);

// client-go's identity shape: "<host name>_<random UUID>", unique per process.
std::string NewIdentity(const std::string& hostname);

}  // namespace leaderelection

#endif  // VOLUMEMANAGER_LEADERELECTION_LEADER_ELECTION_CONFIG_H_
