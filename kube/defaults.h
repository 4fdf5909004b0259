// API-server defaulting for objects read from manifests (standalone mode), so a volume from a
// manifest behaves exactly as the same volume created through the API (docs/design.md,
// "Standalone mode"). Objects from the API server are already defaulted; it is idempotent, so
// the API pod source applies it anyway, as a no-op on a real server's pods and a guard against a
// server that left a defaulted field out.
//
// Pod: metadata.namespace "default"; defaultMode 0644 (420) on configMap, secret, downwardAPI
// and projected volumes; fieldRef.apiVersion "v1"; serviceAccountToken expirationSeconds 3600;
// each container's requests default to its limits for resources that have no request.
// ConfigMap / Secret: metadata.namespace "default"; Secret type "Opaque".
#ifndef VOLUMEMANAGER_KUBE_DEFAULTS_H_
#define VOLUMEMANAGER_KUBE_DEFAULTS_H_

#include "kube/config_map.h"
#include "kube/pod.h"
#include "kube/secret.h"

namespace kube {

inline constexpr int32_t kDefaultVolumeMode = 0644;
inline constexpr int64_t kDefaultTokenExpirationSeconds = 3600;

void ApplyDefaults(Pod* pod);
void ApplyDefaults(ConfigMap* config_map);
void ApplyDefaults(Secret* secret);

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_DEFAULTS_H_
