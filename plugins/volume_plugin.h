// VolumePlugin: turns (pod, volume, objects) into the exact payload the kubelet would write for
// one kind of volume (docs/kubelet-behavior.md §4). The volume manager asks the
// registry (plugin_registry.h) for the plugin of each pod volume, subscribes to the objects it
// references, and for a mount, or a remount whose inputs changed, calls BuildPayload on a thread
// pool thread (with a snapshot of the objects taken on the loop) and hands the result to the
// atomic writer (with OwnershipPassFor(pod, ...) as the permission callback, ownership_pass.h).
//
// A plugin never touches the network or the disk: objects come through the VolumeHost, which
// the caller fills. Plugins are stateless and const, so one instance serves every volume from
// any thread, provided the host's interfaces are safe to call from that thread.
//
// Errors are the kubelet's texts, naming the object (`configmap "app-cfg" not found`,
// `configmap references non-existent config key: k`); the caller prefixes
// `MountVolume.SetUp failed for volume "<vol>" : `. They never contain object data.
#ifndef VOLUMEMANAGER_PLUGINS_VOLUME_PLUGIN_H_
#define VOLUMEMANAGER_PLUGINS_VOLUME_PLUGIN_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "base/status.h"
#include "kube/config_map.h"
#include "kube/object_ref.h"
#include "kube/pod.h"
#include "kube/secret.h"
#include "kube/token_ref.h"

namespace plugins {

// Plugins name the objects they read with kube::ObjectRef (shared with cache/ and the manager).
using kube::ObjectKind;
using kube::ObjectRef;

// The objects a plugin may read. Implementations: the object caches (cache/), a fake in tests.
class ObjectLookup {
 public:
  virtual ~ObjectLookup() = default;
  // The object, nullptr when it does not exist (the plugin then applies `optional`), or an error
  // (not registered, sync timeout, forbidden, ...) whose message the plugin passes on unchanged.
  virtual base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& namespace_, const std::string& name) = 0;
  virtual base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& namespace_,
                                                                      const std::string& name) = 0;
};

// Service account tokens for projected serviceAccountToken sources (the TokenRequest API).
// Implementation: the volume manager's snapshot of the token manager (cache/token_manager.h).
class ServiceAccountTokenSource {
 public:
  virtual ~ServiceAccountTokenSource() = default;
  // A token for the pod's service account, bound to the pod, with the projection's audience
  // (none: the server's default audiences) and expiry (kube::TokenRefFor names it), or an error
  // naming the service account (never a token).
  virtual base::Result<std::string> GetToken(
      const kube::Pod& pod, const kube::ServiceAccountTokenProjection& projection) = 0;
};

// The files of the version a volume shows now (what its `..data` link points to), read by path.
// Beside a kubelet that owns the volumes, pod-derived files (downward API items of a projected
// volume) are carried over from there byte for byte instead of computed: the kubelet's copy of
// the pod is not the API's (it carries annotations such as kubernetes.io/config.seen, and
// resource values from the node's allocatable).
class LiveContent {
 public:
  virtual ~LiveContent() = default;
  virtual base::Result<std::string> Read(const std::string& path) = 0;
};

// What a plugin may read besides the pod. Pointers are not owned and may be null: a null
// `objects` fails configMap and secret content, a null token source fails serviceAccountToken
// sources with an error naming the source.
struct VolumeHost {
  ObjectLookup* objects = nullptr;
  // Node allocatable ("cpu", "memory", "ephemeral-storage"), from configuration: the downward
  // API's value for a container limit that is unset. Null: none configured. Shared and never
  // changed, so that a build per volume copies nothing.
  std::shared_ptr<const kube::ResourceList> node_allocatable;
  ServiceAccountTokenSource* tokens = nullptr;
  // When set, pod-derived files come from here (see LiveContent), not from the pod.
  LiveContent* pod_derived_from = nullptr;
};

// The host's node allocatable, empty when none is configured.
inline const kube::ResourceList& AllocatableOf(const VolumeHost& host) {
  static const kube::ResourceList kNone;
  return host.node_allocatable != nullptr ? *host.node_allocatable : kNone;
}

// Where the volume's bytes live: configMap on the node's disk, the others on tmpfs (§1.1).
enum class Medium { kDisk, kMemory };

class VolumePlugin {
 public:
  virtual ~VolumePlugin() = default;

  // "kubernetes.io/configmap".
  virtual std::string_view Name() const = 0;
  // "kubernetes.io~configmap": the plugin's directory under <pod>/volumes/.
  std::string EscapedName() const;
  virtual Medium medium() const = 0;

  virtual bool Supports(const kube::Volume& volume) const = 0;

  // The objects the volume's content comes from (deduplicated, in first-use order): remount the
  // volume when one of them changes. Precondition: Supports(volume).
  virtual std::vector<ObjectRef> ReferencedObjects(const kube::Pod& pod,
                                                   const kube::Volume& volume) const = 0;

  // The service account tokens the volume's content includes (deduplicated, in first-use order):
  // requested before a mount, and the volume remounted when one is renewed.
  virtual std::vector<kube::TokenRef> ReferencedTokens(const kube::Pod& pod,
                                                       const kube::Volume& volume) const {
    (void)pod;
    (void)volume;
    return {};
  }

  // Whether the content depends on the pod object itself (downward API fields): remount the
  // volume when the pod's labels, annotations or resources change.
  virtual bool DependsOnPod(const kube::Volume& volume) const = 0;

  // Why, beside a kubelet that owns the volumes, only the kubelet can produce the volume's
  // content ("" when the daemon can): a downwardAPI volume (wholly pod-derived), or a projected
  // volume with a source other than configMap, secret and downwardAPI (serviceAccountToken, as in
  // every pod's kube-api-access-*; clusterTrustBundle, podCertificate, or a kind newer than this
  // code). Such volumes are the kubelet's business there, never a failure of the daemon's.
  virtual std::string KubeletOnlyReason(const kube::Volume& volume) const {
    (void)volume;
    return "";
  }
  bool KubeletOnly(const kube::Volume& volume) const { return !KubeletOnlyReason(volume).empty(); }

  // The payload (relative path -> bytes, mode, owner). Precondition: Supports(volume).
  virtual base::Result<atomicwriter::Payload> BuildPayload(const kube::Pod& pod,
                                                           const kube::Volume& volume,
                                                           const VolumeHost& host) const = 0;
};

// "kubernetes.io/configmap" -> "kubernetes.io~configmap".
std::string EscapePluginName(std::string_view name);

// The kubelet's unique volume name: "<plugin name>/<pod uid>-<volume name>".
std::string UniqueVolumeName(const VolumePlugin& plugin, const std::string& pod_uid,
                             const std::string& volume_name);

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_VOLUME_PLUGIN_H_
