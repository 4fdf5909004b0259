#include "config/config_file.h"

#include <map>
#include <set>

#include "base/strings.h"
#include "config/go_duration.h"
#include "kube/yaml_to_json.h"

namespace config {
namespace {

const char* TypeText(FieldType type) {
  switch (type) {
    case FieldType::kString:
      return "string";
    case FieldType::kBool:
      return "boolean";
    case FieldType::kInteger:
      return "integer";
    case FieldType::kNumber:
      return "number";
    case FieldType::kDuration:
      return "duration string (Go syntax, e.g. 1m30s)";
    case FieldType::kStringMap:
      return "map of resource name to quantity";
  }
  return "value";
}

const char* JsonTypeText(const nlohmann::json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_object()) return "a map";
  if (v.is_array()) return "a list";
  return "null";
}

nlohmann::json Duration(std::chrono::nanoseconds d) { return FormatGoDuration(d); }

std::vector<ConfigField> MakeFields() {
  using T = FieldType;
  using C = const DaemonConfig&;
  return {
      {"rootDir", "--root-dir", T::kString, "directory holding pods/<uid>/volumes",
       [](C c) { return nlohmann::json(c.root_dir); }},
      {"stateDir", "--state-dir", T::kString, "the daemon's own state (ownership journal)",
       [](C c) { return nlohmann::json(c.state_dir); }},
      {"nodeName", "--node-name", T::kString, "this node's name",
       [](C c) { return nlohmann::json(c.node_name); }},
      {"staticPodPath", "--pod-manifest-path", T::kString, "directory of Pod manifests",
       [](C c) { return nlohmann::json(c.pod_manifest_path); }},
      {"staticPodURL", "--manifest-url", T::kString, "URL of a Pod or PodList",
       [](C c) { return nlohmann::json(c.manifest_url); }},
      {"objectManifestPath", "--object-manifest-path", T::kString,
       "directory of ConfigMap and Secret manifests",
       [](C c) { return nlohmann::json(c.object_manifest_path); }},
      {"manifestSettleTime", "--manifest-settle-time", T::kDuration,
       "how long a manifest file gone or invalid may take to come back before it counts",
       [](C c) { return Duration(c.manifest_settle_time); }},
      {"kubeconfig", "--kubeconfig", T::kString, "cluster mode: the kubeconfig file",
       [](C c) { return nlohmann::json(c.kubeconfig); }},
      {"inCluster", "--in-cluster", T::kBool, "cluster mode with the pod's service account",
       [](C c) { return nlohmann::json(c.in_cluster); }},
      {"kubeAPIQPS", "--kube-api-qps", T::kNumber, "requests per second to the API server",
       [](C c) { return nlohmann::json(c.kube_api_qps); }},
      {"kubeAPIBurst", "--kube-api-burst", T::kInteger, "requests allowed at once above the QPS",
       [](C c) { return nlohmann::json(c.kube_api_burst); }},
      {"volumeOwnership", "--volume-ownership", T::kString, "kubelet or self",
       [](C c) { return nlohmann::json(VolumeOwnershipName(c.volume_ownership)); }},
      {"secrets", "--no-secrets", T::kBool,
       "cluster mode: read Secrets from the API server (false = --no-secrets)",
       [](C c) { return nlohmann::json(c.read_secrets); }, /*inverted=*/true},
      {"objectNamespaces", "--object-namespaces", T::kString,
       "cluster mode: read ConfigMaps and Secrets only in these namespaces, comma-separated "
       "(\"\": every namespace)",
       [](C c) { return nlohmann::json(base::Join(c.object_namespaces, ",")); }},
      {"syncFrequency", "--sync-frequency", T::kDuration, "periodic resync",
       [](C c) { return Duration(c.sync_frequency); }},
      {"configMapAndSecretChangeDetectionStrategy",
       "--config-map-and-secret-change-detection-strategy", T::kString, "Get, Cache or Watch",
       [](C c) { return nlohmann::json(cache::ChangeDetectionStrategyName(c.strategy)); }},
      {"objectCacheTTL", "--object-cache-ttl", T::kDuration, "Cache strategy TTL",
       [](C c) { return Duration(c.object_cache_ttl); }},
      {"unpublishedGrace", "--unpublished-grace", T::kDuration,
       "how long unpublished version dirs stay", [](C c) { return Duration(c.unpublished_grace); }},
      {"nodeAllocatable", "--node-allocatable", T::kStringMap,
       "downward API values for unset limits, e.g. {cpu: \"4\", memory: 8Gi}",
       [](C c) { return nlohmann::json(c.node_allocatable); }},
      {"fsync", "--fsync", T::kBool, "fsync around each volume update",
       [](C c) { return nlohmann::json(c.fsync); }},
      {"tmpfs", "--no-tmpfs", T::kBool,
       "secret, downwardAPI and projected volumes on tmpfs (false = --no-tmpfs)",
       [](C c) { return nlohmann::json(c.tmpfs); }, /*inverted=*/true},
      {"reloadMaxConcurrent", "--reload-max-concurrent", T::kInteger,
       "reload actions' HTTP requests in flight node-wide",
       [](C c) { return nlohmann::json(c.reload_max_concurrent); }},
      {"reloadTimeout", "--reload-timeout", T::kDuration, "one reload HTTP attempt's deadline",
       [](C c) { return Duration(c.reload_timeout); }},
      {"reloadSignals", "--reload-signals", T::kBool, "run signal reload actions (cluster mode)",
       [](C c) { return nlohmann::json(c.reload_signals); }},
      {"observe", "--observe", T::kBool, "write nothing: report what a normal run would change",
       [](C c) { return nlohmann::json(c.observe); }},
      {"eventRecordQPS", "--event-qps", T::kNumber, "Events posted per second",
       [](C c) { return nlohmann::json(c.event_qps); }},
      {"eventBurst", "--event-burst", T::kInteger, "Events allowed at once above the QPS",
       [](C c) { return nlohmann::json(c.event_burst); }},
      {"dynamicConfig", "--dynamic-config", T::kString,
       "namespace/name of the dynamic config's ConfigMap (<name>-<node> overrides it)",
       [](C c) { return nlohmann::json(c.dynamic_config); }},
      {"dynamicConfigDir", "--dynamic-config-dir", T::kString,
       "dynamic config checkpoints (default <state dir>/dynamic-config)",
       [](C c) { return nlohmann::json(c.dynamic_config_dir); }},
      {"dynamicConfigTrialDuration", "--dynamic-config-trial-duration", T::kDuration,
       "trial of a new dynamic config before it is last known good",
       [](C c) { return Duration(c.dynamic_config_trial_duration); }},
      {"logging.format", "--log-format", T::kString, "text or json",
       [](C c) { return nlohmann::json(c.log_format == LogFormat::kJson ? "json" : "text"); }},
      {"logging.verbosity", "--v", T::kInteger, "log verbosity (-v)",
       [](C c) { return nlohmann::json(c.verbosity); }},
      {"loopStallLogThreshold", "--loop-stall-log-threshold", T::kDuration,
       "log event-loop iterations this long or longer",
       [](C c) { return Duration(c.loop_stall_log_threshold); }},
      {"healthzBindAddress", "--healthz-bind-address", T::kString,
       "IP:PORT of /healthz, /readyz, /metrics",
       [](C c) { return nlohmann::json(c.healthz_bind_address); }},
      {"debugBindAddress", "--debug-bind-address", T::kString, "IP:PORT of /debug/state, /configz",
       [](C c) { return nlohmann::json(c.debug_bind_address); }},
      {"leaderElection.leaderElect", "--leader-elect", T::kBool,
       "campaign for the configured lock (the flock is taken either way)",
       [](C c) { return nlohmann::json(c.leader_election.leader_elect); }},
      {"leaderElection.resourceLock", "--leader-elect-resource-lock", T::kString, "file or leases",
       [](C c) {
         return nlohmann::json(leaderelection::LockTypeName(c.leader_election.resource_lock));
       }},
      {"leaderElection.leaseDuration", "--leader-elect-lease-duration", T::kDuration,
       "how long an unrenewed lock lasts",
       [](C c) { return Duration(c.leader_election_timing.lease_duration); }},
      {"leaderElection.renewDeadline", "--leader-elect-renew-deadline", T::kDuration,
       "how long the holder retries renewing",
       [](C c) { return Duration(c.leader_election_timing.renew_deadline); }},
      {"leaderElection.retryPeriod", "--leader-elect-retry-period", T::kDuration,
       "between acquire and renew attempts",
       [](C c) { return Duration(c.leader_election_timing.retry_period); }},
      {"leaderElection.resourceNamespace", "--leader-elect-resource-namespace", T::kString,
       "leases: the Lease's namespace",
       [](C c) { return nlohmann::json(c.leader_election.resource_namespace); }},
      {"leaderElection.resourceName", "--leader-elect-resource-name", T::kString,
       "leases: the Lease's name",
       [](C c) { return nlohmann::json(c.leader_election.resource_name); }},
  };
}

std::vector<std::string> Arg(const std::string& flag, const std::string& value) {
  if (value.empty()) return {flag, value};
  return {flag + "=" + value};
}

// The argument for one field's value, or an error naming the field. Values go in as
// "--flag=value" (so that a value starting with '-' stays a value), except an empty string or map,
// which CLI11 takes as a value only as an argument of its own.
base::Result<std::vector<std::string>> FieldArgs(const ConfigField& f, const nlohmann::json& v) {
  auto wrong = [&] {
    return base::Status::Error("field " + f.name + ": must be a " + TypeText(f.type) + ", not " +
                               JsonTypeText(v));
  };
  switch (f.type) {
    case FieldType::kString:
    case FieldType::kDuration:
      if (!v.is_string()) return wrong();
      return Arg(f.flag, v.get<std::string>());
    case FieldType::kBool:
      if (!v.is_boolean()) return wrong();
      return std::vector<std::string>{f.flag + "=" +
                                      ((v.get<bool>() != f.inverted) ? "true" : "false")};
    case FieldType::kInteger:
      if (!v.is_number_integer() && !v.is_number_unsigned()) return wrong();
      return std::vector<std::string>{f.flag + "=" + v.dump()};
    case FieldType::kNumber:
      if (!v.is_number()) return wrong();
      return std::vector<std::string>{f.flag + "=" + v.dump()};
    case FieldType::kStringMap: {
      if (!v.is_object()) return wrong();
      std::string joined;
      for (const auto& [name, quantity] : v.items()) {
        std::string text;
        if (quantity.is_string()) {
          text = quantity.get<std::string>();
        } else if (quantity.is_number_integer() || quantity.is_number_unsigned()) {
          text = quantity.dump();
        } else {
          return base::Status::Error("field " + f.name + "." + name +
                                     ": must be a quantity (a string such as 8Gi, or an "
                                     "integer), not " +
                                     JsonTypeText(quantity));
        }
        if (name.find_first_of(",=") != std::string::npos ||
            text.find_first_of(",=") != std::string::npos) {
          return base::Status::Error("field " + f.name + "." + name +
                                     ": names and quantities cannot contain ',' or '='");
        }
        joined += (joined.empty() ? "" : ",") + name + "=" + text;
      }
      return Arg(f.flag, joined);
    }
  }
  return wrong();
}

}  // namespace

