// Volume: one entry of a pod's spec.volumes, with the sources the daemon projects (configMap,
// secret, downwardAPI, projected) modelled in full. Every other kind (emptyDir, hostPath, ...) is
// kept as UnsupportedVolumeSource carrying its JSON name, so a pod using it still decodes.
// Plain values. Modes are the API's integers (0 to 0777); nullopt means "absent on the wire".
#ifndef VOLUMEMANAGER_KUBE_VOLUME_H_
#define VOLUMEMANAGER_KUBE_VOLUME_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kube/quantity.h"

namespace kube {

// items[] of configMap / secret sources: one key projected to one path.
struct KeyToPath {
  std::string key;
  std::string path;
  std::optional<int32_t> mode;

  bool operator==(const KeyToPath&) const = default;
};

struct ConfigMapVolumeSource {
  std::string name;
  std::vector<KeyToPath> items;
  std::optional<int32_t> default_mode;
  std::optional<bool> optional;

  bool operator==(const ConfigMapVolumeSource&) const = default;
};

struct SecretVolumeSource {
  std::string secret_name;  // the volume source says "secretName"; projections say "name"
  std::vector<KeyToPath> items;
  std::optional<int32_t> default_mode;
  std::optional<bool> optional;

  bool operator==(const SecretVolumeSource&) const = default;
};

struct ObjectFieldSelector {
  std::string api_version;
  std::string field_path;  // e.g. "metadata.labels", "metadata.annotations['k']"

  bool operator==(const ObjectFieldSelector&) const = default;
};

struct ResourceFieldSelector {
  std::string container_name;
  std::string resource;             // e.g. "limits.memory"
  std::optional<Quantity> divisor;  // absent or zero means 1

  bool operator==(const ResourceFieldSelector&) const = default;
};

struct DownwardAPIVolumeFile {
  std::string path;
  std::optional<ObjectFieldSelector> field_ref;
  std::optional<ResourceFieldSelector> resource_field_ref;
  std::optional<int32_t> mode;

  bool operator==(const DownwardAPIVolumeFile&) const = default;
};

struct DownwardAPIVolumeSource {
  std::vector<DownwardAPIVolumeFile> items;
  std::optional<int32_t> default_mode;

  bool operator==(const DownwardAPIVolumeSource&) const = default;
};

struct ConfigMapProjection {
  std::string name;
  std::vector<KeyToPath> items;
  std::optional<bool> optional;

  bool operator==(const ConfigMapProjection&) const = default;
};

struct SecretProjection {
  std::string name;
  std::vector<KeyToPath> items;
  std::optional<bool> optional;

  bool operator==(const SecretProjection&) const = default;
};

struct DownwardAPIProjection {
  std::vector<DownwardAPIVolumeFile> items;

  bool operator==(const DownwardAPIProjection&) const = default;
};

struct ServiceAccountTokenProjection {
  std::string audience;
  std::optional<int64_t> expiration_seconds;
  std::string path;

  bool operator==(const ServiceAccountTokenProjection&) const = default;
};

struct LabelSelectorRequirement {
  std::string key;
  std::string op;  // In, NotIn, Exists, DoesNotExist
  std::vector<std::string> values;

  bool operator==(const LabelSelectorRequirement&) const = default;
};

struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;

  bool operator==(const LabelSelector&) const = default;
};

struct ClusterTrustBundleProjection {
  std::optional<std::string> name;
  std::optional<std::string> signer_name;
  std::optional<LabelSelector> label_selector;
  std::optional<bool> optional;
  std::string path;

  bool operator==(const ClusterTrustBundleProjection&) const = default;
};

// One entry of projected.sources. Exactly one member is set for the kinds the daemon knows;
// `unsupported_kind` names a source it does not know (e.g. "podCertificate").
struct VolumeProjection {
  std::optional<ConfigMapProjection> config_map;
  std::optional<SecretProjection> secret;
  std::optional<DownwardAPIProjection> downward_api;
  std::optional<ServiceAccountTokenProjection> service_account_token;
  std::optional<ClusterTrustBundleProjection> cluster_trust_bundle;
  std::string unsupported_kind;

  bool operator==(const VolumeProjection&) const = default;
};

struct ProjectedVolumeSource {
  std::vector<VolumeProjection> sources;
  std::optional<int32_t> default_mode;

  bool operator==(const ProjectedVolumeSource&) const = default;
};

// A volume kind the daemon does not project: emptyDir, hostPath, persistentVolumeClaim, ...
struct UnsupportedVolumeSource {
  std::string kind;  // the JSON field name, e.g. "emptyDir"

  bool operator==(const UnsupportedVolumeSource&) const = default;
};

using VolumeSource =
    std::variant<UnsupportedVolumeSource, ConfigMapVolumeSource, SecretVolumeSource,
                 DownwardAPIVolumeSource, ProjectedVolumeSource>;

struct Volume {
  std::string name;
  // A volume with no source at all is an emptyDir, as the API server defaults it.
  VolumeSource source = UnsupportedVolumeSource{"emptyDir"};

  bool operator==(const Volume&) const = default;
};

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_VOLUME_H_
