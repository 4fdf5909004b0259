#include "kube/object_decoder.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "kube/base64.h"

namespace kube {
namespace {

using nlohmann::json;

// Thrown inside this file only; the public functions turn it into a Status.
struct FieldError {
  std::string field;
  std::string message;
};

[[noreturn]] void Fail(const std::string& field, std::string message) {
  throw FieldError{field, std::move(message)};
}

// The path of field `child` under `parent` as errors name it: "spec.volumes".
std::string FieldPath(const std::string& parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  return parent + "." + std::string(child);
}

std::string Index(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

std::string Key(const std::string& parent, const std::string& key) {
  return parent + "[" + key + "]";
}

// The member `name` of object `j`, or nullptr when absent or null.
const json* Member(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

void RequireObject(const json& j, const std::string& field) {
  if (!j.is_object()) Fail(field, "expected object");
}

std::string ReadString(const json& j, const std::string& field) {
  if (!j.is_string()) Fail(field, "expected string");
  return j.get<std::string>();
}

bool ReadBool(const json& j, const std::string& field) {
  if (!j.is_boolean()) Fail(field, "expected boolean");
  return j.get<bool>();
}

int64_t ReadInt(const json& j, const std::string& field, int64_t min, int64_t max,
                const char* type_name) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(max)) Fail(field, std::string("out of range for ") + type_name);
    return static_cast<int64_t>(v);
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < min || v > max) Fail(field, std::string("out of range for ") + type_name);
    return v;
  }
  Fail(field, "expected integer");
}

int32_t ReadInt32(const json& j, const std::string& field) {
  return static_cast<int32_t>(ReadInt(j, field, std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<int32_t>::max(), "int32"));
}

int64_t ReadInt64(const json& j, const std::string& field) {
  return ReadInt(j, field, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                 "int64");
}

Quantity ReadQuantity(const json& j, const std::string& field) {
  std::string text;
  if (j.is_string()) {
    text = j.get<std::string>();
    // Upstream's Quantity.UnmarshalJSON trims surrounding white space.
    const auto first = text.find_first_not_of(" \t\r\n\v\f");
    const auto last = text.find_last_not_of(" \t\r\n\v\f");
    text = first == std::string::npos ? "" : text.substr(first, last - first + 1);
  } else if (j.is_number_integer() || j.is_number_unsigned()) {
    text = j.dump();
  } else if (j.is_number_float()) {
    const double d = j.get<double>();
    if (!std::isfinite(d)) Fail(field, "expected quantity");
    text = j.dump();
  } else {
    Fail(field, "expected quantity (string or number)");
  }
  auto q = Quantity::Parse(text);
  if (!q.ok()) Fail(field, q.status().message());
  return *q;
}

template <typename T, typename F>
std::vector<T> ReadArray(const json& j, const std::string& field, F item_fn) {
  if (!j.is_array()) Fail(field, "expected array");
  std::vector<T> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) out.push_back(item_fn(j[i], Index(field, i)));
  return out;
}

std::map<std::string, std::string> ReadStringMap(const json& j, const std::string& field) {
  RequireObject(j, field);
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_null()) {
      out[k] = "";  // Go leaves a null map value at the zero value
      continue;
    }
    out[k] = ReadString(v, Key(field, k));
  }
  return out;
}

std::map<std::string, std::string> ReadBytesMap(const json& j, const std::string& field) {
  RequireObject(j, field);
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_null()) {
      out[k] = "";
      continue;
    }
    auto bytes = DecodeBase64(ReadString(v, Key(field, k)));
    if (!bytes.ok()) Fail(Key(field, k), bytes.status().message());
    out[k] = std::move(bytes).value();
  }
  return out;
}

// Reads member `name` with `reader` into `out` when present and not null.
template <typename T, typename R>
void Opt(const json& obj, const char* name, const std::string& parent, T* out, R reader) {
  if (const json* m = Member(obj, name)) *out = reader(*m, FieldPath(parent, name));
}

