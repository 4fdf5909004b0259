// Static pods: pods read from a manifest file (--pod-manifest-path) or URL (--manifest-url)
// rather than from an API server. Decoding applies the API server's defaulting and validation
// (kube/manifest_decoder.h), then what the kubelet's applyDefaults does to such pods:
//   * metadata.name becomes "<name>-<node name in lower case>";
//   * metadata.namespace defaults to "default";
//   * spec.nodeName is set to the node, status.phase to "Pending";
//   * a pod without metadata.uid gets a deterministic one: hex MD5 over the manifest's canonical
//     JSON (the object as parsed, keys sorted, no formatting), then "host:<node>" and
//     "file:<path>" (file source) or "url:<url>" (HTTP source). The same content at the same
//     place gets the same UID across restarts; changed content gets a new UID (a new pod), as
//     with the kubelet, whose hash input is its own in-memory object dump instead;
//   * the kubernetes.io/config.hash annotation holds the UID.
// Not reproduced: the kubelet's kubernetes.io/config.seen annotation (a first-seen timestamp that
// would make downward-API annotation files differ after every restart) and its default
// NoExecute toleration (tolerations are outside the object model).
//
// Errors name the file or URL, the object and the field, and never quote a value.
// Thread-safe: pure functions.
#ifndef VOLUMEMANAGER_PODCONFIG_STATIC_POD_H_
#define VOLUMEMANAGER_PODCONFIG_STATIC_POD_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kube/pod.h"

namespace podconfig {

// One Pod from a manifest file at `path` (JSON or YAML with exactly one document of kind Pod).
base::Result<kube::Pod> DecodeStaticPodFile(std::string_view bytes, const std::string& path,
                                            const std::string& node_name);

// The pods of an HTTP manifest body: a single Pod, a PodList or a v1 List of Pods.
base::Result<std::vector<kube::Pod>> DecodeStaticPodsFromUrl(std::string_view bytes,
                                                             const std::string& url,
                                                             const std::string& node_name);

}  // namespace podconfig

#endif  // VOLUMEMANAGER_PODCONFIG_STATIC_POD_H_
