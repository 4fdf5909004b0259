// ConfigMapPlugin ("kubernetes.io/configmap"): a configMap volume shows the keys of one
// ConfigMap of the pod's namespace (docs/kubelet-behavior.md §4.2): all keys of data then
// binaryData, or the listed items in order (later items win at the same path), each with its item
// mode or the default. A missing object is an empty volume when the source is optional; a missing
// key is skipped when optional, else `configmap references non-existent config key: <key>`. The
// logic is plugins/object_payload.h, shared with the secret and projected plugins. Medium: the
// node's disk.
#ifndef VOLUMEMANAGER_PLUGINS_CONFIGMAP_CONFIGMAP_PLUGIN_H_
#define VOLUMEMANAGER_PLUGINS_CONFIGMAP_CONFIGMAP_PLUGIN_H_

#include <vector>

#include "plugins/volume_plugin.h"

namespace plugins {

class ConfigMapPlugin : public VolumePlugin {
 public:
  static constexpr char kName[] = "kubernetes.io/configmap";

  std::string_view Name() const override { return kName; }
  Medium medium() const override { return Medium::kDisk; }
  bool Supports(const kube::Volume& volume) const override;
  std::vector<ObjectRef> ReferencedObjects(const kube::Pod& pod,
                                           const kube::Volume& volume) const override;
  bool DependsOnPod(const kube::Volume&) const override { return false; }
  base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& pod, const kube::Volume& volume,
                                                   const VolumeHost& host) const override;
};

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_CONFIGMAP_CONFIGMAP_PLUGIN_H_