std::string Str(const json& j, const std::string& f) { return ReadString(j, f); }
bool Bool(const json& j, const std::string& f) { return ReadBool(j, f); }
int32_t I32(const json& j, const std::string& f) { return ReadInt32(j, f); }
int64_t I64(const json& j, const std::string& f) { return ReadInt64(j, f); }

ObjectMeta ReadObjectMeta(const json& j, const std::string& field) {
  RequireObject(j, field);
  ObjectMeta m;
  Opt(j, "name", field, &m.name, Str);
  Opt(j, "namespace", field, &m.namespace_, Str);
  Opt(j, "uid", field, &m.uid, Str);
  Opt(j, "resourceVersion", field, &m.resource_version, Str);
  Opt(j, "creationTimestamp", field, &m.creation_timestamp, Str);
  Opt(j, "deletionTimestamp", field, &m.deletion_timestamp, Str);
  Opt(j, "deletionGracePeriodSeconds", field, &m.deletion_grace_period_seconds, I64);
  Opt(j, "labels", field, &m.labels, ReadStringMap);
  Opt(j, "annotations", field, &m.annotations, ReadStringMap);
  return m;
}

ListMeta ReadListMeta(const json& j, const std::string& field) {
  RequireObject(j, field);
  ListMeta m;
  Opt(j, "resourceVersion", field, &m.resource_version, Str);
  Opt(j, "continue", field, &m.continue_token, Str);
  Opt(j, "remainingItemCount", field, &m.remaining_item_count, I64);
  return m;
}

KeyToPath ReadKeyToPath(const json& j, const std::string& field) {
  RequireObject(j, field);
  KeyToPath k;
  Opt(j, "key", field, &k.key, Str);
  Opt(j, "path", field, &k.path, Str);
  Opt(j, "mode", field, &k.mode, I32);
  return k;
}

std::vector<KeyToPath> ReadItems(const json& j, const std::string& field) {
  return ReadArray<KeyToPath>(j, field, ReadKeyToPath);
}

ObjectFieldSelector ReadFieldRef(const json& j, const std::string& field) {
  RequireObject(j, field);
  ObjectFieldSelector s;
  Opt(j, "apiVersion", field, &s.api_version, Str);
  Opt(j, "fieldPath", field, &s.field_path, Str);
  return s;
}

ResourceFieldSelector ReadResourceFieldRef(const json& j, const std::string& field) {
  RequireObject(j, field);
  ResourceFieldSelector s;
  Opt(j, "containerName", field, &s.container_name, Str);
  Opt(j, "resource", field, &s.resource, Str);
  Opt(j, "divisor", field, &s.divisor, ReadQuantity);
  return s;
}

DownwardAPIVolumeFile ReadDownwardAPIFile(const json& j, const std::string& field) {
  RequireObject(j, field);
  DownwardAPIVolumeFile f;
  Opt(j, "path", field, &f.path, Str);
  Opt(j, "fieldRef", field, &f.field_ref, ReadFieldRef);
  Opt(j, "resourceFieldRef", field, &f.resource_field_ref, ReadResourceFieldRef);
  Opt(j, "mode", field, &f.mode, I32);
  return f;
}

std::vector<DownwardAPIVolumeFile> ReadDownwardAPIItems(const json& j, const std::string& field) {
  return ReadArray<DownwardAPIVolumeFile>(j, field, ReadDownwardAPIFile);
}

ConfigMapVolumeSource ReadConfigMapSource(const json& j, const std::string& field) {
  RequireObject(j, field);
  ConfigMapVolumeSource s;
  Opt(j, "name", field, &s.name, Str);
  Opt(j, "items", field, &s.items, ReadItems);
  Opt(j, "defaultMode", field, &s.default_mode, I32);
  Opt(j, "optional", field, &s.optional, Bool);
  return s;
}

