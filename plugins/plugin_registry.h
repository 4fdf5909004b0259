// PluginRegistry: the set of volume plugins, looked up by volume (which plugin projects this pod
// volume?) or by name (reconstruction from disk, where only the escaped directory name is left).
// Immutable once built; safe to share between threads.
#ifndef VOLUMEMANAGER_PLUGINS_PLUGIN_REGISTRY_H_
#define VOLUMEMANAGER_PLUGINS_PLUGIN_REGISTRY_H_

#include <memory>
#include <string_view>
#include <vector>

#include "plugins/volume_plugin.h"

namespace plugins {

class PluginRegistry {
 public:
  // configMap, secret, downwardAPI and projected.
  static std::unique_ptr<PluginRegistry> NewDefault();

  explicit PluginRegistry(std::vector<std::unique_ptr<VolumePlugin>> plugins);

  // The plugin that supports `volume`, or nullptr for kinds the daemon does not project
  // (emptyDir, hostPath, ...): those volumes are someone else's business.
  const VolumePlugin* FindPlugin(const kube::Volume& volume) const;
  // By "kubernetes.io/configmap" or by "kubernetes.io~configmap"; nullptr when unknown.
  const VolumePlugin* FindPluginByName(std::string_view name) const;
  const VolumePlugin* FindPluginByEscapedName(std::string_view escaped_name) const;

  const std::vector<std::unique_ptr<VolumePlugin>>& plugins() const { return plugins_; }

 private:
  std::vector<std::unique_ptr<VolumePlugin>> plugins_;
};

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_PLUGIN_REGISTRY_H_
