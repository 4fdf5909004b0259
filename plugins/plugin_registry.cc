#include "plugins/plugin_registry.h"

#include "plugins/configmap/configmap_plugin.h"
#include "plugins/downwardapi/downward_api_plugin.h"
#include "plugins/projected/projected_plugin.h"
#include "plugins/secret/secret_plugin.h"

namespace plugins {

std::unique_ptr<PluginRegistry> PluginRegistry::NewDefault() {
  std::vector<std::unique_ptr<VolumePlugin>> plugins;
  plugins.push_back(std::make_unique<ConfigMapPlugin>());
  plugins.push_back(std::make_unique<SecretPlugin>());
  plugins.push_back(std::make_unique<DownwardAPIPlugin>());
  plugins.push_back(std::make_unique<ProjectedPlugin>());
  return std::make_unique<PluginRegistry>(std::move(plugins));
}

PluginRegistry::PluginRegistry(std::vector<std::unique_ptr<VolumePlugin>> plugins)
    : plugins_(std::move(plugins)) {}

const VolumePlugin* PluginRegistry::FindPlugin(const kube::Volume& volume) const {
  for (const auto& p : plugins_) {
    if (p->Supports(volume)) return p.get();
  }
  return nullptr;
}

const VolumePlugin* PluginRegistry::FindPluginByName(std::string_view name) const {
  for (const auto& p : plugins_) {
    if (p->Name() == name) return p.get();
  }
  return nullptr;
}

const VolumePlugin* PluginRegistry::FindPluginByEscapedName(std::string_view escaped_name) const {
  for (const auto& p : plugins_) {
    if (p->EscapedName() == escaped_name) return p.get();
  }
  return nullptr;
}

}  // namespace plugins