const std::vector<ConfigField>& ConfigFields() {
  static const std::vector<ConfigField> fields = MakeFields();
  return fields;
}

base::Result<FileArgs> ConfigFileArgs(std::string_view text) {
  auto docs = kube::YamlToJson(text);
  if (!docs.ok()) return docs.status();
  if (docs->empty())
    return base::Status::Error("no document (want a " + std::string(kConfigKind) + ")");
  if (docs->size() > 1) {
    return base::Status::Error("more than one document (want one " + std::string(kConfigKind) +
                               ")");
  }
  const nlohmann::json& doc = docs->front();
  if (!doc.is_object()) {
    return base::Status::Error("not a map of fields but " + std::string(JsonTypeText(doc)));
  }
  auto expect = [&](const char* key, const char* want) -> base::Status {
    auto it = doc.find(key);
    if (it == doc.end()) {
      return base::Status::Error(std::string("field ") + key + ": missing (want " + want + ")");
    }
    if (!it->is_string() || it->get<std::string>() != want) {
      return base::Status::Error(std::string("field ") + key + ": " + it->dump() +
                                 " is not supported (want " + want + ")");
    }
    return base::Status::OK();
  };
  if (base::Status s = expect("apiVersion", kConfigApiVersion); !s.ok()) return s;
  if (base::Status s = expect("kind", kConfigKind); !s.ok()) return s;

  std::map<std::string, const ConfigField*> by_name;
  for (const ConfigField& f : ConfigFields()) by_name[f.name] = &f;
  FileArgs out;
  auto add = [&](const std::string& name, const nlohmann::json& value) -> base::Status {
    auto it = by_name.find(name);
    if (it == by_name.end()) return base::Status::Error("unknown field \"" + name + "\"");
    if (value.is_null()) return base::Status::OK();  // as if not given
    auto args = FieldArgs(*it->second, value);
    if (!args.ok()) return args.status();
    out.args.insert(out.args.end(), args->begin(), args->end());
    out.fields.push_back(name);
    return base::Status::OK();
  };
  // Groups of fields ("logging", "leaderElection"): a map of their members.
  std::map<std::string, std::vector<std::string>> groups;
  for (const ConfigField& f : ConfigFields()) {
    if (const size_t dot = f.name.find('.'); dot != std::string::npos) {
      groups[f.name.substr(0, dot)].push_back(f.name.substr(dot + 1));
    }
  }
  for (const auto& [key, value] : doc.items()) {
    if (key == "apiVersion" || key == "kind") continue;
    auto group = groups.find(key);
    if (group == groups.end()) {
      if (base::Status s = add(key, value); !s.ok()) return s;
      continue;
    }
    if (value.is_null()) continue;
    if (!value.is_object()) {
      std::string members;
      for (const std::string& m : group->second) members += (members.empty() ? "" : ", ") + m;
      return base::Status::Error("field " + key + ": must be a map (" + members + "), not " +
                                 std::string(JsonTypeText(value)));
    }
    for (const auto& [sub, sub_value] : value.items()) {
      if (base::Status s = add(key + "." + sub, sub_value); !s.ok()) return s;
    }
  }
  return out;
}

