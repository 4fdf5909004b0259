// DownwardAPIPlugin ("kubernetes.io/downward-api"): a downwardAPI volume shows fields of the pod
// itself (docs/kubelet-behavior.md §4.4): metadata.name / namespace / uid as raw strings;
// metadata.labels and metadata.annotations as sorted `key="value"` lines (Go quoting, no trailing
// newline); metadata.labels['k'] / metadata.annotations['k'] as one value (empty when absent); and
// container resources (limits/requests of cpu, memory, ephemeral-storage, hugepages-*) divided
// by the divisor and rounded up, with node allocatable standing in for an unset limit.
// Item errors are collected and reported together. Medium: tmpfs.
#ifndef VOLUMEMANAGER_PLUGINS_DOWNWARDAPI_DOWNWARD_API_PLUGIN_H_
#define VOLUMEMANAGER_PLUGINS_DOWNWARDAPI_DOWNWARD_API_PLUGIN_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plugins/volume_plugin.h"

namespace plugins {

class DownwardAPIPlugin : public VolumePlugin {
 public:
  static constexpr char kName[] = "kubernetes.io/downward-api";

  std::string_view Name() const override { return kName; }
  Medium medium() const override { return Medium::kMemory; }
  bool Supports(const kube::Volume& volume) const override;
  std::vector<ObjectRef> ReferencedObjects(const kube::Pod&, const kube::Volume&) const override {
    return {};
  }
  bool DependsOnPod(const kube::Volume&) const override { return true; }
  std::string KubeletOnlyReason(const kube::Volume&) const override {
    return "downward API fields from its copy of the pod";
  }
  base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& pod, const kube::Volume& volume,
                                                   const VolumeHost& host) const override;
};

// Upstream downwardapi.CollectData; shared with the projected plugin. Paths are cleaned.
base::Result<atomicwriter::Payload> CollectDownwardAPIData(
    const std::vector<kube::DownwardAPIVolumeFile>& items, const kube::Pod& pod,
    const kube::ResourceList& node_allocatable, std::optional<int32_t> default_mode);

// The value of a fieldRef path (upstream fieldpath.ExtractFieldPathAsString, volume subset).
base::Result<std::string> ExtractFieldPath(const kube::Pod& pod, const std::string& field_path);

// `key="value"` lines, keys sorted, no trailing newline (upstream fieldpath.FormatMap).
std::string FormatMap(const std::map<std::string, std::string>& m);

// The value of a resourceFieldRef (upstream ExtractResourceValueByContainerNameAndNodeAllocatable).
base::Result<std::string> ExtractResourceValue(const kube::ResourceFieldSelector& selector,
                                               const kube::Pod& pod,
                                               const kube::ResourceList& node_allocatable);

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_DOWNWARDAPI_DOWNWARD_API_PLUGIN_H_
