#include "volumemanager/state/actual_state_of_world.h"

#include <utility>

namespace volumemanager {

void ActualStateOfWorld::MarkMounted(const VolumeKey& key, const std::string& plugin_dir,
                                     const std::string& ts_dir,
                                     std::chrono::system_clock::time_point when,
                                     SteadyTime op_started) {
  changed_.insert(key);
  MountedVolume& v = volumes_[key];
  v.plugin_dir_ = InternPluginDir(plugin_dir);
  v.uncertain = false;
  if (auto early = early_requests_.find(key); early != early_requests_.end()) {
    if (!v.last_remount_request() || *v.last_remount_request() < early->second) {
      v.rare().last_remount_request = early->second;
    }
    early_requests_.erase(early);
  }
  if (v.last_remount_request() && *v.last_remount_request() > op_started) {
    // A change arrived after the operation read its objects: it is not served yet.
    v.remount_required = true;
    v.rare().remount_requested_at = v.last_remount_request();
  } else {
    v.remount_required = false;
    if (v.rare_) {
      v.rare_->remount_requested_at.reset();
      v.rare_->last_remount_request.reset();
    }
  }
  v.ts_dir = ts_dir;
  v.last_sync = when;
  if (v.rare_) v.rare_->last_error.clear();
  v.TrimRare();
}

void ActualStateOfWorld::AddUncertain(const VolumeKey& key, const std::string& plugin_dir,
                                      uint64_t tmpfs_bytes, const std::string& tmpfs_version) {
  changed_.insert(key);
  MountedVolume& v = volumes_[key];
  v.plugin_dir_ = InternPluginDir(plugin_dir);
  v.uncertain = true;
  SetTmpfsBytes(key, tmpfs_bytes, tmpfs_version);
}

void ActualStateOfWorld::SetTmpfsBytes(const VolumeKey& key, uint64_t bytes,
                                       const std::string& version) {
  auto it = volumes_.find(key);
  if (it == volumes_.end()) return;
  MountedVolume& v = it->second;
  tmpfs_bytes_ = tmpfs_bytes_ - v.tmpfs_bytes() + bytes;
  if (bytes == 0 && !v.rare_) return;
  v.rare().tmpfs_bytes = bytes;
  v.rare().tmpfs_version = bytes == 0 ? "" : version;
  v.TrimRare();
}

bool ActualStateOfWorld::MarkRemountRequired(const VolumeKey& key, SteadyTime when) {
  auto it = volumes_.find(key);
  if (it == volumes_.end()) {
    early_requests_[key] = when;
    return false;
  }
  changed_.insert(key);
  MountedVolume& v = it->second;
  v.remount_required = true;
  if (!v.remount_requested_at()) v.rare().remount_requested_at = when;
  v.rare().last_remount_request = when;
  return true;
}

void ActualStateOfWorld::SetLastError(const VolumeKey& key, const std::string& error) {
  auto it = volumes_.find(key);
  if (it == volumes_.end()) return;
  it->second.rare().last_error = error;
  it->second.TrimRare();
}

void ActualStateOfWorld::SetVerified(const VolumeKey& key, VolumeInputs inputs, SteadyTime when) {
  auto it = volumes_.find(key);
  if (it == volumes_.end()) return;
  it->second.inputs = std::move(inputs);
  it->second.verified_at = when;
}

void ActualStateOfWorld::SetInputs(const VolumeKey& key, VolumeInputs inputs) {
  auto it = volumes_.find(key);
  if (it != volumes_.end()) it->second.inputs = std::move(inputs);
}

void ActualStateOfWorld::Remove(const VolumeKey& key) {
  auto it = volumes_.find(key);
  if (it == volumes_.end()) return;
  tmpfs_bytes_ -= it->second.tmpfs_bytes();
  volumes_.erase(it);
  changed_.insert(key);
}

const MountedVolume* ActualStateOfWorld::Find(const VolumeKey& key) const {
  auto it = volumes_.find(key);
  return it == volumes_.end() ? nullptr : &it->second;
}

std::vector<VolumeKey> ActualStateOfWorld::VolumesOfPod(const std::string& pod_uid) const {
  std::vector<VolumeKey> out;
  for (auto it = volumes_.lower_bound(VolumeKey{pod_uid, ""});
       it != volumes_.end() && it->first.pod_uid == pod_uid; ++it) {
    out.push_back(it->first);
  }
  return out;
}

bool ActualStateOfWorld::HasPod(const std::string& pod_uid) const {
  auto it = volumes_.lower_bound(VolumeKey{pod_uid, ""});
  return it != volumes_.end() && it->first.pod_uid == pod_uid;
}

}  // namespace volumemanager
