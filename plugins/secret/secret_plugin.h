// SecretPlugin ("kubernetes.io/secret"): a secret volume shows the keys of one Secret of the
// pod's namespace (docs/kubelet-behavior.md §4.3), with the configMap rules over `data` only; a
// missing key fails `references non-existent secret key: <key>` (plugins/object_payload.h, shared
// with the configMap and projected plugins). Medium: tmpfs. Values never reach a log.
#ifndef VOLUMEMANAGER_PLUGINS_SECRET_SECRET_PLUGIN_H_
#define VOLUMEMANAGER_PLUGINS_SECRET_SECRET_PLUGIN_H_

#include <vector>

#include "plugins/volume_plugin.h"

namespace plugins {

class SecretPlugin : public VolumePlugin {
 public:
  static constexpr char kName[] = "kubernetes.io/secret";

  std::string_view Name() const override { return kName; }
  Medium medium() const override { return Medium::kMemory; }
  bool Supports(const kube::Volume& volume) const override;
  std::vector<ObjectRef> ReferencedObjects(const kube::Pod& pod,
                                           const kube::Volume& volume) const override;
  bool DependsOnPod(const kube::Volume&) const override { return false; }
  base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& pod, const kube::Volume& volume,
                                                   const VolumeHost& host) const override;
};

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_SECRET_SECRET_PLUGIN_H_
