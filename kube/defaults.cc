#include "kube/defaults.h"

#include <variant>

namespace kube {
namespace {

void DefaultFieldRefs(std::vector<DownwardAPIVolumeFile>* items) {
  for (DownwardAPIVolumeFile& f : *items) {
    if (f.field_ref && f.field_ref->api_version.empty()) f.field_ref->api_version = "v1";
  }
}

void DefaultContainer(Container* c) {
  for (const auto& [name, limit] : c->resources.limits) {
    c->resources.requests.try_emplace(name, limit);
  }
}

}  // namespace

void ApplyDefaults(Pod* pod) {
  if (pod->metadata.namespace_.empty()) pod->metadata.namespace_ = "default";
  for (Volume& v : pod->spec.volumes) {
    if (auto* cm = std::get_if<ConfigMapVolumeSource>(&v.source)) {
      if (!cm->default_mode) cm->default_mode = kDefaultVolumeMode;
    } else if (auto* s = std::get_if<SecretVolumeSource>(&v.source)) {
      if (!s->default_mode) s->default_mode = kDefaultVolumeMode;
    } else if (auto* d = std::get_if<DownwardAPIVolumeSource>(&v.source)) {
      if (!d->default_mode) d->default_mode = kDefaultVolumeMode;
      DefaultFieldRefs(&d->items);
    } else if (auto* p = std::get_if<ProjectedVolumeSource>(&v.source)) {
      if (!p->default_mode) p->default_mode = kDefaultVolumeMode;
      for (VolumeProjection& src : p->sources) {
        if (src.downward_api) DefaultFieldRefs(&src.downward_api->items);
        if (src.service_account_token && !src.service_account_token->expiration_seconds) {
          src.service_account_token->expiration_seconds = kDefaultTokenExpirationSeconds;
        }
      }
    }
  }
  for (Container& c : pod->spec.init_containers) DefaultContainer(&c);
  for (Container& c : pod->spec.containers) DefaultContainer(&c);
}

void ApplyDefaults(ConfigMap* config_map) {
  if (config_map->metadata.namespace_.empty()) config_map->metadata.namespace_ = "default";
}

void ApplyDefaults(Secret* secret) {
  if (secret->metadata.namespace_.empty()) secret->metadata.namespace_ = "default";
  if (secret->type.empty()) secret->type = "Opaque";
}

}  // namespace kube