SecretVolumeSource ReadSecretSource(const json& j, const std::string& field) {
  RequireObject(j, field);
  SecretVolumeSource s;
  Opt(j, "secretName", field, &s.secret_name, Str);
  Opt(j, "items", field, &s.items, ReadItems);
  Opt(j, "defaultMode", field, &s.default_mode, I32);
  Opt(j, "optional", field, &s.optional, Bool);
  return s;
}

DownwardAPIVolumeSource ReadDownwardAPISource(const json& j, const std::string& field) {
  RequireObject(j, field);
  DownwardAPIVolumeSource s;
  Opt(j, "items", field, &s.items, ReadDownwardAPIItems);
  Opt(j, "defaultMode", field, &s.default_mode, I32);
  return s;
}

LabelSelector ReadLabelSelector(const json& j, const std::string& field) {
  RequireObject(j, field);
  LabelSelector s;
  Opt(j, "matchLabels", field, &s.match_labels, ReadStringMap);
  if (const json* m = Member(j, "matchExpressions")) {
    s.match_expressions = ReadArray<LabelSelectorRequirement>(
        *m, FieldPath(field, "matchExpressions"), [](const json& e, const std::string& f) {
          RequireObject(e, f);
          LabelSelectorRequirement r;
          Opt(e, "key", f, &r.key, Str);
          Opt(e, "operator", f, &r.op, Str);
          if (const json* v = Member(e, "values")) {
            r.values = ReadArray<std::string>(*v, FieldPath(f, "values"), Str);
          }
          return r;
        });
  }
  return s;
}

// Source kinds a projection may hold; more than one set is ambiguous.
constexpr const char* kProjectionKinds[] = {
    "secret",        "downwardAPI", "configMap", "serviceAccountToken", "clusterTrustBundle",
    "podCertificate"};

VolumeProjection ReadProjection(const json& j, const std::string& field) {
  RequireObject(j, field);
  int kinds = 0;
  for (const char* k : kProjectionKinds) kinds += Member(j, k) != nullptr;
  if (kinds > 1) Fail(field, "may not specify more than 1 volume type per source");
  VolumeProjection p;
  if (const json* m = Member(j, "configMap")) {
    const std::string f = FieldPath(field, "configMap");
    RequireObject(*m, f);
    ConfigMapProjection c;
    Opt(*m, "name", f, &c.name, Str);
    Opt(*m, "items", f, &c.items, ReadItems);
    Opt(*m, "optional", f, &c.optional, Bool);
    p.config_map = std::move(c);
  } else if (const json* s = Member(j, "secret")) {
    const std::string f = FieldPath(field, "secret");
    RequireObject(*s, f);
    SecretProjection c;
    Opt(*s, "name", f, &c.name, Str);
    Opt(*s, "items", f, &c.items, ReadItems);
    Opt(*s, "optional", f, &c.optional, Bool);
    p.secret = std::move(c);
  } else if (const json* d = Member(j, "downwardAPI")) {
    const std::string f = FieldPath(field, "downwardAPI");
    RequireObject(*d, f);
    DownwardAPIProjection c;
    Opt(*d, "items", f, &c.items, ReadDownwardAPIItems);
    p.downward_api = std::move(c);
  } else if (const json* t = Member(j, "serviceAccountToken")) {
    const std::string f = FieldPath(field, "serviceAccountToken");
    RequireObject(*t, f);
    ServiceAccountTokenProjection c;
    Opt(*t, "audience", f, &c.audience, Str);
    Opt(*t, "expirationSeconds", f, &c.expiration_seconds, I64);
    Opt(*t, "path", f, &c.path, Str);
    p.service_account_token = std::move(c);
  } else if (const json* b = Member(j, "clusterTrustBundle")) {
    const std::string f = FieldPath(field, "clusterTrustBundle");
    RequireObject(*b, f);
    ClusterTrustBundleProjection c;
    Opt(*b, "name", f, &c.name, Str);
    Opt(*b, "signerName", f, &c.signer_name, Str);
    Opt(*b, "labelSelector", f, &c.label_selector, ReadLabelSelector);
    Opt(*b, "optional", f, &c.optional, Bool);
    Opt(*b, "path", f, &c.path, Str);
    p.cluster_trust_bundle = std::move(c);
  } else if (Member(j, "podCertificate") != nullptr) {
    p.unsupported_kind = "podCertificate";
  } else {
    // A source kind newer than this code: keep its name so the error can say what it was.
    for (const auto& [k, v] : j.items()) {
      if (v.is_object()) {
        p.unsupported_kind = k;
        break;
      }
    }
  }
  return p;
}

