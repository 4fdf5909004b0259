#include "plugins/configmap/configmap_plugin.h"

#include <variant>

#include "plugins/object_payload.h"

namespace plugins {

bool ConfigMapPlugin::Supports(const kube::Volume& volume) const {
  return std::holds_alternative<kube::ConfigMapVolumeSource>(volume.source);
}

std::vector<ObjectRef> ConfigMapPlugin::ReferencedObjects(const kube::Pod& pod,
                                                          const kube::Volume& volume) const {
  const auto& src = std::get<kube::ConfigMapVolumeSource>(volume.source);
  return {ObjectRef{ObjectKind::kConfigMap, pod.metadata.namespace_, src.name}};
}

base::Result<atomicwriter::Payload> ConfigMapPlugin::BuildPayload(const kube::Pod& pod,
                                                                  const kube::Volume& volume,
                                                                  const VolumeHost& host) const {
  const auto& src = std::get<kube::ConfigMapVolumeSource>(volume.source);
  return ObjectVolumePayload<kube::ConfigMap>(host, pod.metadata.namespace_, src.name, src.items,
                                              src.default_mode, src.optional.value_or(false));
}

}  // namespace plugins
