// Decoding of API objects from their JSON value: the one mapping shared by API responses (JSON)
// and manifests (YAML documents are first converted to JSON values, see yaml_to_json.h).
//
// Rules, as Go's encoding/json into the core/v1 types: unknown fields are ignored; absent and
// null mean the same; a field of the wrong JSON type is an error; byte fields (binaryData,
// Secret data) are standard base64; a Secret's stringData is merged into data (stringData wins).
// No defaulting and no validation happen here (see manifest_decoder.h for manifests).
//
// Errors name the object and the field:
//   pods/web-0: spec.volumes[2].configMap.items[0].mode: expected integer
// and never quote a value (a Secret's bytes must not reach a log).
#ifndef VOLUMEMANAGER_KUBE_OBJECT_DECODER_H_
#define VOLUMEMANAGER_KUBE_OBJECT_DECODER_H_

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "kube/config_map.h"
#include "kube/pod.h"
#include "kube/secret.h"

namespace kube {

// Each accepts the object with or without "kind"/"apiVersion" (list items carry neither); when
// present they must be "v1" and the expected kind.
base::Result<Pod> DecodePod(const nlohmann::json& j);
base::Result<ConfigMap> DecodeConfigMap(const nlohmann::json& j);
base::Result<Secret> DecodeSecret(const nlohmann::json& j);
base::Result<PodList> DecodePodList(const nlohmann::json& j);
base::Result<ConfigMapList> DecodeConfigMapList(const nlohmann::json& j);
base::Result<SecretList> DecodeSecretList(const nlohmann::json& j);

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_OBJECT_DECODER_H_
