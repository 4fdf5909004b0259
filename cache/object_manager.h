// ObjectManager: where volume plugins get the ConfigMaps and Secrets that pods reference, and how
// the volume manager learns that one changed. The kubelet's configmap/secret managers
// (docs/kubelet-behavior.md §5) behind one interface; implementations: LocalObjectStore (standalone
// mode, local_object_store.h) and the API-backed Get / Cache / Watch managers.
//
// Contract:
//   * A pod's references are registered before its volumes are mounted, and unregistered when
//     the pod is removed (gone from its sources), before its volumes are torn down: a teardown
//     reads no object, nor does one that failed and is retried, and a registration kept until
//     then would hold the pod's watches open for as long as a teardown keeps failing. (The
//     kubelet unregisters later, once it has unmounted the pod's volumes: docs/kubelet-behavior.md
//     §5.) A terminating pod (deletionTimestamp set) is not removed: it stays registered.
//     RegisterPod replaces the pod's earlier registration.
//   * A get for an object no registered pod references fails with the kubelet's text
//     `object "<ns>"/"<name>" not registered`.
//   * A get returns nullptr when the object does not exist; the caller words the not-found error
//     (its text depends on the strategy, docs/kubelet-behavior.md §7). Other failures are errors.
//   * Objects are immutable snapshots: a returned pointer stays valid and unchanged.
//   * The change handler is called for objects some registered pod references, after the change
//     is visible to gets.
//   * GetRevision returns the same object a get would, with its ContentDigest (object_digest.h).
//     An implementation that decodes objects computes the digest once per revision, where it
//     decodes, off the loop thread; the default here computes it at each call, on the caller's
//     thread (good enough for fakes, not for a daemon).
//
// Thread model: loop thread only, including the change handler.
#ifndef VOLUMEMANAGER_CACHE_OBJECT_MANAGER_H_
#define VOLUMEMANAGER_CACHE_OBJECT_MANAGER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "cache/object_digest.h"
#include "kube/config_map.h"
#include "kube/object_ref.h"
#include "kube/secret.h"

namespace cache {

// One object revision as served: the object (of the ref's kind; both null when it does not
// exist) and the ContentDigest of what volumes read from it (empty when it does not exist).
struct ObjectRevision {
  std::shared_ptr<const kube::ConfigMap> config_map;
  std::shared_ptr<const kube::Secret> secret;
  base::Digest digest;

  bool exists() const { return config_map != nullptr || secret != nullptr; }
};

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

  // The revision a get of `ref` returns now, with its digest; the same errors as a get.
  virtual base::Result<ObjectRevision> GetRevision(const kube::ObjectRef& ref) {
    ObjectRevision revision;
    if (ref.kind == kube::ObjectKind::kConfigMap) {
      auto got = GetConfigMap(ref.namespace_, ref.name);
      if (!got.ok()) return got.status();
      revision.config_map = std::move(got).value();
      if (revision.config_map) revision.digest = ContentDigest(*revision.config_map);
    } else {
      auto got = GetSecret(ref.namespace_, ref.name);
      if (!got.ok()) return got.status();
      revision.secret = std::move(got).value();
      if (revision.secret) revision.digest = ContentDigest(*revision.secret);
    }
    return revision;
  }

  // True while `ref` has neither a revision nor an error to give: its first read is still under
  // way (the Watch strategy's initial list can take longer than a fetch waits, e.g. 1,000 watches
  // set up at the client's QPS). Its gets then fail ("failed to sync"), and the first read that
  // lands runs the change handler. Beside the kubelet a volume waits for it instead of failing.
  virtual bool Unread(const kube::ObjectRef& ref) const {
    (void)ref;
    return false;
  }

  // Whether every change of a referenced object that gets can return is announced through the
  // change handler (the Watch strategy): a periodic look at a volume whose objects announced
  // nothing then finds them as they were. False (Get, Cache): only a Fetch shows a change.
  virtual bool AnnouncesEveryChange() const { return false; }
  // Called on the loop thread when an object changes (created, updated, deleted); the Watch
  // strategy calls it at once on a change. Only for objects some registered pod references.
  virtual void SetChangeHandler(std::function<void(const kube::ObjectRef&)> handler) = 0;

  // Before gets of `refs`, asynchronously: `done` runs on the loop thread once a get of each ref
  // returns what the strategy promises, or the error that kept it from doing so:
  //   * kStrategy, before a mount or refresh: Get: each ref fetched from the source now; Cache:
  //     fetched when its entry is stale (TTL) or was invalidated by a new reference; Watch: the
  //     ref's initial list done (or given up on after 1 s: the get then fails with the kubelet's
  //     "failed to sync <kind> cache" text).
  //   * kFresh, when the disk shows content the daemon did not write (another writer's swap): a
  //     read from the source that no cache answers (quorum GET), whatever the strategy; a result
  //     newer than the cached revision replaces it (the change handler runs if it changed).
  // Concurrent fetches of one ref share one request. `done` runs exactly once, also when the
  // manager stops first (gets then answer as they can), but never after the manager is
  // destroyed. A manager whose gets are always current (the local store) calls `done` at once.
  enum class FetchMode { kStrategy, kFresh };
  virtual void Fetch(const std::vector<kube::ObjectRef>& refs, FetchMode mode,
                     std::function<void()> done) {
    (void)refs;
    (void)mode;
    done();
  }
};

// "object "<ns>"/"<name>" not registered": the kubelet's error for a get of an object no
// registered pod references.
inline base::Status NotRegisteredError(const std::string& ns, const std::string& name) {
  return base::Status::Error("object \"" + ns + "\"/\"" + name + "\" not registered");
}

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_OBJECT_MANAGER_H_
