// The fsGroup ownership pass (docs/kubelet-behavior.md §4.6), run by the atomic
// writer as its permission callback after a new version's files are written and before it is
// published (so it runs only when content changed).
//
// Over the whole volume dir, children before their parent: every entry's group becomes fsGroup;
// regular files get mode |= 0440; directories get mode |= 0550 plus setgid; symlinks are chowned
// (lchown) and never chmodded; other file types are chowned only. Consequence, as upstream:
// `defaultMode: 0400` shows as 0440 (issue 57923).
//
// Safety: every call goes through atomicwriter::Env relative to the volume dir's
// descriptor, opening with O_NOFOLLOW and changing the opened object, so no symlink is ever
// followed and nothing outside the volume dir changes. A failed chown or chmod of one entry is
// logged and skipped (as upstream); only an unreadable volume dir fails the pass.
#ifndef VOLUMEMANAGER_PLUGINS_OWNERSHIP_PASS_H_
#define VOLUMEMANAGER_PLUGINS_OWNERSHIP_PASS_H_

#include <sys/types.h>

#include <string>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/env.h"
#include "base/status.h"
#include "kube/pod.h"

namespace plugins {

// What one pass did; for logs and tests.
struct OwnershipPassStats {
  int entries = 0;   // entries visited, the volume dir included
  int failures = 0;  // chown / chmod / open calls that failed and were skipped
};

// Runs the pass over the directory open at `volume_dir_fd`.
base::Status SetVolumeOwnership(atomicwriter::Env& fs, int volume_dir_fd, gid_t fs_group,
                                OwnershipPassStats* stats = nullptr);

// The volume a pass runs on, as its log lines (keys pod, podUID, volume) and errors
// (`volume "cfg" of pod "shop/web-0": ...`) name it.
struct OwnershipPassTarget {
  std::string pod;  // namespace/name
  std::string pod_uid;
  std::string volume;
};

// The pass as a permission callback.
atomicwriter::PermissionCallback OwnershipPass(gid_t fs_group, OwnershipPassTarget target);

// OwnershipPass(pod's fsGroup) on the pod's volume `volume`, or nullptr when the pod sets no
// fsGroup.
atomicwriter::PermissionCallback OwnershipPassFor(const kube::Pod& pod, const std::string& volume);

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_OWNERSHIP_PASS_H_
