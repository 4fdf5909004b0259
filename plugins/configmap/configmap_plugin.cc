#include "plugins/configmap/configmap_plugin.h"

#include <spdlog/spdlog.h>

#include <variant>

namespace plugins {

bool ConfigMapPlugin::Supports(const kube::Volume& volume) const {
  return std::holds_alternative<kube::ConfigMapVolumeSource>(volume.source);
}

std::vector<ObjectRef> ConfigMapPlugin::ReferencedObjects(const kube::Pod& pod,
                                                          const kube::Volume& volume) const {
  const auto& src = std::get<kube::ConfigMapVolumeSource>(volume.source);
  return {ObjectRef{ObjectKind::kConfigMap, pod.metadata.namespace_, src.name}};
}

base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMapOrEmpty(
    const VolumeHost& host, const std::string& namespace_, const std::string& name, bool optional) {
  if (host.objects == nullptr) {
    return base::Status::Error("configmap \"" + name + "\": no object source configured");
  }
  auto got = host.objects->GetConfigMap(namespace_, name);
  if (!got.ok()) return got.status();
  if (*got != nullptr) return *got;
  if (!optional) return base::Status::Error("configmap \"" + name + "\" not found");
  auto empty = std::make_shared<kube::ConfigMap>();
  empty->metadata.namespace_ = namespace_;
  empty->metadata.name = name;
  return std::shared_ptr<const kube::ConfigMap>(std::move(empty));
}

base::Result<atomicwriter::Payload> MakeConfigMapPayload(const std::vector<kube::KeyToPath>& items,
                                                         const kube::ConfigMap& config_map,
                                                         std::optional<int32_t> default_mode,
                                                         bool optional) {
  if (!default_mode) {
    return base::Status::Error("no defaultMode used, not even the default value for it");
  }
  atomicwriter::Payload payload;
  if (items.empty()) {
    for (const auto& [key, value] : config_map.data) {
      payload[key] = {value, static_cast<mode_t>(*default_mode), std::nullopt};
    }
    for (const auto& [key, value] : config_map.binary_data) {
      payload[key] = {value, static_cast<mode_t>(*default_mode), std::nullopt};
    }
    return payload;
  }
  for (const kube::KeyToPath& item : items) {
    const std::string* bytes = nullptr;
    if (auto it = config_map.data.find(item.key); it != config_map.data.end()) {
      bytes = &it->second;
    } else if (auto bit = config_map.binary_data.find(item.key);
               bit != config_map.binary_data.end()) {
      bytes = &bit->second;
    } else if (optional) {
      continue;
    } else {
      return base::Status::Error("configmap references non-existent config key: " + item.key);
    }
    payload[item.path] = {*bytes, static_cast<mode_t>(item.mode.value_or(*default_mode)),
                          std::nullopt};
  }
  return payload;
}

base::Result<atomicwriter::Payload> ConfigMapPlugin::BuildPayload(const kube::Pod& pod,
                                                                  const kube::Volume& volume,
                                                                  const VolumeHost& host) const {
  const auto& src = std::get<kube::ConfigMapVolumeSource>(volume.source);
  const bool optional = src.optional.value_or(false);
  auto config_map = GetConfigMapOrEmpty(host, pod.metadata.namespace_, src.name, optional);
  if (!config_map.ok()) return config_map.status();
  const kube::ConfigMap& cm = **config_map;
  size_t total = 0;
  for (const auto& [k, v] : cm.data) total += v.size();
  for (const auto& [k, v] : cm.binary_data) total += v.size();
  spdlog::debug(fmt::runtime("Received configMap {}/{} containing ({}) pieces of data, {} total "
                             "bytes"),
                pod.metadata.namespace_, src.name, cm.data.size() + cm.binary_data.size(), total);
  return MakeConfigMapPayload(src.items, cm, src.default_mode, optional);
}

}  // namespace plugins
