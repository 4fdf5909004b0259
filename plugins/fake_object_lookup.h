// FakeObjectLookup: an in-memory ObjectLookup for tests (here and in the volume manager's):
// objects are added by value; a (namespace, name) can be made to fail with a chosen error; every
// lookup is counted. Not thread-safe.
#ifndef VOLUMEMANAGER_PLUGINS_FAKE_OBJECT_LOOKUP_H_
#define VOLUMEMANAGER_PLUGINS_FAKE_OBJECT_LOOKUP_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "plugins/volume_plugin.h"

namespace plugins {

class FakeObjectLookup : public ObjectLookup {
 public:
  void Add(kube::ConfigMap cm) {
    auto key = std::make_pair(cm.metadata.namespace_, cm.metadata.name);
    config_maps_[key] = std::make_shared<const kube::ConfigMap>(std::move(cm));
  }
  void Add(kube::Secret s) {
    auto key = std::make_pair(s.metadata.namespace_, s.metadata.name);
    secrets_[key] = std::make_shared<const kube::Secret>(std::move(s));
  }
  // Lookups of (namespace, name), of either kind, fail with `message`.
  void Fail(const std::string& namespace_, const std::string& name, std::string message) {
    failures_[{namespace_, name}] = std::move(message);
  }

  base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& namespace_, const std::string& name) override {
    return Get(config_maps_, namespace_, name);
  }
  base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& namespace_,
                                                              const std::string& name) override {
    return Get(secrets_, namespace_, name);
  }

 private:
  using Key = std::pair<std::string, std::string>;

  template <typename T>
  base::Result<std::shared_ptr<const T>> Get(const std::map<Key, std::shared_ptr<const T>>& m,
                                             const std::string& namespace_,
                                             const std::string& name) {
    if (auto f = failures_.find({namespace_, name}); f != failures_.end()) {
      return base::Status::Error(f->second);
    }
    auto it = m.find({namespace_, name});
    if (it == m.end()) return std::shared_ptr<const T>();
    return it->second;
  }

  std::map<Key, std::shared_ptr<const kube::ConfigMap>> config_maps_;
  std::map<Key, std::shared_ptr<const kube::Secret>> secrets_;
  std::map<Key, std::string> failures_;
};

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_FAKE_OBJECT_LOOKUP_H_