ProjectedVolumeSource ReadProjectedSource(const json& j, const std::string& field) {
  RequireObject(j, field);
  ProjectedVolumeSource s;
  Opt(j, "sources", field, &s.sources, [](const json& a, const std::string& f) {
    return ReadArray<VolumeProjection>(a, f, ReadProjection);
  });
  Opt(j, "defaultMode", field, &s.default_mode, I32);
  return s;
}

// Every volume source field of core/v1 VolumeSource; at most one may be set.
constexpr const char* kVolumeKinds[] = {"hostPath",
                                        "emptyDir",
                                        "gcePersistentDisk",
                                        "awsElasticBlockStore",
                                        "gitRepo",
                                        "secret",
                                        "nfs",
                                        "iscsi",
                                        "glusterfs",
                                        "persistentVolumeClaim",
                                        "rbd",
                                        "flexVolume",
                                        "cinder",
                                        "cephfs",
                                        "flocker",
                                        "downwardAPI",
                                        "fc",
                                        "azureFile",
                                        "configMap",
                                        "vsphereVolume",
                                        "quobyte",
                                        "azureDisk",
                                        "photonPersistentDisk",
                                        "projected",
                                        "portworxVolume",
                                        "scaleIO",
                                        "storageos",
                                        "csi",
                                        "ephemeral",
                                        "image"};

Volume ReadVolume(const json& j, const std::string& field) {
  RequireObject(j, field);
  Volume v;
  Opt(j, "name", field, &v.name, Str);
  const char* kind = nullptr;
  for (const char* k : kVolumeKinds) {
    if (Member(j, k) == nullptr) continue;
    if (kind != nullptr) Fail(field, "may not specify more than 1 volume type");
    kind = k;
  }
  if (kind == nullptr) return v;  // the API server defaults a sourceless volume to emptyDir
  const json& src = *Member(j, kind);
  const std::string f = FieldPath(field, kind);
  const std::string_view k = kind;
  if (k == "configMap") {
    v.source = ReadConfigMapSource(src, f);
  } else if (k == "secret") {
    v.source = ReadSecretSource(src, f);
  } else if (k == "downwardAPI") {
    v.source = ReadDownwardAPISource(src, f);
  } else if (k == "projected") {
    v.source = ReadProjectedSource(src, f);
  } else {
    RequireObject(src, f);
    v.source = UnsupportedVolumeSource{kind};
  }
  return v;
}

ResourceList ReadResourceList(const json& j, const std::string& field) {
  RequireObject(j, field);
  ResourceList out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_null()) continue;
    out[k] = ReadQuantity(v, Key(field, k));
  }
  return out;
}

