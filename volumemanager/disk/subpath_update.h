// subPath copies: a pod annotated `volumemanager.io/update-subpaths: "true"` has the files the
// kubelet bound for its `subPath` mounts of a configMap, secret, projected or downwardAPI volume
// brought to the bytes the volume now publishes, in place.
//
// The kubelet binds a subPath file at container start: it resolves `<volume>/<subPath>` through
// `..data` to the file of the version live then, opens it without following links and bind-mounts
// it onto `pods/<uid>/volume-subpaths/<volume>/<container>/<index>` (index: the mount's position
// in that container's own volumeMounts; init containers the same way), which the runtime mounts
// into the container. A later swap of `..data` leaves that inode (the old version's file) as it
// was; UpdateSubPaths writes the new bytes into it.
//
// Nothing at that path (ENOENT on the way to it) is a container that has not started yet: not
// bound, nothing to write and no failure (kNotBound); when it starts, the kubelet binds the file
// the volume publishes then, and the volume's next write looks again.
//
// What is written, and only that: a regular file that is a mount point at exactly that path (a
// placeholder that is not one means this process cannot see the kubelet's binds: its pods dir
// lacks HostToContainer propagation), whose mount (statx mount id, /proc/self/mountinfo) is a bind
// of the file `<version>/<subPath>` of this volume dir on the volume's filesystem (a removed
// version's root ends in "//deleted"), and which is not the file `..data` publishes now (a
// container restarted after the last swap is bound to the live file, which is never written in
// place: it is current). Every step acts on a descriptor already checked: the path is opened
// beneath the root dir, one component at a time, following no link (O_PATH | O_NOFOLLOW), and
// the file is reopened for writing through /proc/self/fd/N of that descriptor. The write is one
// pwrite of the whole content at offset 0, then ftruncate to its length (never truncate first: a
// reader would see an empty file), then fsync, and only when the bytes differ.
//
// Not atomic for a reader that reads while it happens, and a file that shrinks can fault a reader
// that maps it; two subPath files change one after the other (README.md and docs/annotations.md
// say so, and why a new bind in the container's mount namespace was rejected).
//
// PlanSubPathUpdates runs on the loop thread (pod fields only); UpdateSubPaths blocks and runs on
// the thread pool (the reconciler's write operation, right after the volume's write).
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_DISK_SUBPATH_UPDATE_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_DISK_SUBPATH_UPDATE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "atomicwriter/env.h"
#include "kube/pod.h"
#include "volumemanager/disk/volume_setup.h"

namespace volumemanager {

inline constexpr char kUpdateSubPathsAnnotation[] = "volumemanager.io/update-subpaths";

// One container volumeMount with a subPath (or subPathExpr) into the volume.
struct SubPathMount {
  std::string container;
  size_t index = 0;      // its position in the container's volumeMounts
  std::string sub_path;  // as the pod names it
  std::string refusal;   // not empty: refused before any filesystem call (why)

  bool operator==(const SubPathMount&) const = default;
};

// What a write of one volume of a pod does about its subPath mounts.
struct SubPathPlan {
  // The annotation's value is neither "true" nor "false" (why, naming pod and annotation): no
  // subPath is updated; the volume itself is kept current.
  std::string annotation_error;
  std::vector<SubPathMount> mounts;  // empty unless the pod asks for updates

  bool empty() const { return annotation_error.empty() && mounts.empty(); }
};

// The subPath mounts of `volume` in `pod` that the pod asks to keep current (none without the
// annotation). A subPathExpr mount, or a subPath that is not a plain relative path of the volume,
// is listed refused.
SubPathPlan PlanSubPathUpdates(const kube::Pod& pod, const std::string& volume);

enum class SubPathResult {
  kUpdated,  // the new bytes were written into the bound file
  kCurrent,  // already the published bytes (or bound to the live file): nothing written
  // Nothing bound there yet: the container has not started (the kubelet binds the file at its
  // start, to the version live then). Nothing is stale and nothing failed; why says.
  kNotBound,
  kRefused,  // not a file this daemon may write (or no longer in the volume): untouched, why says
  kFailed,   // a system call failed: untouched or partly written, why says
};
const char* SubPathResultName(SubPathResult result);

// What became of one subPath mount.
struct SubPathCopy {
  std::string container;
  size_t index = 0;
  std::string sub_path;
  SubPathResult result = SubPathResult::kFailed;
  // The version whose bytes the bound file holds now ("" when unknown: refused or failed), and
  // the version dir the bound inode belongs to (from the bind's root; "" when not the kubelet's
  // bind of this volume).
  std::string version;
  std::string bound_version;
  std::string reason;  // for kNotBound, kRefused and kFailed
  // Refused because the path is no mount point: this process cannot see the kubelet's binds.
  bool binds_invisible = false;
};

// Where a copy may be held up by a test (SubPathUpdateRequest::pause_for_testing).
enum class SubPathStage {
  kViewed,  // the volume dir read, the bound file not opened yet
  kOpened,  // the bound file opened for writing, nothing decided yet
};

struct SubPathUpdateRequest {
  VolumeLocation location;
  const atomicwriter::Payload* payload = nullptr;  // the bytes the volume publishes now
  std::string version;                             // the version the write left live
  std::vector<SubPathMount> mounts;
  // Tests only: called at each stage of each mount's copy (another writer acts meanwhile).
  std::function<void(SubPathStage)> pause_for_testing;
};

// Brings each mount's bound file to the payload's bytes, as the header says. One result per
// mount, in order. Blocking: the thread pool only.
std::vector<SubPathCopy> UpdateSubPaths(atomicwriter::Env& env,
                                        const SubPathUpdateRequest& request);

// "pods/<uid>/volume-subpaths/<volume>/<container>/<index>", relative to the root dir.
std::string SubPathBindRel(const std::string& pod_uid, const std::string& volume,
                           const std::string& container, size_t index);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_DISK_SUBPATH_UPDATE_H_
