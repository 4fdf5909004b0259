#include "plugins/secret/secret_plugin.h"

#include <variant>

#include "plugins/object_payload.h"

namespace plugins {

bool SecretPlugin::Supports(const kube::Volume& volume) const {
  return std::holds_alternative<kube::SecretVolumeSource>(volume.source);
}

std::vector<ObjectRef> SecretPlugin::ReferencedObjects(const kube::Pod& pod,
                                                       const kube::Volume& volume) const {
  const auto& src = std::get<kube::SecretVolumeSource>(volume.source);
  return {ObjectRef{ObjectKind::kSecret, pod.metadata.namespace_, src.secret_name}};
}

base::Result<atomicwriter::Payload> SecretPlugin::BuildPayload(const kube::Pod& pod,
                                                               const kube::Volume& volume,
                                                               const VolumeHost& host) const {
  const auto& src = std::get<kube::SecretVolumeSource>(volume.source);
  return ObjectVolumePayload<kube::Secret>(host, pod.metadata.namespace_, src.secret_name,
                                           src.items, src.default_mode,
                                           src.optional.value_or(false));
}

}  // namespace plugins
