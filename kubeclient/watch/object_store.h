// ObjectStore: the reflector's cache of generic API objects, keyed "<namespace>/<name>" (or
// "<name>" for cluster-scoped objects), each holding its last seen resourceVersion. A value is
// the whole object, or (ReflectorOptions::keep_objects false) its identity: its resourceVersion
// as a JSON string, the name and namespace being the key's (Expand makes an object of it).
//
// Readers get const access; only the owning Reflector mutates it. Single-threaded (loop thread).
#ifndef VOLUMEMANAGER_KUBECLIENT_WATCH_OBJECT_STORE_H_
#define VOLUMEMANAGER_KUBECLIENT_WATCH_OBJECT_STORE_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace kubeclient {

class ObjectStore {
 public:
  // "" when the object has no metadata.name.
  static std::string KeyOf(const nlohmann::json& object);
  static std::string ResourceVersionOf(const nlohmann::json& object);
  // Of a stored value: a whole object or an identity.
  static std::string StoredResourceVersion(const nlohmann::json& stored);
  // A stored value as an object: an identity becomes {"metadata": {name, namespace,
  // resourceVersion}}; a whole object is returned as it is.
  static nlohmann::json Expand(const std::string& key, const nlohmann::json& stored);

  const nlohmann::json* Get(const std::string& key) const;
  const std::map<std::string, nlohmann::json>& items() const { return items_; }
  size_t size() const { return items_.size(); }

  void Put(const std::string& key, nlohmann::json object) { items_[key] = std::move(object); }
  void Erase(const std::string& key) { items_.erase(key); }

 private:
  std::map<std::string, nlohmann::json> items_;
};

// True when `a` is older than `b`: both decimal, compared by length then lexically. Non-decimal
// resourceVersions are opaque and never compare as older (docs/kubernetes-api.md §1.2).
bool ResourceVersionOlder(const std::string& a, const std::string& b);

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_WATCH_OBJECT_STORE_H_
