// The configuration file (--config FILE): a YAML (or JSON) document
//
//   apiVersion: volumemanager.io/v1alpha1
//   kind: VolumeManagerConfiguration
//   rootDir: /var/lib/kubelet
//   syncFrequency: 1m
//   ...
//
// with one field per flag (ConfigFields: camelCase, the KubeletConfiguration's names where the
// kubelet has the setting, e.g. staticPodPath for --pod-manifest-path; durations as Go duration
// strings). Versioned like the kubelet's file: the group is the project's own (Kubernetes
// reserves *.k8s.io), and v1alpha1 says fields may still change before a v1beta1.
//
// Decoding is strict: an unknown field, a field of the wrong type, a missing or other
// apiVersion/kind, or more than one document is an error naming the field. A decoded file is
// turned into command-line arguments (ConfigFileArgs) that go before the real ones, so a value
// passes the same parsing and validation as its flag, and a flag given on the command line wins
// (as with the kubelet).
#ifndef VOLUMEMANAGER_CONFIG_CONFIG_FILE_H_
#define VOLUMEMANAGER_CONFIG_CONFIG_FILE_H_

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "config/daemon_config.h"

namespace config {

inline constexpr char kConfigApiVersion[] = "volumemanager.io/v1alpha1";
inline constexpr char kConfigKind[] = "VolumeManagerConfiguration";

enum class FieldType { kString, kBool, kInteger, kNumber, kDuration, kStringMap };

struct ConfigField {
  std::string name;  // in the file; "logging.format" is `format` inside `logging`
  std::string flag;  // the flag it stands for, e.g. "--sync-frequency"
  FieldType type;
  std::string help;  // one line, for --help and the README
  // The field's value in `config` (the file's form: strings for durations and enums).
  std::function<nlohmann::json(const DaemonConfig&)> get;
  // For kBool fields whose flag says the opposite (tmpfs: --no-tmpfs).
  bool inverted = false;
};

// Every field, in the order --help lists them.
const std::vector<ConfigField>& ConfigFields();

// The arguments the file's fields stand for (e.g. {"--sync-frequency", "2m", "--fsync=true"}), and
// the names of the fields the file sets. Errors name the field.
struct FileArgs {
  std::vector<std::string> args;
  std::vector<std::string> fields;
};
base::Result<FileArgs> ConfigFileArgs(std::string_view text);

// `config` as a VolumeManagerConfiguration document (every field, with apiVersion and kind).
nlohmann::json EncodeConfiguration(const DaemonConfig& config);

// The fields a dynamic config may not set: those that locate the dynamic config itself and the
// daemon's identity and state (stateDir, nodeName, kubeconfig, inCluster).
bool DynamicConfigForbidden(const std::string& field);

// The fields that can change in a running daemon (dynamic config applies them live):
// syncFrequency, objectCacheTTL, logging.format, logging.verbosity, eventRecordQPS, eventBurst.
bool LiveField(const std::string& field);

// The names of the fields whose values differ between `a` and `b`.
std::vector<std::string> ChangedFields(const DaemonConfig& a, const DaemonConfig& b);

// The --help section listing the file's fields.
std::string ConfigFileHelp();

// What /configz serves: {"volumemanager": EncodeConfiguration(config), "configFile": path or
// null, "sources": {field: "flag" | "dynamic" | "file" | "default"}}.
nlohmann::json Configz(const DaemonConfig& config, const std::string& config_file,
                       const std::map<std::string, std::string>& sources);

}  // namespace config

#endif  // VOLUMEMANAGER_CONFIG_CONFIG_FILE_H_
