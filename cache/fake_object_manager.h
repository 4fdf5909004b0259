// FakeObjectManager: an in-memory ObjectManager for tests of the modules above cache/ (volume
// manager, plugins). It keeps the real contract (gets of unregistered objects fail with the
// kubelet's text, nullptr for absent objects, the change handler only for referenced objects)
// and lets a test set, delete and break objects and see what was asked.
//
// Thread model: like every ObjectManager, one thread.
#ifndef VOLUMEMANAGER_CACHE_FAKE_OBJECT_MANAGER_H_
#define VOLUMEMANAGER_CACHE_FAKE_OBJECT_MANAGER_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cache/object_manager.h"

namespace cache {

class FakeObjectManager : public ObjectManager {
 public:
  // Creates or replaces an object; notifies when referenced.
  void SetConfigMap(kube::ConfigMap cm) {
    kube::ObjectRef ref{kube::ObjectKind::kConfigMap, cm.metadata.namespace_, cm.metadata.name};
    config_maps_[ref] = std::make_shared<const kube::ConfigMap>(std::move(cm));
    Changed(ref);
  }
  // Deletes an object; notifies when referenced.
  void Delete(const kube::ObjectRef& ref) {
    config_maps_.erase(ref);
    secrets_.erase(ref);
    Changed(ref);
  }
  // Makes gets of `ref` fail with `status` (a failure) until ClearError.
  void SetError(const kube::ObjectRef& ref, base::Status status) {
    errors_[ref] = std::move(status);
  }
  void ClearError(const kube::ObjectRef& ref) { errors_.erase(ref); }
  // Makes `ref` unread (gets fail as an unsynced watch's do) until MarkRead, which notifies.
  void SetUnread(const kube::ObjectRef& ref) {
    unread_.insert(ref);
    SetError(ref, base::Status::Error("failed to sync configmap cache: timed out waiting for the "
                                      "condition"));
  }
  void MarkRead(const kube::ObjectRef& ref) {
    unread_.erase(ref);
    ClearError(ref);
    Changed(ref);
  }
  bool Unread(const kube::ObjectRef& ref) const override {
    return IsRegistered(ref) && unread_.count(ref) != 0;
  }

  // What the code under test did.
  const std::map<std::string, std::vector<kube::ObjectRef>>& registrations() const { return pods_; }
  bool IsRegistered(const kube::ObjectRef& ref) const {
    for (const auto& [uid, refs] : pods_) {
      for (const auto& r : refs) {
        if (r == ref) return true;
      }
    }
    return false;
  }
  int gets() const { return gets_; }
  // Every Fetch's refs and mode, in order.
  struct FetchCall {
    std::vector<kube::ObjectRef> refs;
    FetchMode mode;
  };
  const std::vector<FetchCall>& fetches() const { return fetches_; }
  // While deferred, a Fetch completes only at CompleteFetches (as a manager that reads from the
  // network); otherwise at once, inside the call.
  void DeferFetches(bool defer) { defer_fetches_ = defer; }
  size_t pending_fetches() const { return pending_fetches_.size(); }
  void CompleteFetches() {
    auto pending = std::move(pending_fetches_);
    pending_fetches_.clear();
    for (auto& done : pending) done();
  }

  void Fetch(const std::vector<kube::ObjectRef>& refs, FetchMode mode,
             std::function<void()> done) override {
    fetches_.push_back({refs, mode});
    if (defer_fetches_) {
      pending_fetches_.push_back(std::move(done));
    } else {
      done();
    }
  }

  void RegisterPod(const std::string& pod_uid, const std::vector<kube::ObjectRef>& refs) override {
    if (refs.empty()) {
      pods_.erase(pod_uid);
    } else {
      pods_[pod_uid] = refs;
    }
  }
  void UnregisterPod(const std::string& pod_uid) override { pods_.erase(pod_uid); }

  base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& ns, const std::string& name) override {
    return Get(config_maps_, {kube::ObjectKind::kConfigMap, ns, name});
  }
  base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& ns,
                                                              const std::string& name) override {
    return Get(secrets_, {kube::ObjectKind::kSecret, ns, name});
  }
  void SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) override {
    on_change_ = std::move(handler);
  }
  // Every Set* runs the change handler; whether the fake claims so (the Watch strategy's promise)
  // is the test's choice. Default: no, as Get and Cache.
  bool AnnouncesEveryChange() const override { return announces_every_change_; }
  void SetAnnouncesEveryChange(bool announces) { announces_every_change_ = announces; }

 private:
  template <typename T>
  base::Result<std::shared_ptr<const T>> Get(
      const std::map<kube::ObjectRef, std::shared_ptr<const T>>& store,
      const kube::ObjectRef& ref) {
    ++gets_;
    if (!IsRegistered(ref)) return NotRegisteredError(ref.namespace_, ref.name);
    if (auto e = errors_.find(ref); e != errors_.end()) return e->second;
    auto it = store.find(ref);
    return it == store.end() ? std::shared_ptr<const T>() : it->second;
  }
  void Changed(const kube::ObjectRef& ref) {
    if (on_change_ && IsRegistered(ref)) on_change_(ref);
  }

  std::map<kube::ObjectRef, std::shared_ptr<const kube::ConfigMap>> config_maps_;
  std::map<kube::ObjectRef, std::shared_ptr<const kube::Secret>> secrets_;
  std::map<kube::ObjectRef, base::Status> errors_;
  std::set<kube::ObjectRef> unread_;
  std::map<std::string, std::vector<kube::ObjectRef>> pods_;
  std::function<void(const kube::ObjectRef&)> on_change_;
  int gets_ = 0;
  std::vector<FetchCall> fetches_;
  bool defer_fetches_ = false;
  std::vector<std::function<void()>> pending_fetches_;
  bool announces_every_change_ = false;
};

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_FAKE_OBJECT_MANAGER_H_
