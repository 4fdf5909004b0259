// PodUpdate: one step of the ordered stream of pod changes that PodConfig (pod_config.h) emits
// from the merged pod sources, as the kubelet's podConfig does in incremental mode.
//
// Every pod in an update carries the `kubernetes.io/config.source` annotation naming its source.
// Pods are immutable and shared (`PodPtr`): the source that decoded a pod, PodConfig, the updates
// and the desired state hold one object between them.
#ifndef VOLUMEMANAGER_PODCONFIG_POD_UPDATE_H_
#define VOLUMEMANAGER_PODCONFIG_POD_UPDATE_H_

#include <memory>
#include <string>
#include <vector>

#include "kube/pod.h"

namespace podconfig {

enum class PodOp {
  kAdd,        // pods new to their source (or a source's first, possibly empty, delivery)
  kUpdate,     // spec, labels, annotations or deletion grace changed
  kDelete,     // changed with metadata.deletionTimestamp set: marked for deletion, still there;
               // graceful only with deletionGracePeriodSeconds > 0 (at 0 the object goes at once)
  kRemove,     // gone from their source
  kReconcile,  // status-only change
};

// "ADD", "UPDATE", "DELETE", "REMOVE", "RECONCILE": for logs.
const char* PodOpName(PodOp op);

using PodPtr = std::shared_ptr<const kube::Pod>;

struct PodUpdate {
  PodOp op = PodOp::kAdd;
  std::vector<PodPtr> pods;
  std::string source;  // kFileSource, kHttpSource or kApiSource
};

// Source names, as the kubelet spells them (they end up in the config.source annotation).
inline constexpr char kFileSource[] = "file";
inline constexpr char kHttpSource[] = "http";
inline constexpr char kApiSource[] = "api";

// Annotations the kubelet adds to the pods it receives (kubetypes.ConfigSourceAnnotationKey,
// ConfigHashAnnotationKey). They are part of the pod as the downward API shows it.
inline constexpr char kConfigSourceAnnotation[] = "kubernetes.io/config.source";
inline constexpr char kConfigHashAnnotation[] = "kubernetes.io/config.hash";

}  // namespace podconfig

#endif  // VOLUMEMANAGER_PODCONFIG_POD_UPDATE_H_
