#include "kubeclient/watch/object_store.h"

#include <algorithm>
#include <cctype>

namespace kubeclient {
namespace {

std::string MetadataString(const nlohmann::json& object, const char* field) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto value = meta->find(field);
  if (value == meta->end() || !value->is_string()) return "";
  return value->get<std::string>();
}

bool Decimal(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

std::string ObjectStore::KeyOf(const nlohmann::json& object) {
  std::string name = MetadataString(object, "name");
  if (name.empty()) return "";
  std::string ns = MetadataString(object, "namespace");
  return ns.empty() ? name : ns + "/" + name;
}

std::string ObjectStore::ResourceVersionOf(const nlohmann::json& object) {
  return MetadataString(object, "resourceVersion");
}

std::string ObjectStore::StoredResourceVersion(const nlohmann::json& stored) {
  return stored.is_string() ? stored.get<std::string>() : ResourceVersionOf(stored);
}

nlohmann::json ObjectStore::Expand(const std::string& key, const nlohmann::json& stored) {
  if (!stored.is_string()) return stored;
  nlohmann::json meta = nlohmann::json::object();
  const size_t slash = key.find('/');
  if (slash == std::string::npos) {
    meta["name"] = key;
  } else {
    meta["name"] = key.substr(slash + 1);
    meta["namespace"] = key.substr(0, slash);
  }
  meta["resourceVersion"] = stored;
  return nlohmann::json{{"metadata", std::move(meta)}};
}

const nlohmann::json* ObjectStore::Get(const std::string& key) const {
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : &it->second;
}

bool ResourceVersionOlder(const std::string& a, const std::string& b) {
  if (!Decimal(a) || !Decimal(b)) return false;
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

}  // namespace kubeclient
