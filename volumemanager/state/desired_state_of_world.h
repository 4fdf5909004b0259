// DesiredStateOfWorld: every pod volume that should be mounted, with the pod object it was last
// built from, its plugin and the objects its content comes from. An index from object to volumes
// lets an object change mark exactly the volumes that read it.
//
// Loop-thread only. Plugins are not owned (the registry outlives this).
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_STATE_DESIRED_STATE_OF_WORLD_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_STATE_DESIRED_STATE_OF_WORLD_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kube/object_ref.h"
#include "kube/pod.h"
#include "kube/token_ref.h"
#include "plugins/volume_plugin.h"
#include "volumemanager/state/volume_key.h"

namespace volumemanager {

// Its key is the map's (DesiredStateOfWorld::volumes()), not kept again here.
struct DesiredVolume {
  std::shared_ptr<const kube::Pod> pod;  // the newest pod object (replaced on every update)
  const kube::Volume* spec = nullptr;    // the volume, inside *pod (kept alive by `pod`)
  const plugins::VolumePlugin* plugin = nullptr;
  std::vector<kube::ObjectRef> objects;  // what the content is built from
  std::vector<kube::TokenRef> tokens;    // the service account tokens it includes

  const kube::Volume& volume() const { return *spec; }
  // "<plugin>/<pod uid>-<volume>", made when asked (log lines and /debug/state only): not kept
  // per volume.
  std::string unique_name(const VolumeKey& key) const {
    return plugins::UniqueVolumeName(*plugin, key.pod_uid, key.volume_name);
  }
};

class DesiredStateOfWorld {
 public:
  // Adds or replaces the volume.
  void Set(const VolumeKey& key, DesiredVolume volume);
  void Remove(const VolumeKey& key);

  const DesiredVolume* Find(const VolumeKey& key) const;
  std::vector<VolumeKey> VolumesOfPod(const std::string& pod_uid) const;
  // Volumes whose content is built from `object`.
  std::vector<VolumeKey> VolumesReading(const kube::ObjectRef& object) const;
  const std::map<VolumeKey, DesiredVolume>& volumes() const { return volumes_; }
  // Objects with at least one reader (bounded memory, tests).
  size_t read_object_count() const { return readers_.size(); }

  // The keys added, replaced or removed since the last call (the reconciler looks only at
  // these, so an idle pass costs nothing).
  std::set<VolumeKey> TakeChanged() { return std::exchange(changed_, {}); }
  // Whether `key` changed since the last TakeChanged: the next pass looks at it.
  bool Changed(const VolumeKey& key) const { return changed_.count(key) != 0; }

 private:
  std::map<VolumeKey, DesiredVolume> volumes_;
  std::set<VolumeKey> changed_;
  // Ordered by the keys they point at (keys of volumes_: a reader is removed before its volume).
  struct KeyPointerLess {
    bool operator()(const VolumeKey* a, const VolumeKey* b) const { return *a < *b; }
  };
  // Object -> the volumes reading it: pointers to the keys of volumes_, not copies.
  std::map<kube::ObjectRef, std::set<const VolumeKey*, KeyPointerLess>> readers_;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_STATE_DESIRED_STATE_OF_WORLD_H_
