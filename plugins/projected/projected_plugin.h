// ProjectedPlugin ("kubernetes.io/projected"): one volume built from several sources, in list
// order, into one payload; a later source overwrites an earlier one at the same path
// (docs/kubelet-behavior.md §4.5). configMap / secret sources follow their plugins' rules with
// their own `optional` and the volume's defaultMode; downwardAPI follows §4.4. serviceAccountToken
// content comes from the host's token source (an error naming the source when there is none); the
// token file is 0600 when the pod has an fsGroup or a single effective runAsUser (that uid then
// owns it), else defaultMode. clusterTrustBundle, podCertificate and kinds newer than this code
// are the kubelet's alone (KubeletOnlyReason): built here, where the daemon owns the volume, they
// fail with an error saying so. A failing source does not stop the others; all errors are reported
// together ("[err1, err2]") and the volume fails. Medium: tmpfs.
#ifndef VOLUMEMANAGER_PLUGINS_PROJECTED_PROJECTED_PLUGIN_H_
#define VOLUMEMANAGER_PLUGINS_PROJECTED_PROJECTED_PLUGIN_H_

#include <optional>
#include <string>
#include <vector>

#include "plugins/volume_plugin.h"

namespace plugins {

class ProjectedPlugin : public VolumePlugin {
 public:
  static constexpr char kName[] = "kubernetes.io/projected";

  std::string_view Name() const override { return kName; }
  Medium medium() const override { return Medium::kMemory; }
  bool Supports(const kube::Volume& volume) const override;
  std::vector<ObjectRef> ReferencedObjects(const kube::Pod& pod,
                                           const kube::Volume& volume) const override;
  std::vector<kube::TokenRef> ReferencedTokens(const kube::Pod& pod,
                                               const kube::Volume& volume) const override;
  bool DependsOnPod(const kube::Volume& volume) const override;
  std::string KubeletOnlyReason(const kube::Volume& volume) const override;
  base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& pod, const kube::Volume& volume,
                                                   const VolumeHost& host) const override;
};

// The uid every container of the pod runs as (container runAsUser over the pod's), or nullopt
// when some container sets none or they differ (upstream fsUserFrom).
std::optional<int64_t> EffectiveRunAsUser(const kube::Pod& pod);

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_PROJECTED_PROJECTED_PLUGIN_H_
