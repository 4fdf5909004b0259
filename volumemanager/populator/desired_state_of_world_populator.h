// DesiredStateOfWorldPopulator: turns the merged stream of pod updates (podconfig) into desired
// volumes (docs/kubelet-behavior.md §6.2), event-driven rather than on a 100 ms loop.
//
// Only volumes some container or init container mounts are desired (an unmounted volume is
// ignored, as the kubelet does), and only kinds a plugin supports (emptyDir and others belong to
// someone else). For each pod it registers the objects its volumes read with the object manager,
// and the service account tokens they include with the token manager (when there is one), so
// their changes are noticed. A pod change the content depends on (downward API fields) marks
// those mounted volumes for remount. A terminating pod (DELETE) keeps its volumes but is no longer
// refreshed; a removed pod (REMOVE) leaves the desired state. Beside a kubelet that owns the
// volumes (`kubelet_owns_volumes`), volumes only the kubelet can produce
// (VolumePlugin::KubeletOnlyReason: downwardAPI; projected with any source but configMap, secret
// and downwardAPI) are not desired: each is logged once with the reason and listed in
// left_to_kubelet(). So are, there, the volumes that read an object the daemon's read policy
// refuses (cache/read_policy.h: --no-secrets, --object-namespaces): configured policy, not a
// failure, so no object is requested for them and `on_policy` tells the pod once, naming each
// such volume and why (a Normal Event); they are listed in left_by_policy(), not in
// left_to_kubelet(). Where the daemon owns the volumes the policy is the object manager's
// (PolicyObjectManager): those volumes fail, naming it, since nobody else writes them.
//
// Loop-thread only.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_POPULATOR_DESIRED_STATE_OF_WORLD_POPULATOR_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_POPULATOR_DESIRED_STATE_OF_WORLD_POPULATOR_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "cache/object_manager.h"
#include "cache/read_policy.h"
#include "cache/token_manager.h"
#include "kube/pod.h"
#include "plugins/plugin_registry.h"
#include "podconfig/pod_update.h"
#include "volumemanager/state/actual_state_of_world.h"
#include "volumemanager/state/desired_state_of_world.h"

namespace volumemanager {

class DesiredStateOfWorldPopulator {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  // A pod's volumes left to the kubelet by the read policy: "volume \"a\": <refusal>; ...".
  using PolicyReport = std::function<void(const kube::Pod& pod, const std::string& volumes)>;

  // `policy` (null: every object is read) is consulted only when the kubelet owns the volumes;
  // not owned.
  DesiredStateOfWorldPopulator(const plugins::PluginRegistry* registry, DesiredStateOfWorld* dsw,
                               ActualStateOfWorld* asw, cache::ObjectManager* objects,
                               bool kubelet_owns_volumes = false,
                               cache::TokenManager* tokens = nullptr,
                               const cache::ReadPolicy* policy = nullptr,
                               PolicyReport on_policy = nullptr)
      : registry_(registry),
        dsw_(dsw),
        asw_(asw),
        objects_(objects),
        tokens_(tokens),
        kubelet_owns_volumes_(kubelet_owns_volumes),
        policy_(policy),
        on_policy_(std::move(on_policy)) {}

  void Apply(const podconfig::PodUpdate& update, SteadyTime now);

  // The newest object of a known pod, or nullptr.
  std::shared_ptr<const kube::Pod> FindPod(const std::string& uid) const;
  bool IsTerminating(const std::string& uid) const { return terminating_.count(uid) != 0; }
  const std::map<std::string, std::shared_ptr<const kube::Pod>>& pods() const { return pods_; }
  size_t terminating_count() const { return terminating_.size(); }
  // Volumes of known pods left wholly to the kubelet (kubelet ownership): those only it can
  // produce, and (apart) those the read policy keeps the daemon from reading.
  const std::set<VolumeKey>& left_to_kubelet() const { return left_to_kubelet_; }
  const std::map<VolumeKey, std::string>& left_by_policy() const { return left_by_policy_; }

 private:
  // `pod` is kept as it is (shared with PodConfig and the source), never copied.
  void SetPod(const std::shared_ptr<const kube::Pod>& pod, SteadyTime now);
  void RemovePod(const std::string& uid);

  const plugins::PluginRegistry* registry_;
  DesiredStateOfWorld* dsw_;
  ActualStateOfWorld* asw_;
  cache::ObjectManager* objects_;
  cache::TokenManager* tokens_;  // null: none (standalone mode)
  bool kubelet_owns_volumes_;
  const cache::ReadPolicy* policy_;
  PolicyReport on_policy_;
  std::map<std::string, std::shared_ptr<const kube::Pod>> pods_;
  std::set<VolumeKey> left_to_kubelet_;
  std::map<VolumeKey, std::string> left_by_policy_;  // -> the policy's refusal
  std::set<std::string> terminating_;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_POPULATOR_DESIRED_STATE_OF_WORLD_POPULATOR_H_