nlohmann::json EncodeConfiguration(const DaemonConfig& config) {
  nlohmann::json doc = {{"apiVersion", kConfigApiVersion}, {"kind", kConfigKind}};
  for (const ConfigField& f : ConfigFields()) {
    const size_t dot = f.name.find('.');
    if (dot == std::string::npos) {
      doc[f.name] = f.get(config);
    } else {
      doc[f.name.substr(0, dot)][f.name.substr(dot + 1)] = f.get(config);
    }
  }
  return doc;
}

bool DynamicConfigForbidden(const std::string& field) {
  static const std::set<std::string> forbidden = {
      "dynamicConfig", "dynamicConfigDir", "dynamicConfigTrialDuration", "stateDir", "nodeName",
      "kubeconfig",    "inCluster"};
  return forbidden.count(field) > 0;
}

bool LiveField(const std::string& field) {
  static const std::set<std::string> live = {"syncFrequency",  "objectCacheTTL",
                                             "logging.format", "logging.verbosity",
                                             "eventRecordQPS", "eventBurst"};
  return live.count(field) > 0;
}

std::vector<std::string> ChangedFields(const DaemonConfig& a, const DaemonConfig& b) {
  std::vector<std::string> out;
  for (const ConfigField& f : ConfigFields()) {
    if (f.get(a) != f.get(b)) out.push_back(f.name);
  }
  return out;
}

std::string ConfigFileHelp() {
  std::string out =
      "Configuration file (--config FILE; flags given on the command line win):\n"
      "  apiVersion: " +
      std::string(kConfigApiVersion) + "\n  kind: " + kConfigKind + "\n";
  for (const ConfigField& f : ConfigFields()) {
    out += "  " + f.name + " (" + f.flag + "): " + TypeText(f.type) + "; " + f.help + "\n";
  }
  return out;
}

nlohmann::json Configz(const DaemonConfig& config, const std::string& config_file,
                       const std::map<std::string, std::string>& sources) {
  return {{"volumemanager", EncodeConfiguration(config)},
          {"configFile", config_file.empty() ? nlohmann::json() : nlohmann::json(config_file)},
          {"sources", sources}};
}

}  // namespace config
