// VolumeKey: one volume of one pod (pod UID + the pod's volume name), the unit of desired state,
// actual state and operations. At most one operation runs per key at a time.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_

#include <compare>
#include <string>

namespace volumemanager {

struct VolumeKey {
  std::string pod_uid;
  std::string volume_name;

  auto operator<=>(const VolumeKey&) const = default;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_
