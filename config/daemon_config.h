// DaemonConfig: the daemon's configuration from its kubelet-style command line, validated.
// ParseDaemonFlags never exits or prints: it returns the config, text to print and exit 0 with
// (--help, --version, and --validate-only's effective configuration), or an error message for the
// caller to print (exit code 2).
#ifndef VOLUMEMANAGER_CONFIG_DAEMON_CONFIG_H_
#define VOLUMEMANAGER_CONFIG_DAEMON_CONFIG_H_

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/change_detection_strategy.h"

namespace config {

enum class LogFormat { kText, kJson };

// Who owns a volume's life (set-up, teardown): in cluster mode the kubelet does by default and the
// daemon only refreshes content of volumes the kubelet has set up; `self` makes the daemon set up
// and tear down the volumes of the pods it serves (standalone mode, or a node whose kubelet does
// not manage these volumes).
enum class VolumeOwnership { kKubelet, kSelf };

inline const char* VolumeOwnershipName(VolumeOwnership o) {
  return o == VolumeOwnership::kKubelet ? "kubelet" : "self";
}

struct DaemonConfig {
  std::string root_dir = "/var/lib/kubelet";
  // The daemon's own state (the ownership journal), outside the kubelet's root dir.
  std::string state_dir = "/var/lib/volumemanager";
  std::string node_name;  // --node-name, else $NODE_NAME, else the host name
  std::string pod_manifest_path;
  std::string manifest_url;
  std::string object_manifest_path;
  // Cluster mode: only with --kubeconfig or --in-cluster (never from $KUBECONFIG, so a
  // developer's run cannot join a cluster by accident).
  std::string kubeconfig;
  bool in_cluster = false;
  double kube_api_qps = 50;  // the kubelet's defaults; 0: client-go's (5)
  int kube_api_burst = 100;
  VolumeOwnership volume_ownership = VolumeOwnership::kSelf;
  std::chrono::nanoseconds sync_frequency = std::chrono::minutes(1);
  cache::ChangeDetectionStrategy strategy = cache::ChangeDetectionStrategy::kWatch;
  std::chrono::nanoseconds object_cache_ttl = std::chrono::minutes(1);
  // How long a version dir that ..data does not point to is left before removal.
  std::chrono::nanoseconds unpublished_grace = std::chrono::seconds(30);
  // Node allocatable for the downward API ("cpu", "memory", "ephemeral-storage" -> quantity
  // text); --node-allocatable overrides, missing entries come from the machine.
  std::map<std::string, std::string> node_allocatable;
  bool fsync = false;
  bool tmpfs = true;  // --no-tmpfs turns it off
  LogFormat log_format = LogFormat::kText;
  int verbosity = 0;
  // An event-loop iteration whose callbacks run this long or longer is logged.
  std::chrono::nanoseconds loop_stall_log_threshold = std::chrono::milliseconds(100);
};

inline bool ClusterMode(const DaemonConfig& c) { return !c.kubeconfig.empty() || c.in_cluster; }

struct ParsedFlags {
  std::optional<DaemonConfig> config;  // set when the daemon should run
  std::string output;  // help, version or --validate-only text to print (exit 0) when no config
};

// `environment` stands in for getenv (NODE_NAME) and `hostname` for the host name, for tests.
base::Result<ParsedFlags> ParseDaemonFlags(const std::vector<std::string>& args,
                                           const std::map<std::string, std::string>& environment,
                                           const std::string& hostname);

}  // namespace config

#endif  // VOLUMEMANAGER_CONFIG_DAEMON_CONFIG_H_
