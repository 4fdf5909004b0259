// The filesystem side of mounting and tearing down one volume. These functions block and run on
// the libuv thread pool, never on the loop thread; they touch only the volume dir and the empty
// directories above it up to the pod dir.
//
// SetUpVolume creates the volume dir when missing (mode 0777, as the kubelet's wrapper does,
// whatever the umask) and writes the payload through the atomic writer. A failure on first mount
// removes what this call created, so no directory is left; a failure on remount leaves the
// published content as it was (upstream issue 113242).
//
// TearDownVolume removes the volume dir without following any symlink inside it, then the
// directories above it that became empty (plugin dir, volumes dir, pod dir).
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_VOLUME_SETUP_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_VOLUME_SETUP_H_

#include <string>

#include "atomicwriter/atomic_writer.h"
#include "base/status.h"

namespace volumemanager {

struct VolumeLocation {
  std::string root_dir;
  std::string pod_uid;
  std::string plugin_dir;  // escaped plugin name
  std::string volume_name;

  std::string dir() const;
};

struct SetUpRequest {
  VolumeLocation location;
  atomicwriter::Payload payload;
  atomicwriter::PermissionCallback set_permissions;  // may be null
  bool durable = false;
};

base::Result<atomicwriter::WriteResult> SetUpVolume(const SetUpRequest& request);

base::Status TearDownVolume(const VolumeLocation& location);

// Removes the pod dir's empty directories (volumes/<plugin>, volumes, the pod dir itself) with
// rmdir only: anything that still holds a file stays.
void RemoveEmptyPodDirs(const std::string& root_dir, const std::string& pod_uid);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_VOLUME_SETUP_H_
