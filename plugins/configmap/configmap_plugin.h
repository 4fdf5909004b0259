// ConfigMapPlugin ("kubernetes.io/configmap"): a configMap volume shows the keys of one
// ConfigMap of the pod's namespace (spec §4.2): all keys of data then binaryData, or the listed
// items in order (later items win at the same path), each with its item mode or the default.
// A missing object is an empty volume when the source is optional; a missing key is skipped
// when optional, else `configmap references non-existent config key: <key>`.
// Medium: the node's disk.
#ifndef VOLUMEMANAGER_PLUGINS_CONFIGMAP_CONFIGMAP_PLUGIN_H_
#define VOLUMEMANAGER_PLUGINS_CONFIGMAP_CONFIGMAP_PLUGIN_H_

#include <optional>
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
  kube::Volume ConstructVolume(const std::string& volume_name) const override {
    return {volume_name, kube::ConfigMapVolumeSource{}};
  }
  base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& pod, const kube::Volume& volume,
                                                   const VolumeHost& host) const override;
};

// The payload of `config_map` for `items` (upstream configmap.MakePayload); shared with the
// projected plugin. `default_mode` nullopt fails with the spec's text.
base::Result<atomicwriter::Payload> MakeConfigMapPayload(const std::vector<kube::KeyToPath>& items,
                                                         const kube::ConfigMap& config_map,
                                                         std::optional<int32_t> default_mode,
                                                         bool optional);

// The ConfigMap `name` of `namespace_`: an empty one when missing and `optional`; otherwise a
// missing object fails `configmap "<name>" not found`.
base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMapOrEmpty(
    const VolumeHost& host, const std::string& namespace_, const std::string& name, bool optional);

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_CONFIGMAP_CONFIGMAP_PLUGIN_H_