Container ReadContainer(const json& j, const std::string& field) {
  RequireObject(j, field);
  Container c;
  Opt(j, "name", field, &c.name, Str);
  if (const json* m = Member(j, "volumeMounts")) {
    c.volume_mounts = ReadArray<VolumeMount>(*m, FieldPath(field, "volumeMounts"),
                                             [](const json& e, const std::string& f) {
                                               RequireObject(e, f);
                                               VolumeMount vm;
                                               Opt(e, "name", f, &vm.name, Str);
                                               Opt(e, "mountPath", f, &vm.mount_path, Str);
                                               Opt(e, "subPath", f, &vm.sub_path, Str);
                                               Opt(e, "subPathExpr", f, &vm.sub_path_expr, Str);
                                               Opt(e, "readOnly", f, &vm.read_only, Bool);
                                               return vm;
                                             });
  }
  if (const json* r = Member(j, "resources")) {
    const std::string f = FieldPath(field, "resources");
    RequireObject(*r, f);
    Opt(*r, "limits", f, &c.resources.limits, ReadResourceList);
    Opt(*r, "requests", f, &c.resources.requests, ReadResourceList);
  }
  if (const json* s = Member(j, "securityContext")) {
    const std::string f = FieldPath(field, "securityContext");
    RequireObject(*s, f);
    ContainerSecurityContext sc;
    Opt(*s, "runAsUser", f, &sc.run_as_user, I64);
    c.security_context = sc;
  }
  return c;
}

std::vector<Container> ReadContainers(const json& j, const std::string& field) {
  return ReadArray<Container>(j, field, ReadContainer);
}

PodSpec ReadPodSpec(const json& j, const std::string& field) {
  RequireObject(j, field);
  PodSpec s;
  Opt(j, "nodeName", field, &s.node_name, Str);
  Opt(j, "serviceAccountName", field, &s.service_account_name, Str);
  Opt(j, "volumes", field, &s.volumes,
      [](const json& a, const std::string& f) { return ReadArray<Volume>(a, f, ReadVolume); });
  Opt(j, "initContainers", field, &s.init_containers, ReadContainers);
  Opt(j, "containers", field, &s.containers, ReadContainers);
  if (const json* sc = Member(j, "securityContext")) {
    const std::string f = FieldPath(field, "securityContext");
    RequireObject(*sc, f);
    PodSecurityContext psc;
    Opt(*sc, "fsGroup", f, &psc.fs_group, I64);
    Opt(*sc, "runAsUser", f, &psc.run_as_user, I64);
    Opt(*sc, "fsGroupChangePolicy", f, &psc.fs_group_change_policy, Str);
    s.security_context = psc;
  }
  Opt(j, "hostNetwork", field, &s.host_network, Bool);
  Opt(j, "shareProcessNamespace", field, &s.share_process_namespace, Bool);
  return s;
}

ContainerStatus ReadContainerStatus(const json& j, const std::string& field) {
  RequireObject(j, field);
  ContainerStatus c;
  Opt(j, "name", field, &c.name, Str);
  Opt(j, "containerID", field, &c.container_id, Str);
  if (const json* state = Member(j, "state")) {
    const std::string f = FieldPath(field, "state");
    RequireObject(*state, f);
    if (const json* running = Member(*state, "running")) {
      const std::string rf = FieldPath(f, "running");
      RequireObject(*running, rf);
      Opt(*running, "startedAt", rf, &c.running_started_at, Str);
    }
  }
  return c;
}

// Checks "kind" and "apiVersion" when present.
void CheckKind(const json& j, const char* kind) {
  if (const json* k = Member(j, "kind")) {
    if (ReadString(*k, "kind") != kind) Fail("kind", std::string("expected \"") + kind + "\"");
  }
  if (const json* v = Member(j, "apiVersion")) {
    if (ReadString(*v, "apiVersion") != "v1") Fail("apiVersion", "expected \"v1\"");
  }
}

// Runs `body` for the object `j` whose resource is `resource` ("pods"); a failure names the
// object as "<resource>/<name>" when the name could be read.
template <typename T, typename F>
base::Result<T> DecodeNamed(const json& j, const char* resource, F body) {
  std::string object = std::string(resource) + "/<unnamed>";
  try {
    if (!j.is_object()) Fail("", "expected a JSON object");
    if (const json* m = Member(j, "metadata"); m && m->is_object()) {
      if (const json* n = Member(*m, "name"); n && n->is_string()) {
        object = std::string(resource) + "/" + n->get<std::string>();
      }
    }
    return body(j);
  } catch (const FieldError& e) {
    return base::Status::Error(object + ": " + (e.field.empty() ? "" : e.field + ": ") + e.message);
  }
}

