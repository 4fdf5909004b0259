// WriteOperation: one write of one volume (a mount, a remount, beside the kubelet a refresh), as
// the reconciler hands it to the thread pool and gets it back.
//
// On the loop thread the reconciler takes the snapshot of the volume's objects and tokens (shared
// immutable revisions) and fills the operation's inputs; nothing changes them afterwards. On a
// pool thread RunWrite checks the kubelet's set-up when the volume waits for it, builds the payload
// from the snapshot (never from the loop's object caches), writes it through the VolumeDisk,
// brings the pod's subPath files of the volume to the bytes it now shows, and fills the outcome.
// Back on the loop the reconciler reads the outcome and records it; LogWriteDone says what the
// write did, once.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_WRITE_OPERATION_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_WRITE_OPERATION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "base/status.h"
#include "kube/pod.h"
#include "logging/structured_log.h"
#include "plugins/volume_plugin.h"
#include "volumemanager/disk/subpath_update.h"
#include "volumemanager/disk/volume_disk.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/state/desired_state_of_world.h"
#include "volumemanager/state/volume_inputs.h"

namespace volumemanager {

struct WriteOperation {
  // --- inputs, set on the loop before the operation runs ---
  // The write's request; its payload is filled (and cleared again) on the pool.
  SetUpRequest request;
  // The volume's record of unpublished versions (request.ledger points into it): kept alive here.
  std::shared_ptr<atomicwriter::UnpublishedLedger> ledger;
  ObjectSnapshot objects;
  // The tokens as they were when the write started; `with_tokens` false without a token manager
  // (a serviceAccountToken source then fails naming itself).
  TokenSnapshot tokens;
  bool with_tokens = false;
  std::shared_ptr<const kube::Pod> pod;
  const kube::Volume* spec = nullptr;  // inside *pod
  const plugins::VolumePlugin* plugin = nullptr;
  std::shared_ptr<const kube::ResourceList> node_allocatable;
  // Beside the kubelet: the write looks at the kubelet's set-up first, and pod-derived files
  // come from the live version.
  bool waits_for_set_up = false;
  bool carries_pod_derived_over = false;
  // The pod's subPath mounts of the volume it asks to keep current (null without the annotation).
  std::shared_ptr<const SubPathPlan> subpaths;

  // --- outcome, set on the pool, read on the loop once the operation completed ---
  base::Result<atomicwriter::WriteResult> result = base::Status::Error("not run");
  // The kubelet has not set the volume up (or tore it down): nothing written, and no failure.
  bool not_set_up = false;
  // The tmpfs pages of the payload written, when the volume is on a tmpfs (WriteResult::on_tmpfs).
  uint64_t tmpfs_bytes = 0;
  // What became of the subPath mounts (one per mount of `subpaths`).
  std::vector<SubPathCopy> copies;
};

// The pool side of a write: fills `op`'s outcome; the status is the operation's.
base::Status RunWrite(WriteOperation& op, VolumeDisk& disk);

// What a finished write says in the log (one line, never object data).
struct WriteReport {
  logging::Value pod = logging::Value::Absent();
  std::string pod_uid;
  std::string volume;
  std::string objects;  // the objects' versions read ("configmap/ns/name@rv,...")
  std::string version;  // the version dir live after the write
  bool published = false;
  bool first_mount = false;
  bool kubelet_owned = false;
  bool observe = false;
  bool recovered = false;                // its last attempt had failed
  bool tokens_only = false;              // only its tokens changed (a renewal)
  std::chrono::milliseconds latency{0};  // from the change it serves to the end of the write
  std::string writer;
};
void LogWriteDone(const WriteReport& report);
// A failed write of a desired volume, as the kubelet's FailedMount: pod, volume, unique name, the
// object(s) it reads, the error, and when it is retried (`retry_in`, its backoff, from `now`).
void LogWriteFailed(const VolumeKey& key, const DesiredVolume& desired, const std::string& error,
                    std::chrono::milliseconds retry_in, std::chrono::system_clock::time_point now);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_WRITE_OPERATION_H_
