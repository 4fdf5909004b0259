// ObjectMeta and ListMeta: the metadata every API object and list carries (the subset the daemon
// uses; docs/kubernetes-api.md §3). Plain values; absent fields are empty.
#ifndef VOLUMEMANAGER_KUBE_OBJECT_META_H_
#define VOLUMEMANAGER_KUBE_OBJECT_META_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace kube {

struct ObjectMeta {
  std::string name;
  std::string namespace_;  // "namespace" is a keyword
  std::string uid;
  std::string resource_version;                   // opaque; compare for equality only
  std::string creation_timestamp;                 // RFC 3339 as sent, empty when absent
  std::optional<std::string> deletion_timestamp;  // set once deletion was requested
  std::optional<int64_t> deletion_grace_period_seconds;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;

  // "namespace/name": how logs name an object, and the kubelet's full name of a pod.
  std::string NamespacedName() const { return namespace_ + "/" + name; }

  bool operator==(const ObjectMeta&) const = default;
};

struct ListMeta {
  std::string resource_version;  // the snapshot's RV, the point to watch from
  std::string continue_token;    // non-empty when more pages exist
  std::optional<int64_t> remaining_item_count;

  bool operator==(const ListMeta&) const = default;
};

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_OBJECT_META_H_
