// Object payloads: the content of a configMap or secret volume, and of a projected volume's
// configMap and secret sources, built by one implementation for both kinds (upstream
// configmap.MakePayload and secret.MakePayload, and the lookups before them):
//   * GetObjectOrEmpty<T>: the object `name` of the pod's namespace; an empty one of that name
//     when it is missing and the source is optional; else `configmap "<name>" not found` /
//     `secret "<name>" not found`. Other lookup errors pass through unchanged;
//   * MakeObjectPayload: every key (ConfigMap: data, then binaryData) with the default mode, or
//     the listed items in order (a later item wins at the same path) with their mode or the
//     default; a listed key the object lacks is skipped when optional, else fails
//     (`configmap references non-existent config key: <key>` /
//     `references non-existent secret key: <key>`). No defaultMode fails with the spec's text;
//   * ObjectVolumePayload<T>: both, for the configMap and secret plugins, with the kubelet's
//     "Received ..." debug line (key and byte counts only: values never reach a log).
// What differs between the kinds is `ObjectKeys<T>`: the getter, the maps holding the keys, and
// the words of the texts.
#ifndef VOLUMEMANAGER_PLUGINS_OBJECT_PAYLOAD_H_
#define VOLUMEMANAGER_PLUGINS_OBJECT_PAYLOAD_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "base/status.h"
#include "kube/config_map.h"
#include "kube/secret.h"
#include "kube/volume.h"
#include "plugins/volume_plugin.h"

namespace plugins {

using KeyMap = std::map<std::string, std::string>;

template <typename T>
struct ObjectKeys;

template <>
struct ObjectKeys<kube::ConfigMap> {
  static constexpr std::string_view kKind = "configmap";     // in error texts
  static constexpr std::string_view kLogKind = "configmap";  // the "Received" debug line's object
  static constexpr std::string_view kMissingKey = "configmap references non-existent config key: ";
  static base::Result<std::shared_ptr<const kube::ConfigMap>> Get(ObjectLookup& objects,
                                                                  const std::string& namespace_,
                                                                  const std::string& name) {
    return objects.GetConfigMap(namespace_, name);
  }
  static std::vector<const KeyMap*> Maps(const kube::ConfigMap& cm) {
    return {&cm.data, &cm.binary_data};
  }
};

template <>
struct ObjectKeys<kube::Secret> {
  static constexpr std::string_view kKind = "secret";
  static constexpr std::string_view kLogKind = "secret";
  static constexpr std::string_view kMissingKey = "references non-existent secret key: ";
  static base::Result<std::shared_ptr<const kube::Secret>> Get(ObjectLookup& objects,
                                                               const std::string& namespace_,
                                                               const std::string& name) {
    return objects.GetSecret(namespace_, name);
  }
  static std::vector<const KeyMap*> Maps(const kube::Secret& secret) { return {&secret.data}; }
};

// The kind-independent core of MakeObjectPayload: `maps` in precedence order, `missing_key` the
// error text before the key.
base::Result<atomicwriter::Payload> MakeKeysPayload(const std::vector<kube::KeyToPath>& items,
                                                    const std::vector<const KeyMap*>& maps,
                                                    std::optional<int32_t> default_mode,
                                                    bool optional, std::string_view missing_key);

// "Received <kind> <ns>/<name> containing (<n>) pieces of data, <bytes> total bytes" at debug.
void LogReceived(std::string_view kind, const std::string& namespace_, const std::string& name,
                 const std::vector<const KeyMap*>& maps);

template <typename T>
base::Result<std::shared_ptr<const T>> GetObjectOrEmpty(const VolumeHost& host,
                                                        const std::string& namespace_,
                                                        const std::string& name, bool optional) {
  const std::string kind(ObjectKeys<T>::kKind);
  if (host.objects == nullptr) {
    return base::Status::Error(kind + " \"" + name + "\": no object source configured");
  }
  auto got = ObjectKeys<T>::Get(*host.objects, namespace_, name);
  if (!got.ok()) return got.status();
  if (*got != nullptr) return *got;
  // The kubelet's error here is the API's NotFound (apierrors.NewNotFound): it carries the code.
  if (!optional) {
    return base::Status::Error(kind + " \"" + name + "\" not found").WithApiStatus(404, "NotFound");
  }
  auto empty = std::make_shared<T>();
  empty->metadata.namespace_ = namespace_;
  empty->metadata.name = name;
  return std::shared_ptr<const T>(std::move(empty));
}

template <typename T>
base::Result<atomicwriter::Payload> MakeObjectPayload(const std::vector<kube::KeyToPath>& items,
                                                      const T& object,
                                                      std::optional<int32_t> default_mode,
                                                      bool optional) {
  return MakeKeysPayload(items, ObjectKeys<T>::Maps(object), default_mode, optional,
                         ObjectKeys<T>::kMissingKey);
}

template <typename T>
base::Result<atomicwriter::Payload> ObjectVolumePayload(
    const VolumeHost& host, const std::string& namespace_, const std::string& name,
    const std::vector<kube::KeyToPath>& items, std::optional<int32_t> default_mode, bool optional) {
  auto object = GetObjectOrEmpty<T>(host, namespace_, name, optional);
  if (!object.ok()) return object.status();
  LogReceived(ObjectKeys<T>::kLogKind, namespace_, name, ObjectKeys<T>::Maps(**object));
  return MakeObjectPayload(items, **object, default_mode, optional);
}

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_OBJECT_PAYLOAD_H_
