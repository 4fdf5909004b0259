// Validation: the checks the API server makes on write (upstream API validation,
// docs/kubelet-behavior.md §3) for the fields the daemon uses, applied to objects
// read from manifests, which nobody else validates. Objects served by an API server passed these
// checks already; the plugins still defend themselves (the writer validates every path).
//
// Checked: object names (DNS subdomain) and namespaces (DNS label); ConfigMap and Secret keys
// ([-._a-zA-Z0-9]+, at most 253 characters, not "." or "..", not starting with ".."), a key in
// both data and binaryData, and the 1 MiB size limit; pod volumes: names (DNS label, unique),
// exactly one source per projection, object names present, item keys present, item and
// downward-API paths (relative, no ".." element, not starting with ".."), modes (0 to 0777),
// downward-API field paths, resources and divisors, duplicate explicit paths across projected
// sources, token expiry (at least 10 minutes), and volume mounts naming existing volumes.
// Beyond upstream: no name, key, UID or path that can become a file name may hold a NUL byte
// (`must not contain a NUL byte`; upstream takes one in item paths and keys, where every system
// call would cut the name at the NUL, so that "a/..\0x" became "a/..").
//
// Every failure is reported, in upstream's form, joined by "; ", after "<resource>/<name>: ":
//   pods/web-0: spec.volumes[0].configMap.items[0].path: Invalid value: "../x": must not contain
//   '..'
// Values are quoted only for names, keys and paths, never for ConfigMap or Secret data; a NUL or
// other control byte shows as \xHH (a NUL in a data key's brackets too).
#ifndef VOLUMEMANAGER_KUBE_VALIDATION_H_
#define VOLUMEMANAGER_KUBE_VALIDATION_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "kube/config_map.h"
#include "kube/pod.h"
#include "kube/secret.h"

namespace kube {

// The API's size limit on a ConfigMap's or Secret's data.
inline constexpr size_t kMaxObjectDataBytes = 1 << 20;

base::Status Validate(const Pod& pod);
base::Status Validate(const ConfigMap& config_map);
base::Status Validate(const Secret& secret);

// The building blocks, for callers with their own field paths. Each returns the failure
// messages (without the field), empty when valid.
std::vector<std::string> ValidateConfigKey(const std::string& key);
// A relative path with no ".." element that does not start with "..", and no NUL byte.
std::vector<std::string> ValidateLocalPath(const std::string& path);
// A volumeMount's subPath or subPathExpr: relative, no ".." element, no NUL (may start with "..").
std::vector<std::string> ValidateLocalDescendingPath(const std::string& path);
// A label or annotation key: an optional DNS-subdomain prefix and "/", then a name of at most 63
// alphanumerics, '-', '_' or '.', starting and ending alphanumeric (upstream IsQualifiedName).
std::vector<std::string> ValidateQualifiedName(const std::string& key);
// An object or node name: a lowercase RFC 1123 subdomain of at most 253 characters.
std::vector<std::string> ValidateSubdomainName(const std::string& name);
// A namespace's name: a lowercase RFC 1123 label of at most 63 characters.
std::vector<std::string> ValidateLabelName(const std::string& name);

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_VALIDATION_H_
