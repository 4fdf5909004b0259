// The filesystem side of mounting and tearing down one volume. These functions block and run on
// the libuv thread pool, never on the loop thread; they touch only the volume dir and the empty
// directories above it up to the pod dir.
//
// SetUpVolume creates the volume dir when missing (mode 0777, as the kubelet's wrapper does,
// whatever the umask) and writes the payload through the atomic writer. A failure on first mount
// removes what this call created, so no directory is left; a failure on remount leaves the
// published content as it was (upstream issue 113242).
//
// Memory-medium volumes (secret, downwardAPI, projected; `tmpfs` set) get a tmpfs mounted on a
// new or empty volume dir, as the kubelet does, so their bytes never reach the node's disk. Where
// mounting is not permitted (an unprivileged run) the volume stays a plain directory and a
// warning is logged once per process.
//
// TearDownVolume unmounts a tmpfs volume dir, removes it without following any symlink inside,
// then the directories above it that became empty (plugin dir, volumes dir, pod dir).
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
  bool tmpfs = false;  // mount a tmpfs on the volume dir (memory medium)
};

// True when `dir` is a mount point (another filesystem than its parent's).
bool IsMountPoint(const std::string& dir);

base::Result<atomicwriter::WriteResult> SetUpVolume(const SetUpRequest& request);

base::Status TearDownVolume(const VolumeLocation& location);

// Removes the pod dir's empty directories (volumes/<plugin>, volumes, the pod dir itself) with
// rmdir only: anything that still holds a file stays.
void RemoveEmptyPodDirs(const std::string& root_dir, const std::string& pod_uid);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_VOLUME_SETUP_H_
