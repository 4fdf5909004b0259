// DaemonConfig: the daemon's configuration from its kubelet-style command line and an optional
// configuration file (config_file.h), validated.
// ParseDaemonFlags never exits or prints: it returns the config, text to print and exit 0 with
// (--help, --version, and --validate-only's effective configuration), or an error message for the
// caller to print (exit code 2).
#ifndef VOLUMEMANAGER_CONFIG_DAEMON_CONFIG_H_
#define VOLUMEMANAGER_CONFIG_DAEMON_CONFIG_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/change_detection_strategy.h"
#include "leaderelection/leader_election_config.h"

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

// The admin server's default addresses: ports of this daemon's own, next to the kubelet's
// (10248-10250) and kube-proxy's (10249, 10256) but not clashing with them.
inline constexpr char kDefaultHealthzBindAddress[] = "0.0.0.0:10358";
inline constexpr char kDefaultDebugBindAddress[] = "127.0.0.1:10359";

struct DaemonConfig {
  std::string root_dir = "/var/lib/kubelet";
  // The daemon's own state (the ownership journal), outside the kubelet's root dir.
  std::string state_dir = "/var/lib/volumemanager";
  std::string node_name;  // --node-name, else $NODE_NAME, else the host name
  std::string pod_manifest_path;
  std::string manifest_url;
  std::string object_manifest_path;
  // How long a manifest file (--pod-manifest-path, --object-manifest-path) that is gone, or
  // cannot be read or decoded, may take to come back or be completed before it counts
  // (manifestdir/manifest_grace.h): a checkout's unlink and create is one change, a `cat >`
  // caught mid-write no error.
  std::chrono::nanoseconds manifest_settle_time = std::chrono::seconds(1);
  // Cluster mode: only with --kubeconfig or --in-cluster (never from $KUBECONFIG, so a
  // developer's run cannot join a cluster by accident).
  std::string kubeconfig;
  bool in_cluster = false;
  double kube_api_qps = 50;  // the kubelet's defaults; 0: client-go's (5)
  int kube_api_burst = 100;
  VolumeOwnership volume_ownership = VolumeOwnership::kSelf;
  // Cluster mode: what the daemon may read, as the rights it was given (the chart's
  // rbac.secrets: false and rbac.namespaces): --no-secrets, --object-namespaces (empty: every
  // namespace). Objects outside are never requested: configured policy, not a failure
  // (cache/read_policy.h).
  bool read_secrets = true;
  std::vector<std::string> object_namespaces;
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
  // Reload actions (volumemanager.io/reload): HTTP requests in flight node-wide, each one's
  // deadline, and whether signal actions may run (cluster mode; the chart grants hostPID and
  // CAP_KILL with it).
  int reload_max_concurrent = 32;
  std::chrono::nanoseconds reload_timeout = std::chrono::seconds(5);
  bool reload_signals = false;
  // Observe mode (canaries): everything but writing. Pods and objects are read, each volume's
  // payload is computed and compared with the disk, and what a normal run would change is
  // reported (log, /debug/state, a metric); no lock, no dir, no journal, no Event, no reload.
  bool observe = false;
  LogFormat log_format = LogFormat::kText;
  int verbosity = 0;
  // An event-loop iteration whose callbacks run this long or longer is logged.
  std::chrono::nanoseconds loop_stall_log_threshold = std::chrono::milliseconds(100);
  // The admin server's listeners ("IP:PORT", "" = off): probes and metrics, reachable from the
  // node's network by default (the chart's probes and scrapes use it); debug endpoints, which
  // name every pod and object, on loopback unless asked otherwise.
  std::string healthz_bind_address = kDefaultHealthzBindAddress;
  std::string debug_bind_address = kDefaultDebugBindAddress;
  // One writer per node (--leader-elect*): validated, with each lock's default timing for the
  // durations not given.
  leaderelection::LeaderElectionConfig leader_election;
  leaderelection::LeaderElectionTiming leader_election_timing =
      leaderelection::DefaultTiming(leaderelection::LockType::kFile);
  // Events' own client-side rate limit (the kubelet's --event-qps and --event-burst; 0 QPS:
  // client-go's default of 5).
  double event_qps = 50;
  int event_burst = 100;
  // Dynamic config (dynamicconfig/): "namespace/name" of the shared ConfigMap ("" = off; a
  // ConfigMap "<name>-<node name>" in the same namespace overrides it for this node), where its
  // checkpoints go (default <state dir>/dynamic-config) and how long a new one is on trial.
  std::string dynamic_config;
  std::string dynamic_config_dir;
  std::chrono::nanoseconds dynamic_config_trial_duration = std::chrono::minutes(10);
};

inline bool ClusterMode(const DaemonConfig& c) { return !c.kubeconfig.empty() || c.in_cluster; }

struct ParsedFlags {
  std::optional<DaemonConfig> config;  // set when the daemon should run
  std::string output;  // help, version or --validate-only text to print (exit 0) when no config
  // --validate-only: `output` is the effective configuration (Configz's JSON), `config` unset.
  bool validate_only = false;
  std::string config_file;  // --config, "" when none
  // Where each field's value came from (config_file.h's names): "flag", "dynamic" (the dynamic
  // config), "file" or "default".
  std::map<std::string, std::string> sources;
};

using ReadFileFunction = std::function<base::Result<std::string>(const std::string& path)>;
// The largest --config file read: a configuration is a few KiB.
inline constexpr size_t kMaxConfigFileBytes = 1 << 20;
// The --config file, through symlinks, if it is a regular file of at most kMaxConfigFileBytes
// (base::ReadRegularFile: a FIFO or device is refused, never waited on or read without end).
// Errors name the path.
base::Result<std::string> ReadConfigFile(const std::string& path);

// `args` with each "--flag=" (an empty value after the '=') of a flag that `takes_value` split
// into "--flag" and "": CLI11 would otherwise take the next argument as the value, and "--flag="
// means the empty value (an empty bind address turns a listener off). For every CLI11 parser of
// the binary (the daemon's flags, preflight's).
std::vector<std::string> SplitEmptyValues(
    const std::vector<std::string>& args,
    const std::function<bool(const std::string& flag)>& takes_value);

// The node's name as the daemon picks it: `flag` (--node-name) when given, else $NODE_NAME from
// `environment`, else `hostname`; lowercased (as the kubelet's). Not validated.
std::string ResolveNodeName(const std::string& flag,
                            const std::map<std::string, std::string>& environment,
                            const std::string& hostname);

// `environment` stands in for getenv (NODE_NAME), `hostname` for the host name and `read_file`
// for reading the --config file, for tests. With --config, the file's fields are applied first
// and the command line's flags override them (config_file.h); an error about a value from the
// file starts with "--config FILE: field NAME: ".
// `dynamic_config` is the text of a dynamically assigned VolumeManagerConfiguration
// (dynamicconfig/): its fields override the file's and the command line's flags override them
// (flags > dynamic > file > defaults); an error about one of its values starts with "dynamic
// config: field NAME: ". It may not set the fields that locate it or the daemon's identity
// (DynamicConfigForbidden).
base::Result<ParsedFlags> ParseDaemonFlags(
    const std::vector<std::string>& args, const std::map<std::string, std::string>& environment,
    const std::string& hostname, const ReadFileFunction& read_file = ReadConfigFile,
    const std::optional<std::string>& dynamic_config = std::nullopt);

}  // namespace config

#endif  // VOLUMEMANAGER_CONFIG_DAEMON_CONFIG_H_
