#include "cache/object_digest.h"

#include <map>

#include "base/sha256.h"

namespace cache {
namespace {

void AddMap(base::Sha256* h, const std::map<std::string, std::string>& m) {
  h->AddNumber(m.size());
  for (const auto& [key, value] : m) h->AddField(key).AddField(value);
}

}  // namespace

base::Digest ContentDigest(const kube::ConfigMap& config_map) {
  base::Sha256 h;
  h.AddField("ConfigMap");
  AddMap(&h, config_map.data);
  AddMap(&h, config_map.binary_data);
  return h.Finish();
}

base::Digest ContentDigest(const kube::Secret& secret) {
  base::Sha256 h;
  h.AddField("Secret");
  AddMap(&h, secret.data);
  return h.Finish();
}

}  // namespace cache
