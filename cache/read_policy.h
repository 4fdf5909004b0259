// ReadPolicy: which ConfigMaps and Secrets the daemon is configured to read from the API server
// (--no-secrets, --object-namespaces; the chart passes them from rbac.secrets: false and
// rbac.namespaces, the rights it grants). A refusal the configuration predicts is policy, not a
// failure: the object is never requested, so no 403 comes back, and the volumes that would read it
// are left to the kubelet where it owns the volumes (the populator: a Normal Event per pod, never
// a Warning). Where the daemon owns the volumes (self ownership) nobody else writes them: those
// volumes fail, naming the policy.
//
// PolicyObjectManager applies a ReadPolicy in front of another ObjectManager: a refused object is
// never registered with it (no watch, no cache entry, no request) and its gets fail with the
// policy's sentence; every other call goes through unchanged.
//
// Loop-thread only (as every ObjectManager).
#ifndef VOLUMEMANAGER_CACHE_READ_POLICY_H_
#define VOLUMEMANAGER_CACHE_READ_POLICY_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cache/object_manager.h"
#include "kube/object_ref.h"

namespace cache {

struct ReadPolicy {
  bool secrets = true;               // false: --no-secrets
  std::set<std::string> namespaces;  // --object-namespaces; empty: every namespace

  bool ReadsEverything() const { return secrets && namespaces.empty(); }
  // Why `ref` is not read, naming the object, the flag and the chart value ("" when it is read).
  // E.g. "secret shop/db is not read: the daemon reads no Secrets (--no-secrets; chart:
  // rbac.secrets: false)".
  std::string Refusal(const kube::ObjectRef& ref) const;
  // The first refusal among `refs` ("" when every one is read).
  std::string FirstRefusal(const std::vector<kube::ObjectRef>& refs) const;
  // One line for the start-up log: what is not read ("" when everything is).
  std::string Describe() const;
};

class PolicyObjectManager : public ObjectManager {
 public:
  // `inner` must outlive this manager.
  PolicyObjectManager(ObjectManager* inner, ReadPolicy policy)
      : inner_(inner), policy_(std::move(policy)) {}

  const ReadPolicy& policy() const { return policy_; }

  void RegisterPod(const std::string& pod_uid, const std::vector<kube::ObjectRef>& refs) override;
  void UnregisterPod(const std::string& pod_uid) override { inner_->UnregisterPod(pod_uid); }
  base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& ns, const std::string& name) override;
  base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& ns,
                                                              const std::string& name) override;
  base::Result<ObjectRevision> GetRevision(const kube::ObjectRef& ref) override;
  bool Unread(const kube::ObjectRef& ref) const override;
  bool AnnouncesEveryChange() const override { return inner_->AnnouncesEveryChange(); }
  void SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) override {
    inner_->SetChangeHandler(std::move(handler));
  }
  void Fetch(const std::vector<kube::ObjectRef>& refs, FetchMode mode,
             std::function<void()> done) override;

 private:
  std::vector<kube::ObjectRef> Allowed(const std::vector<kube::ObjectRef>& refs) const;

  ObjectManager* inner_;
  ReadPolicy policy_;
};

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_READ_POLICY_H_
