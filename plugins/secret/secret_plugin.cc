#include "plugins/secret/secret_plugin.h"

#include <spdlog/spdlog.h>

#include <variant>

namespace plugins {

bool SecretPlugin::Supports(const kube::Volume& volume) const {
  return std::holds_alternative<kube::SecretVolumeSource>(volume.source);
}

std::vector<ObjectRef> SecretPlugin::ReferencedObjects(const kube::Pod& pod,
                                                       const kube::Volume& volume) const {
  const auto& src = std::get<kube::SecretVolumeSource>(volume.source);
  return {ObjectRef{ObjectKind::kSecret, pod.metadata.namespace_, src.secret_name}};
}

base::Result<std::shared_ptr<const kube::Secret>> GetSecretOrEmpty(const VolumeHost& host,
                                                                   const std::string& namespace_,
                                                                   const std::string& name,
                                                                   bool optional) {
  if (host.objects == nullptr) {
    return base::Status::Error("secret \"" + name + "\": no object source configured");
  }
  auto got = host.objects->GetSecret(namespace_, name);
  if (!got.ok()) return got.status();
  if (*got != nullptr) return *got;
  if (!optional) return base::Status::Error("secret \"" + name + "\" not found");
  auto empty = std::make_shared<kube::Secret>();
  empty->metadata.namespace_ = namespace_;
  empty->metadata.name = name;
  return std::shared_ptr<const kube::Secret>(std::move(empty));
}

base::Result<atomicwriter::Payload> MakeSecretPayload(const std::vector<kube::KeyToPath>& items,
                                                      const kube::Secret& secret,
                                                      std::optional<int32_t> default_mode,
                                                      bool optional) {
  if (!default_mode) {
    return base::Status::Error("no defaultMode used, not even the default value for it");
  }
  atomicwriter::Payload payload;
  if (items.empty()) {
    for (const auto& [key, value] : secret.data) {
      payload[key] = {value, static_cast<mode_t>(*default_mode), std::nullopt};
    }
    return payload;
  }
  for (const kube::KeyToPath& item : items) {
    auto it = secret.data.find(item.key);
    if (it == secret.data.end()) {
      if (optional) continue;
      return base::Status::Error("references non-existent secret key: " + item.key);
    }
    payload[item.path] = {it->second, static_cast<mode_t>(item.mode.value_or(*default_mode)),
                          std::nullopt};
  }
  return payload;
}

base::Result<atomicwriter::Payload> SecretPlugin::BuildPayload(const kube::Pod& pod,
                                                               const kube::Volume& volume,
                                                               const VolumeHost& host) const {
  const auto& src = std::get<kube::SecretVolumeSource>(volume.source);
  const bool optional = src.optional.value_or(false);
  auto secret = GetSecretOrEmpty(host, pod.metadata.namespace_, src.secret_name, optional);
  if (!secret.ok()) return secret.status();
  size_t total = 0;
  for (const auto& [k, v] : (*secret)->data) total += v.size();
  spdlog::debug(
      fmt::runtime("Received secret {}/{} containing ({}) pieces of data, {} total bytes"),
      pod.metadata.namespace_, src.secret_name, (*secret)->data.size(), total);
  return MakeSecretPayload(src.items, **secret, src.default_mode, optional);
}

}  // namespace plugins
