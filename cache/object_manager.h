// ObjectManager: where volume plugins get the ConfigMaps and Secrets that pods reference, and how
// the volume manager learns that one changed. The kubelet's configmap/secret managers
// (docs/kubelet-behavior.md §5) behind one interface; implementations: LocalObjectStore (standalone
// mode, local_object_store.h) and the API-backed Get / Cache / Watch managers.
//
// Contract:
//   * A pod's references are registered before its volumes are mounted and unregistered after
//     they are torn down; RegisterPod replaces the pod's earlier registration.
//   * A get for an object no registered pod references fails with the kubelet's text
//     `object "<ns>"/"<name>" not registered`.
//   * A get returns nullptr when the object does not exist; the caller words the not-found error
//     (its text depends on the strategy, docs/kubelet-behavior.md §7). Other failures are errors.
//   * Objects are immutable snapshots: a returned pointer stays valid and unchanged.
//   * The change handler is called for objects some registered pod references, after the change
//     is visible to gets.
//
// Thread model: loop thread only, including the change handler.
#ifndef VOLUMEMANAGER_CACHE_OBJECT_MANAGER_H_
#define VOLUMEMANAGER_CACHE_OBJECT_MANAGER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/config_map.h"
#include "kube/object_ref.h"
#include "kube/secret.h"

namespace cache {

class ObjectManager {
 public:
  virtual ~ObjectManager() = default;

  // The objects a pod's volumes reference (computed by the caller); replaces that pod's earlier
  // registration.
  virtual void RegisterPod(const std::string& pod_uid,
                           const std::vector<kube::ObjectRef>& refs) = 0;
  virtual void UnregisterPod(const std::string& pod_uid) = 0;

  // nullptr = the object does not exist; an error = not registered, unreadable, ...
  virtual base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& ns, const std::string& name) = 0;
  virtual base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& ns,
                                                                      const std::string& name) = 0;

  // Called on the loop thread when an object changes (created, updated, deleted); the Watch
  // strategy calls it at once on a change. Only for objects some registered pod references.
  virtual void SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) = 0;
};

// "object "<ns>"/"<name>" not registered": the kubelet's error for a get of an object no
// registered pod references.
inline base::Status NotRegisteredError(const std::string& ns, const std::string& name) {
  return base::Status::Error("object \"" + ns + "\"/\"" + name + "\" not registered");
}

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_OBJECT_MANAGER_H_
