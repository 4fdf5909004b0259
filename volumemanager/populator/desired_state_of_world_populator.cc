#include "volumemanager/populator/desired_state_of_world_populator.h"

#include <string>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "logging/structured_log.h"
#include "volumemanager/state/volume_paths.h"

namespace volumemanager {
namespace {

std::set<std::string> MountedVolumeNames(const kube::Pod& pod) {
  std::set<std::string> names;
  for (const auto* list : {&pod.spec.init_containers, &pod.spec.containers}) {
    for (const kube::Container& c : *list) {
      for (const kube::VolumeMount& m : c.volume_mounts) names.insert(m.name);
    }
  }
  return names;
}

// The parts of a pod a volume's content can depend on (downward API): identity, labels,
// annotations and the spec (resources). Status-only changes do not count.
bool ContentInputsEqual(const kube::Pod& a, const kube::Pod& b) {
  return a.metadata.name == b.metadata.name && a.metadata.namespace_ == b.metadata.namespace_ &&
         a.metadata.uid == b.metadata.uid && a.metadata.labels == b.metadata.labels &&
         a.metadata.annotations == b.metadata.annotations && a.spec == b.spec;
}

}  // namespace

void DesiredStateOfWorldPopulator::Apply(const podconfig::PodUpdate& update, SteadyTime now) {
  for (const podconfig::PodPtr& shared : update.pods) {
    const kube::Pod& pod = *shared;
    switch (update.op) {
      case podconfig::PodOp::kAdd:
      case podconfig::PodOp::kUpdate:
      case podconfig::PodOp::kReconcile:
        SetPod(shared, now);
        break;
      case podconfig::PodOp::kDelete:
        // Terminating: the containers still run and keep their volumes, which are no longer
        // refreshed (docs/kubelet-behavior.md §6.3).
        if (terminating_.insert(pod.metadata.uid).second) {
          logging::Info("Pod is terminating: its volumes stay, not refreshed",
                        {{"pod", logging::KObj(pod.metadata)}, {"podUID", pod.metadata.uid}});
        }
        pods_[pod.metadata.uid] = shared;
        break;
      case podconfig::PodOp::kRemove:
        RemovePod(pod.metadata.uid);
        break;
    }
  }
}

std::shared_ptr<const kube::Pod> DesiredStateOfWorldPopulator::FindPod(
    const std::string& uid) const {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : it->second;
}

void DesiredStateOfWorldPopulator::SetPod(const std::shared_ptr<const kube::Pod>& pod,
                                          SteadyTime now) {
  const std::string& uid = pod->metadata.uid;
  if (base::Status s = CheckPathComponent(uid, "pod UID"); !s.ok()) {
    logging::Error("Invalid pod UID: its volumes are not set up",
                   {{"pod", logging::KObj(pod->metadata)}, {"podUID", uid}, {"err", s}});
    return;
  }
  std::shared_ptr<const kube::Pod> old = FindPod(uid);
  pods_[uid] = pod;
  if (pod->metadata.deletion_timestamp) terminating_.insert(uid);
  const bool inputs_changed = old == nullptr || !ContentInputsEqual(*old, *pod);

  const std::set<std::string> mounted = MountedVolumeNames(*pod);
  std::set<std::string> wanted;
  std::vector<kube::ObjectRef> all_objects;
  std::vector<kube::TokenRef> all_tokens;
  std::vector<std::string> refused;  // volumes newly left to the kubelet by the read policy
  const PodUid pod_uid(uid);         // one string, shared by the keys of all its volumes
  for (const kube::Volume& volume : pod->spec.volumes) {
    const plugins::VolumePlugin* plugin = registry_->FindPlugin(volume);
    if (plugin == nullptr) continue;
    if (mounted.count(volume.name) == 0) {
      // As the kubelet: a volume no container mounts is not set up. Said once per pod version.
      if (inputs_changed) {
        logging::Debug(
            "Volume skipped: no container mounts it",
            {{"pod", logging::KObj(pod->metadata)}, {"podUID", uid}, {"volume", volume.name}});
      }
      continue;
    }
    if (base::Status s = CheckPathComponent(volume.name, "volume name"); !s.ok()) {
      logging::Error("Invalid volume name: volume not set up",
                     {{"pod", logging::KObj(pod->metadata)},
                      {"podUID", uid},
                      {"volume", volume.name},
                      {"err", s}});
      continue;
    }
    VolumeKey key{pod_uid, volume.name};
    if (kubelet_owns_volumes_) {
      if (std::string reason = plugin->KubeletOnlyReason(volume); !reason.empty()) {
        if (left_to_kubelet_.insert(key).second) {
          logging::Info("Volume is left to the kubelet: only it can produce its content",
                        {{"pod", logging::KObj(pod->metadata)},
                         {"podUID", uid},
                         {"volume", volume.name},
                         {"reason", reason}});
        }
        continue;
      }
      const std::string refusal =
          policy_ == nullptr ? "" : policy_->FirstRefusal(plugin->ReferencedObjects(*pod, volume));
      if (!refusal.empty()) {
        if (left_by_policy_.emplace(key, refusal).second) {
          logging::Info(
              "Volume is left to the kubelet: the daemon is configured not to read its "
              "object",
              {{"pod", logging::KObj(pod->metadata)},
               {"podUID", uid},
               {"volume", volume.name},
               {"reason", refusal}});
          refused.push_back("volume \"" + volume.name + "\": " + refusal);
        }
        continue;
      }
    }
    wanted.insert(volume.name);
    DesiredVolume desired;
    desired.pod = pod;
    desired.spec = &volume;
    desired.plugin = plugin;
    desired.objects = plugin->ReferencedObjects(*pod, volume);
    desired.tokens = plugin->ReferencedTokens(*pod, volume);
    all_objects.insert(all_objects.end(), desired.objects.begin(), desired.objects.end());
    all_tokens.insert(all_tokens.end(), desired.tokens.begin(), desired.tokens.end());

    const DesiredVolume* previous = dsw_->Find(key);
    const bool spec_changed = previous == nullptr || previous->plugin != plugin ||
                              previous->objects != desired.objects ||
                              previous->tokens != desired.tokens || !(previous->volume() == volume);
    if (previous != nullptr && (spec_changed || (inputs_changed && plugin->DependsOnPod(volume)))) {
      asw_->MarkRemountRequired(key, now);
    }
    dsw_->Set(key, std::move(desired));
  }
  for (const VolumeKey& key : dsw_->VolumesOfPod(uid)) {
    if (wanted.count(key.volume_name) == 0) dsw_->Remove(key);
  }
  objects_->RegisterPod(uid, all_objects);
  if (tokens_ != nullptr) tokens_->RegisterPod(uid, all_tokens);
  // Once per pod (its volumes never change): the policy is no failure, but the pod's owner may
  // wonder why its volumes change only at the kubelet's pace.
  if (!refused.empty() && on_policy_) on_policy_(*pod, base::Join(refused, "; "));
}

void DesiredStateOfWorldPopulator::RemovePod(const std::string& uid) {
  for (const VolumeKey& key : dsw_->VolumesOfPod(uid)) dsw_->Remove(key);
  left_to_kubelet_.erase(left_to_kubelet_.lower_bound(VolumeKey{uid, ""}),
                         left_to_kubelet_.lower_bound(VolumeKey{uid + '\0', ""}));
  left_by_policy_.erase(left_by_policy_.lower_bound(VolumeKey{uid, ""}),
                        left_by_policy_.lower_bound(VolumeKey{uid + '\0', ""}));
  objects_->UnregisterPod(uid);
  if (tokens_ != nullptr) tokens_->UnregisterPod(uid);
  pods_.erase(uid);
  terminating_.erase(uid);
}

}  // namespace volumemanager
