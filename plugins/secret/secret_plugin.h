// SecretPlugin ("kubernetes.io/secret"): a secret volume shows the keys of one Secret of the
// pod's namespace (spec §4.3), with the configMap rules over `data` only; a missing key fails
// `references non-existent secret key: <key>`. Medium: tmpfs. Values never reach a log.
#ifndef VOLUMEMANAGER_PLUGINS_SECRET_SECRET_PLUGIN_H_
#define VOLUMEMANAGER_PLUGINS_SECRET_SECRET_PLUGIN_H_

#include <optional>
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
  kube::Volume ConstructVolume(const std::string& volume_name) const override {
    kube::SecretVolumeSource src;
    src.secret_name = volume_name;
    return {volume_name, src};
  }
  base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& pod, const kube::Volume& volume,
                                                   const VolumeHost& host) const override;
};

// Upstream secret.MakePayload; shared with the projected plugin.
base::Result<atomicwriter::Payload> MakeSecretPayload(const std::vector<kube::KeyToPath>& items,
                                                      const kube::Secret& secret,
                                                      std::optional<int32_t> default_mode,
                                                      bool optional);

// The Secret `name` of `namespace_`: an empty one when missing and `optional`; otherwise a
// missing object fails `secret "<name>" not found`.
base::Result<std::shared_ptr<const kube::Secret>> GetSecretOrEmpty(const VolumeHost& host,
                                                                   const std::string& namespace_,
                                                                   const std::string& name,
                                                                   bool optional);

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_SECRET_SECRET_PLUGIN_H_
