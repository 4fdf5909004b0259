// ActualStateOfWorld: every volume dir the daemon has set up (or found on disk at start), what
// is published in it, and whether it must be rewritten.
//
// A volume is "uncertain" when found by the start-up scan (content unknown: the next mount
// verifies and repairs it without a new version when the bytes match). "remount required" is
// set by an object change, a pod change that the content depends on, or the periodic resync;
// `remount_requested_at()` keeps the earliest unserved request, for the propagation latency.
//
// Loop-thread only.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_STATE_ACTUAL_STATE_OF_WORLD_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_STATE_ACTUAL_STATE_OF_WORLD_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "volumemanager/state/volume_inputs.h"
#include "volumemanager/state/volume_key.h"

namespace volumemanager {

// Its key is the map's (ActualStateOfWorld::volumes()), not kept again here. What most volumes
// never hold (a remount request not yet served, a failure, tmpfs pages) is kept apart, allocated
// only while held: 3,000 volumes at rest keep 96 bytes each less.
struct MountedVolume {
  using SteadyTime = std::chrono::steady_clock::time_point;

  // The escaped plugin name, e.g. "kubernetes.io~configmap": held once by the actual state for
  // all its volumes. The volume dir is not kept: VolumeDir(root, pod UID, plugin_dir(), name).
  const std::string& plugin_dir() const { return *plugin_dir_; }
  // The pod object the content on disk was last built from, for log lines about the volume
  // (`logging::KObjOf`), also after the pod is gone; nullptr before the first write or check,
  // as for a volume found on disk at start.
  const std::shared_ptr<const kube::Pod>& pod() const { return inputs.pod; }
  // The earliest remount request not yet served (for the propagation latency), and the latest.
  std::optional<SteadyTime> remount_requested_at() const {
    return rare_ ? rare_->remount_requested_at : std::nullopt;
  }
  std::optional<SteadyTime> last_remount_request() const {
    return rare_ ? rare_->last_remount_request : std::nullopt;
  }
  // Of the last failed attempt, "" after a success.
  const std::string& last_error() const { return rare_ ? rare_->last_error : Empty(); }
  // The memory the daemon holds in the volume (SetTmpfsBytes): the tmpfs pages of the live
  // version `tmpfs_version()`, or 0.
  uint64_t tmpfs_bytes() const { return rare_ ? rare_->tmpfs_bytes : 0; }
  const std::string& tmpfs_version() const { return rare_ ? rare_->tmpfs_version : Empty(); }

  bool uncertain = false;
  bool remount_required = false;
  std::string ts_dir;                               // the published version's dir name
  std::chrono::system_clock::time_point last_sync;  // last successful write or verification
  VolumeInputs inputs;     // what the content last written or verified on disk was built from
  SteadyTime verified_at;  // when the disk was last read or written

 private:
  friend class ActualStateOfWorld;
  struct Rare {
    std::optional<SteadyTime> remount_requested_at;
    std::optional<SteadyTime> last_remount_request;
    std::string last_error;
    uint64_t tmpfs_bytes = 0;
    std::string tmpfs_version;
    bool empty() const {
      return !remount_requested_at && !last_remount_request && last_error.empty() &&
             tmpfs_bytes == 0 && tmpfs_version.empty();
    }
  };
  static const std::string& Empty() {
    static const std::string empty;
    return empty;
  }
  Rare& rare() {
    if (!rare_) rare_ = std::make_unique<Rare>();
    return *rare_;
  }
  // Dropped once nothing in it is held any more.
  void TrimRare() {
    if (rare_ && rare_->empty()) rare_.reset();
  }
  const std::string* plugin_dir_ = nullptr;  // set by MarkMounted and AddUncertain
  std::unique_ptr<Rare> rare_;
};

class ActualStateOfWorld {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // A successful mount or remount of an operation that started at `op_started`: certain, and no
  // remount pending unless one was requested after the operation had read its objects.
  void MarkMounted(const VolumeKey& key, const std::string& plugin_dir, const std::string& ts_dir,
                   std::chrono::system_clock::time_point when, SteadyTime op_started);
  // Found on disk at start; `tmpfs_bytes` of its live version `tmpfs_version` held on a tmpfs
  // (reconstruction measured them).
  void AddUncertain(const VolumeKey& key, const std::string& plugin_dir, uint64_t tmpfs_bytes = 0,
                    const std::string& tmpfs_version = "");
  // Returns false when the volume is not mounted yet; the request is then remembered, so that a
  // first mount already in flight (which read its inputs before `when`) is followed by a remount.
  bool MarkRemountRequired(const VolumeKey& key, SteadyTime when);
  // Drops what MarkRemountRequired remembered for a volume that is no longer desired.
  void ForgetRequests(const VolumeKey& key) { early_requests_.erase(key); }
  // Remount requests remembered for volumes not mounted yet (bounded memory, tests).
  size_t early_request_count() const { return early_requests_.size(); }
  void SetLastError(const VolumeKey& key, const std::string& error);
  // After a write or verification on disk of content built from `inputs`.
  void SetVerified(const VolumeKey& key, VolumeInputs inputs, SteadyTime when);
  // Inputs found to give the content on disk without reading it (the disk is not verified).
  void SetInputs(const VolumeKey& key, VolumeInputs inputs);
  // The tmpfs pages the daemon holds in the volume's live version `version` (0: none, e.g. the
  // volume is on a disk, or its live version is another writer's); nothing for a volume not in
  // the actual state.
  void SetTmpfsBytes(const VolumeKey& key, uint64_t bytes, const std::string& version);
  void Remove(const VolumeKey& key);
  // The sum of every volume's tmpfs_bytes, kept as they are set and removed (no walk).
  uint64_t tmpfs_bytes() const { return tmpfs_bytes_; }

  const MountedVolume* Find(const VolumeKey& key) const;
  std::vector<VolumeKey> VolumesOfPod(const std::string& pod_uid) const;
  // fn(key, volume) for each volume of the pod, in name order, copying nothing; fn must not
  // change this state.
  template <typename Fn>
  void ForEachVolumeOfPod(const PodUid& pod_uid, Fn&& fn) const {
    for (auto it = volumes_.lower_bound(VolumeKey{pod_uid, ""});
         it != volumes_.end() && it->first.pod_uid == pod_uid; ++it) {
      fn(it->first, it->second);
    }
  }
  bool HasPod(const std::string& pod_uid) const;
  const std::map<VolumeKey, MountedVolume>& volumes() const { return volumes_; }

  // The keys whose state changed since the last call (for the reconciler).
  std::set<VolumeKey> TakeChanged() { return std::exchange(changed_, {}); }
  // Whether `key` changed since the last TakeChanged: the next pass looks at it.
  bool Changed(const VolumeKey& key) const { return changed_.count(key) != 0; }

 private:
  // The one copy of `plugin_dir` that volumes point at (a handful: one per plugin in use).
  const std::string* InternPluginDir(const std::string& plugin_dir) {
    return &*plugin_dirs_.insert(plugin_dir).first;
  }

  std::map<VolumeKey, MountedVolume> volumes_;
  std::set<std::string> plugin_dirs_;               // never shrinks: bounded by the plugins
  std::map<VolumeKey, SteadyTime> early_requests_;  // requests for volumes not mounted yet
  std::set<VolumeKey> changed_;
  uint64_t tmpfs_bytes_ = 0;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_STATE_ACTUAL_STATE_OF_WORLD_H_
