// Shared by the dynamicconfig tests: a daemon's arguments, the ParseFunction over them, and
// configs as a ConfigMap would carry them.
#ifndef VOLUMEMANAGER_DYNAMICCONFIG_TEST_CONFIGS_H_
#define VOLUMEMANAGER_DYNAMICCONFIG_TEST_CONFIGS_H_

#include <string>

#include "config/daemon_config.h"
#include "dynamicconfig/checkpoint_store.h"
#include "dynamicconfig/startup.h"

namespace dynamicconfig {

inline ParseFunction TestParse(const std::string& state_dir) {
  return [state_dir](const std::optional<std::string>& dynamic) {
    return config::ParseDaemonFlags(
        {"--kubeconfig", "/etc/kubeconfig", "--node-name", "n1", "--state-dir", state_dir}, {},
        "host", config::ReadConfigFile, dynamic);
  };
}

inline std::string ConfigText(const std::string& fields) {
  return "apiVersion: volumemanager.io/v1alpha1\nkind: VolumeManagerConfiguration\n" + fields;
}

inline Checkpoint TestCheckpoint(const std::string& rv, const std::string& fields) {
  return Checkpoint{"kube-system", "vm-config", "uid-1", rv, ConfigText(fields)};
}

}  // namespace dynamicconfig

#endif  // VOLUMEMANAGER_DYNAMICCONFIG_TEST_CONFIGS_H_
