#include "volumemanager/reconciler/operation_metrics.h"

#include <algorithm>
#include <cerrno>

namespace volumemanager {

std::string FailureReason(const base::Status& error, bool objects_unavailable) {
  // A link, a file or another mount where the volume's path should hold the daemon's own dirs:
  // refused, never followed (atomicwriter::OpenBeneath, the one-mount removal).
  if (error.sys_errno() == ELOOP || error.sys_errno() == ENOTDIR || error.sys_errno() == EXDEV) {
    return "unsafe_path";
  }
  if (error.sys_errno() != 0) return "filesystem";
  if (objects_unavailable) return "object_unavailable";
  return "invalid_volume";
}

std::string PluginNameOfDir(const std::string& plugin_dir) {
  std::string name = plugin_dir;
  std::replace(name.begin(), name.end(), '~', '/');
  return name;
}

const std::vector<double>& OperationMetrics::OperationBuckets() {
  static const std::vector<double> buckets = {.1, .25, .5, 1,   2.5, 5,  10,
                                              15, 25,  50, 120, 300, 600};
  return buckets;
}

const std::vector<double>& OperationMetrics::PropagationBuckets() {
  static const std::vector<double> buckets = {.005, .01, .025, .05, .1, .25, .5, 1,
                                              2.5,  5,   10,   30,  60, 120, 300};
  return buckets;
}

void OperationMetrics::ObserveOperation(const std::string& operation_name,
                                        const std::string& volume_plugin, bool ok,
                                        std::chrono::nanoseconds took) {
  OperationKey key{volume_plugin, operation_name, ok ? "success" : "fail-unknown"};
  auto it = operations_.find(key);
  if (it == operations_.end()) {
    it = operations_.emplace(key, server::Histogram(OperationBuckets())).first;
  }
  it->second.Observe(std::chrono::duration<double>(took).count());
}

void OperationMetrics::ObservePropagation(const std::string& volume_plugin,
                                          std::chrono::nanoseconds took) {
  auto it = propagation_.find(volume_plugin);
  if (it == propagation_.end()) {
    it = propagation_.emplace(volume_plugin, server::Histogram(PropagationBuckets())).first;
  }
  it->second.Observe(std::chrono::duration<double>(took).count());
}

void OperationMetrics::CountFailure(const std::string& operation_name,
                                    const std::string& volume_plugin, const std::string& reason) {
  ++failures_[{operation_name, volume_plugin, reason}];
}

}  // namespace volumemanager
