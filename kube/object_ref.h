// ObjectRef: names one ConfigMap or Secret (kind, namespace, name). The vocabulary shared by the
// object caches (cache/), the volume plugins (plugins/) and the volume manager to say which
// object a volume reads and which object changed. A plain, ordered, hashable-by-key value.
#ifndef VOLUMEMANAGER_KUBE_OBJECT_REF_H_
#define VOLUMEMANAGER_KUBE_OBJECT_REF_H_

#include <compare>
#include <string>

namespace kube {

enum class ObjectKind { kConfigMap, kSecret };

// "configmap" / "secret": the singular lower-case word the kubelet uses in messages.
inline const char* ObjectKindName(ObjectKind kind) {
  return kind == ObjectKind::kConfigMap ? "configmap" : "secret";
}

struct ObjectRef {
  ObjectKind kind = ObjectKind::kConfigMap;
  std::string namespace_;
  std::string name;

  // "configmap shop/app-config", "secret shop/web-tls": for logs.
  std::string ToString() const {
    return std::string(ObjectKindName(kind)) + " " + namespace_ + "/" + name;
  }

  auto operator<=>(const ObjectRef&) const = default;
};

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_OBJECT_REF_H_
