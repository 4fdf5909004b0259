// OperationMetrics: what the reconciler measures of its operations, for /metrics:
//  * every mount (including refreshes) and teardown, by plugin and outcome, in the kubelet's
//    storage_operation_duration_seconds buckets ("volume_mount" / "volume_unmount", status
//    "success" / "fail-unknown");
//  * propagation: from the first unserved remount request of a volume (an object change, a pod
//    change or the periodic resync, ActualStateOfWorld::remount_requested_at) to the new version
//    published, by plugin;
//  * failures by operation, plugin and reason (FailureReason).
// Label values are plugin names, operation names and fixed reasons: never an object's name or
// data. Loop-thread only; copied into snapshots.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_OPERATION_METRICS_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_OPERATION_METRICS_H_

#include <chrono>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "server/metrics.h"

namespace volumemanager {

inline constexpr char kOperationMount[] = "volume_mount";
inline constexpr char kOperationUnmount[] = "volume_unmount";

// Why an operation failed, as a metric label:
//  * "unsafe_path": a symlink or a file where a directory of the volume's path should be, or a
//    mount the daemon did not make on or inside a volume it tears down: refused, never followed
//    (errno ELOOP, ENOTDIR or EXDEV);
//  * "filesystem": another system call failed (the error carries an errno);
//  * "object_unavailable": an object the volume reads is missing or could not be read (not
//    found, not registered, the API server's error, a cache not synced);
//  * "invalid_volume": anything else, i.e. the volume cannot be built from what it reads (a
//    missing key, a bad path or field reference).
std::string FailureReason(const base::Status& error, bool objects_unavailable);

// "kubernetes.io~configmap" -> "kubernetes.io/configmap".
std::string PluginNameOfDir(const std::string& plugin_dir);

class OperationMetrics {
 public:
  // The kubelet's buckets for storage_operation_duration_seconds (pkg/volume/util/metrics.go).
  static const std::vector<double>& OperationBuckets();
  // From 5 ms to 5 min: a change reaches disk within a pass when all goes well, and after a
  // backoff of up to about 2 min when it does not.
  static const std::vector<double>& PropagationBuckets();

  void ObserveOperation(const std::string& operation_name, const std::string& volume_plugin,
                        bool ok, std::chrono::nanoseconds took);
  void ObservePropagation(const std::string& volume_plugin, std::chrono::nanoseconds took);
  void CountFailure(const std::string& operation_name, const std::string& volume_plugin,
                    const std::string& reason);

  // (volume_plugin, operation_name, status) -> durations.
  using OperationKey = std::tuple<std::string, std::string, std::string>;
  const std::map<OperationKey, server::Histogram>& operations() const { return operations_; }
  const std::map<std::string, server::Histogram>& propagation() const { return propagation_; }
  // (operation_name, volume_plugin, reason) -> count.
  const std::map<OperationKey, long>& failures() const { return failures_; }

 private:
  std::map<OperationKey, server::Histogram> operations_;
  std::map<std::string, server::Histogram> propagation_;
  std::map<OperationKey, long> failures_;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_OPERATION_METRICS_H_
