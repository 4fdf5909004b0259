#include "volumemanager/state/desired_state_of_world.h"

#include <utility>

namespace volumemanager {

void DesiredStateOfWorld::Set(const VolumeKey& key, DesiredVolume volume) {
  Remove(key);
  changed_.insert(key);
  auto it = volumes_.emplace(key, std::move(volume)).first;
  for (const kube::ObjectRef& ref : it->second.objects) readers_[ref].insert(&it->first);
}

void DesiredStateOfWorld::Remove(const VolumeKey& key) {
  auto it = volumes_.find(key);
  if (it == volumes_.end()) return;
  changed_.insert(key);
  for (const kube::ObjectRef& ref : it->second.objects) {
    auto r = readers_.find(ref);
    if (r == readers_.end()) continue;
    r->second.erase(&it->first);
    if (r->second.empty()) readers_.erase(r);
  }
  volumes_.erase(it);
}

const DesiredVolume* DesiredStateOfWorld::Find(const VolumeKey& key) const {
  auto it = volumes_.find(key);
  return it == volumes_.end() ? nullptr : &it->second;
}

std::vector<VolumeKey> DesiredStateOfWorld::VolumesOfPod(const std::string& pod_uid) const {
  std::vector<VolumeKey> out;
  for (auto it = volumes_.lower_bound(VolumeKey{pod_uid, ""});
       it != volumes_.end() && it->first.pod_uid == pod_uid; ++it) {
    out.push_back(it->first);
  }
  return out;
}

std::vector<VolumeKey> DesiredStateOfWorld::VolumesReading(const kube::ObjectRef& object) const {
  auto it = readers_.find(object);
  if (it == readers_.end()) return {};
  std::vector<VolumeKey> out;
  out.reserve(it->second.size());
  for (const VolumeKey* key : it->second) out.push_back(*key);
  return out;
}

}  // namespace volumemanager
