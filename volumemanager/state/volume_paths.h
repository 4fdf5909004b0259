// Where pod volumes live under the root dir (docs/kubelet-behavior.md §1.1):
//   <root>/pods/<pod uid>/volumes/<escaped plugin name>/<volume name>
// and the check that a pod UID or volume name is safe to use as one path component.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_PATHS_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_PATHS_H_

#include <string>

#include "base/status.h"

namespace volumemanager {

inline std::string PodsDir(const std::string& root_dir) { return root_dir + "/pods"; }
inline std::string PodDir(const std::string& root_dir, const std::string& pod_uid) {
  return PodsDir(root_dir) + "/" + pod_uid;
}
inline std::string PodVolumesDir(const std::string& root_dir, const std::string& pod_uid) {
  return PodDir(root_dir, pod_uid) + "/volumes";
}
// Built in one string (one allocation): each write names its volume dir.
inline std::string VolumeDir(const std::string& root_dir, const std::string& pod_uid,
                             const std::string& plugin_dir, const std::string& volume_name) {
  std::string dir;
  dir.reserve(root_dir.size() + pod_uid.size() + plugin_dir.size() + volume_name.size() + 17);
  dir.append(root_dir).append("/pods/").append(pod_uid).append("/volumes/");
  dir.append(plugin_dir).append("/").append(volume_name);
  return dir;
}

// Fails unless `value` can name one directory: non-empty, at most 255 bytes, no '/', no NUL,
// not "." or "..". `what` names the value in the error ("pod UID", "volume name"); a NUL byte
// (which any system call would cut the name at) has its own error, the value shown escaped.
base::Status CheckPathComponent(const std::string& value, const char* what);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_PATHS_H_
