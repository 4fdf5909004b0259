#include "leaderelection/leader_election_config.h"

#include "base/random_uuid.h"

namespace leaderelection {
namespace {

using std::chrono::milliseconds;

std::string Millis(milliseconds d) { return std::to_string(d.count()) + "ms"; }

}  // namespace

const char* LockTypeName(LockType type) { return type == LockType::kFile ? "file" : "leases"; }

base::Result<LockType> ParseLockType(const std::string& text) {
  if (text == "file") return LockType::kFile;
  if (text == "leases") return LockType::kLeases;
  return base::Status::Error("--leader-elect-resource-lock: \"" + text +
                             "\" is not a lock type (file, leases)");
}

LeaderElectionTiming DefaultTiming(LockType type) {
  if (type == LockType::kFile) {
    return {milliseconds(15000), milliseconds(10000), milliseconds(400)};
  }
  return {milliseconds(40000), milliseconds(25000), milliseconds(10000)};
}

base::Status ValidateTiming(const LeaderElectionTiming& t, LockType type) {
  if (t.lease_duration.count() <= 0) {
    return base::Status::Error("--leader-elect-lease-duration must be greater than zero");
  }
  if (t.renew_deadline.count() <= 0) {
    return base::Status::Error("--leader-elect-renew-deadline must be greater than zero");
  }
  if (t.retry_period.count() <= 0) {
    return base::Status::Error("--leader-elect-retry-period must be greater than zero");
  }
  if (t.lease_duration <= t.renew_deadline) {
    return base::Status::Error("--leader-elect-lease-duration (" + Millis(t.lease_duration) +
                               ") must be greater than --leader-elect-renew-deadline (" +
                               Millis(t.renew_deadline) + ")");
  }
  if (static_cast<double>(t.renew_deadline.count()) <=
      kJitterFactor * static_cast<double>(t.retry_period.count())) {
    return base::Status::Error("--leader-elect-renew-deadline (" + Millis(t.renew_deadline) +
                               ") must be greater than 1.2 x --leader-elect-retry-period (" +
                               Millis(t.retry_period) + ")");
  }
  if (t.retry_period + t.renew_deadline >= t.lease_duration) {
    return base::Status::Error(
        "--leader-elect-retry-period + --leader-elect-renew-deadline (" +
        Millis(t.retry_period + t.renew_deadline) + ") must be less than " +
        "--leader-elect-lease-duration (" + Millis(t.lease_duration) +
        "): a holder that cannot renew must stop before anyone else may take over");
  }
  if (type == LockType::kLeases && t.lease_duration.count() % 1000 != 0) {
    return base::Status::Error("--leader-elect-lease-duration (" + Millis(t.lease_duration) +
                               ") must be whole seconds with --leader-elect-resource-lock leases");
  }
  return base::Status::OK();
}

base::Result<LeaderElectionTiming> ResolveTiming(const LeaderElectionConfig& config) {
  LeaderElectionTiming t = DefaultTiming(config.resource_lock);
  auto take = [](const std::optional<std::chrono::nanoseconds>& flag, milliseconds* out) {
    if (flag) *out = std::chrono::duration_cast<milliseconds>(*flag);
  };
  take(config.lease_duration, &t.lease_duration);
  take(config.renew_deadline, &t.renew_deadline);
  take(config.retry_period, &t.retry_period);
  base::Status s = ValidateTiming(t, config.resource_lock);
  if (!s.ok()) return s;
  return t;
}

std::string DefaultLeaseName(const std::string& node_name) { return "volumemanager-" + node_name; }

std::string NewIdentity(const std::string& hostname) { return hostname + "_" + base::RandomUuid(); }

}  // namespace leaderelection