Pod ReadPod(const json& j) {
  CheckKind(j, "Pod");
  Pod p;
  Opt(j, "metadata", "", &p.metadata, ReadObjectMeta);
  Opt(j, "spec", "", &p.spec, ReadPodSpec);
  if (const json* st = Member(j, "status")) {
    RequireObject(*st, "status");
    Opt(*st, "phase", "status", &p.status.phase, Str);
    Opt(*st, "podIP", "status", &p.status.pod_ip, Str);
    Opt(*st, "hostIP", "status", &p.status.host_ip, Str);
    Opt(*st, "containerStatuses", "status", &p.status.container_statuses,
        [](const json& a, const std::string& f) {
          return ReadArray<ContainerStatus>(a, f, ReadContainerStatus);
        });
  }
  return p;
}

ConfigMap ReadConfigMap(const json& j) {
  CheckKind(j, "ConfigMap");
  ConfigMap c;
  Opt(j, "metadata", "", &c.metadata, ReadObjectMeta);
  Opt(j, "data", "", &c.data, ReadStringMap);
  Opt(j, "binaryData", "", &c.binary_data, ReadBytesMap);
  Opt(j, "immutable", "", &c.immutable, Bool);
  return c;
}

Secret ReadSecret(const json& j) {
  CheckKind(j, "Secret");
  Secret s;
  Opt(j, "metadata", "", &s.metadata, ReadObjectMeta);
  Opt(j, "type", "", &s.type, Str);
  Opt(j, "data", "", &s.data, ReadBytesMap);
  if (const json* sd = Member(j, "stringData")) {
    for (auto& [k, v] : ReadStringMap(*sd, "stringData")) s.data[k] = std::move(v);
  }
  Opt(j, "immutable", "", &s.immutable, Bool);
  return s;
}

template <typename ListT, typename ItemT>
base::Result<ListT> DecodeList(const json& j, const char* kind,
                               base::Result<ItemT> (*decode_item)(const json&)) {
  ListT list;
  try {
    if (!j.is_object()) Fail("", "expected a JSON object");
    CheckKind(j, kind);
    Opt(j, "metadata", "", &list.metadata, ReadListMeta);
    if (const json* items = Member(j, "items")) {
      if (!items->is_array()) Fail("items", "expected array");
      list.items.reserve(items->size());
      for (size_t i = 0; i < items->size(); ++i) {
        auto item = decode_item((*items)[i]);
        if (!item.ok()) return item.status().WithContext(Index("items", i));
        list.items.push_back(std::move(item).value());
      }
    }
  } catch (const FieldError& e) {
    return base::Status::Error(std::string(kind) + ": " + (e.field.empty() ? "" : e.field + ": ") +
                               e.message);
  }
  return list;
}

}  // namespace

base::Result<Pod> DecodePod(const json& j) { return DecodeNamed<Pod>(j, "pods", ReadPod); }

base::Result<ConfigMap> DecodeConfigMap(const json& j) {
  return DecodeNamed<ConfigMap>(j, "configmaps", ReadConfigMap);
}

base::Result<Secret> DecodeSecret(const json& j) {
  return DecodeNamed<Secret>(j, "secrets", ReadSecret);
}

base::Result<PodList> DecodePodList(const json& j) {
  return DecodeList<PodList, Pod>(j, "PodList", DecodePod);
}

base::Result<ConfigMapList> DecodeConfigMapList(const json& j) {
  return DecodeList<ConfigMapList, ConfigMap>(j, "ConfigMapList", DecodeConfigMap);
}

base::Result<SecretList> DecodeSecretList(const json& j) {
  return DecodeList<SecretList, Secret>(j, "SecretList", DecodeSecret);
}

}  // namespace kube
