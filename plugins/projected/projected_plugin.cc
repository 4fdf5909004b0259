#include "plugins/projected/projected_plugin.h"

#include <algorithm>
#include <variant>

#include "logging/structured_log.h"
#include "plugins/aggregate_error.h"
#include "plugins/downwardapi/downward_api_plugin.h"
#include "plugins/object_payload.h"

namespace plugins {
namespace {

void Merge(atomicwriter::Payload&& from, atomicwriter::Payload* into) {
  for (auto& [path, file] : from) (*into)[path] = std::move(file);
}

// A configMap or secret source: its keys merged into `payload`, or its error into `errors`.
template <typename T, typename Projection>
void AddObjectSource(const VolumeHost& host, const std::string& ns, const Projection& projection,
                     std::optional<int32_t> default_mode, atomicwriter::Payload* payload,
                     std::vector<base::Status>* errors) {
  const bool optional = projection.optional.value_or(false);
  auto object = GetObjectOrEmpty<T>(host, ns, projection.name, optional);
  if (!object.ok()) {
    errors->push_back(object.status());
    return;
  }
  auto part = MakeObjectPayload(projection.items, **object, default_mode, optional);
  if (!part.ok()) {
    errors->push_back(part.status());
    return;
  }
  Merge(std::move(part).value(), payload);
}

// The name of a source kind the daemon cannot produce, as the API spells it; "" for the kinds it
// can (configMap, secret, downwardAPI).
std::string KubeletOnlyKind(const kube::VolumeProjection& s) {
  if (s.config_map || s.secret || s.downward_api) return "";
  if (s.service_account_token) return "serviceAccountToken";
  if (s.cluster_trust_bundle) return "clusterTrustBundle";
  return s.unsupported_kind.empty() ? "(no kind)" : s.unsupported_kind;
}

// A source only the kubelet can produce, where the daemon owns the volume (self ownership).
base::Status Unsupported(const std::string& source) {
  return base::Status::Error(
      source +
      " is not supported by volumemanager: only the kubelet can produce it, so the volume can be "
      "set up only on a node whose kubelet owns the pod's volumes (--volume-ownership kubelet)");
}

}  // namespace

std::optional<int64_t> EffectiveRunAsUser(const kube::Pod& pod) {
  std::optional<int64_t> pod_user;
  if (pod.spec.security_context) pod_user = pod.spec.security_context->run_as_user;
  std::optional<int64_t> user;
  bool any = false;
  for (const auto* list : {&pod.spec.init_containers, &pod.spec.containers}) {
    for (const kube::Container& c : *list) {
      std::optional<int64_t> effective = pod_user;
      if (c.security_context && c.security_context->run_as_user) {
        effective = c.security_context->run_as_user;
      }
      if (!effective || (any && user != effective)) return std::nullopt;
      user = effective;
      any = true;
    }
  }
  return user;
}

bool ProjectedPlugin::Supports(const kube::Volume& volume) const {
  return std::holds_alternative<kube::ProjectedVolumeSource>(volume.source);
}

std::vector<ObjectRef> ProjectedPlugin::ReferencedObjects(const kube::Pod& pod,
                                                          const kube::Volume& volume) const {
  const auto& src = std::get<kube::ProjectedVolumeSource>(volume.source);
  std::vector<ObjectRef> refs;
  auto add = [&](ObjectKind kind, const std::string& name) {
    ObjectRef ref{kind, pod.metadata.namespace_, name};
    if (std::find(refs.begin(), refs.end(), ref) == refs.end()) refs.push_back(std::move(ref));
  };
  for (const kube::VolumeProjection& s : src.sources) {
    if (s.config_map) add(ObjectKind::kConfigMap, s.config_map->name);
    if (s.secret) add(ObjectKind::kSecret, s.secret->name);
  }
  return refs;
}

std::vector<kube::TokenRef> ProjectedPlugin::ReferencedTokens(const kube::Pod& pod,
                                                              const kube::Volume& volume) const {
  const auto& src = std::get<kube::ProjectedVolumeSource>(volume.source);
  std::vector<kube::TokenRef> refs;
  for (const kube::VolumeProjection& s : src.sources) {
    if (!s.service_account_token) continue;
    kube::TokenRef ref = kube::TokenRefFor(pod, *s.service_account_token);
    if (std::find(refs.begin(), refs.end(), ref) == refs.end()) refs.push_back(std::move(ref));
  }
  return refs;
}

bool ProjectedPlugin::DependsOnPod(const kube::Volume& volume) const {
  const auto& src = std::get<kube::ProjectedVolumeSource>(volume.source);
  return std::any_of(src.sources.begin(), src.sources.end(),
                     [](const kube::VolumeProjection& s) { return s.downward_api.has_value(); });
}

std::string ProjectedPlugin::KubeletOnlyReason(const kube::Volume& volume) const {
  const auto& src = std::get<kube::ProjectedVolumeSource>(volume.source);
  std::vector<std::string> kinds;
  for (const kube::VolumeProjection& s : src.sources) {
    std::string kind = KubeletOnlyKind(s);
    if (!kind.empty() && std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
      kinds.push_back(std::move(kind));
    }
  }
  if (kinds.empty()) return "";
  std::string reason = "projected sources only the kubelet produces: ";
  for (size_t i = 0; i < kinds.size(); ++i) reason += (i > 0 ? ", " : "") + kinds[i];
  return reason;
}

base::Result<atomicwriter::Payload> ProjectedPlugin::BuildPayload(const kube::Pod& pod,
                                                                  const kube::Volume& volume,
                                                                  const VolumeHost& host) const {
  const auto& src = std::get<kube::ProjectedVolumeSource>(volume.source);
  if (!src.default_mode) {
    return base::Status::Error("no defaultMode used, not even the default value for it");
  }
  const std::string& ns = pod.metadata.namespace_;
  const std::optional<int64_t> fs_user = EffectiveRunAsUser(pod);
  const bool has_fs_group = pod.spec.security_context && pod.spec.security_context->fs_group;
  // Token files: 0600 when someone other than root must read them through fsUser or fsGroup
  // (the ownership pass then makes it 0640).
  const mode_t credential_mode =
      (fs_user || has_fs_group) ? 0600 : static_cast<mode_t>(*src.default_mode);
  std::optional<uid_t> credential_owner;
  if (fs_user) credential_owner = static_cast<uid_t>(*fs_user);

  atomicwriter::Payload payload;
  std::vector<base::Status> errors;
  for (const kube::VolumeProjection& s : src.sources) {
    if (s.config_map) {
      AddObjectSource<kube::ConfigMap>(host, ns, *s.config_map, src.default_mode, &payload,
                                       &errors);
    } else if (s.secret) {
      AddObjectSource<kube::Secret>(host, ns, *s.secret, src.default_mode, &payload, &errors);
    } else if (s.downward_api) {
      auto part =
          CollectDownwardAPIData(s.downward_api->items, pod, AllocatableOf(host), src.default_mode);
      if (!part.ok()) {
        errors.push_back(part.status());
        continue;
      }
      if (host.pod_derived_from != nullptr) {
        // The paths and modes as computed; the bytes as the kubelet last wrote them.
        bool carried = true;
        for (auto& [path, file] : *part) {
          auto live = host.pod_derived_from->Read(path);
          if (!live.ok()) {
            errors.push_back(base::Status::Error(
                "downwardAPI item \"" + path +
                "\": not carried over from the live version: " + live.status().message()));
            carried = false;
            break;
          }
          file.data = std::move(live).value();
        }
        if (!carried) continue;
      }
      Merge(std::move(part).value(), &payload);
    } else if (s.service_account_token) {
      const auto& t = *s.service_account_token;
      if (host.tokens == nullptr) {
        errors.push_back(base::Status::Error(
            "serviceAccountToken source (path \"" + t.path +
            "\"): no token source configured; service account tokens need an API server "
            "(cluster mode)"));
        continue;
      }
      auto token = host.tokens->GetToken(pod, t);
      if (!token.ok()) {
        errors.push_back(
            token.status().WithContext("serviceAccountToken source (path \"" + t.path + "\")"));
        continue;
      }
      payload[t.path] = {std::move(token).value(), credential_mode, credential_owner};
    } else if (s.cluster_trust_bundle) {
      errors.push_back(
          Unsupported("clusterTrustBundle source (path \"" + s.cluster_trust_bundle->path + "\")"));
    } else {
      errors.push_back(Unsupported(s.unsupported_kind.empty()
                                       ? std::string("projected source with no kind")
                                       : s.unsupported_kind + " source"));
    }
  }
  if (base::Status s = AggregateError(errors); !s.ok()) {
    logging::Debug("Error preparing data for projected volume",
                   {{"pod", logging::KObj(ns, pod.metadata.name)},
                    {"podUID", pod.metadata.uid},
                    {"volume", volume.name},
                    {"err", s}});
    return s;
  }
  return payload;
}

}  // namespace plugins
