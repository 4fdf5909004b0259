// ManifestDecoder: turns one manifest file (JSON, or a YAML stream of one or more documents) into
// Pods, ConfigMaps and Secrets, doing on read what the API server would do on write: the
// defaulting of defaults.h and the validation of validation.h. This is standalone mode's stand-in
// for the API server; objects that came from an API server go through object_decoder.h only.
//
// Accepted documents: kind Pod, ConfigMap, Secret, their List kinds, and v1 "List" whose items
// carry their own kind. Anything else fails the file: a manifest directory holds what it should.
// A file whose first non-blank character is '{' is one JSON value (use a List for several, as the
// kubelet's static-pod reader expects); anything else is a YAML stream, one object per document.
//
// Errors name the source, the document (in a multi-document stream), the object and the field:
//   /etc/vm/pods/web.yaml: document 2: pods/web-0: spec.volumes[2].configMap.items[0].mode:
//   expected integer
// and never quote a value from the input (the input may be a Secret).
//
// Thread-safe: pure function of its input.
#ifndef VOLUMEMANAGER_KUBE_MANIFEST_DECODER_H_
#define VOLUMEMANAGER_KUBE_MANIFEST_DECODER_H_

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "kube/config_map.h"
#include "kube/pod.h"
#include "kube/secret.h"

namespace kube {

using ManifestObject = std::variant<Pod, ConfigMap, Secret>;

// "Pod", "ConfigMap" or "Secret".
const char* KindOf(const ManifestObject& object);
const ObjectMeta& MetadataOf(const ManifestObject& object);

// `source` names the input in errors (a file path, "stdin", ...).
base::Result<std::vector<ManifestObject>> DecodeManifest(std::string_view bytes,
                                                         std::string_view source);

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_MANIFEST_DECODER_H_
