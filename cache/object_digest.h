// ContentDigest: a SHA-256 over what a volume can read from one object revision (a ConfigMap's
// data and binaryData, a Secret's data: keys and bytes), so that "this volume's inputs did not
// change" is a comparison of 32 bytes instead of a rebuild of its payload. Metadata is left out:
// a label edit changes no volume. Object managers compute it once per revision, where they decode
// it (off the loop thread); the digest is never logged.
#ifndef VOLUMEMANAGER_CACHE_OBJECT_DIGEST_H_
#define VOLUMEMANAGER_CACHE_OBJECT_DIGEST_H_

#include <string>

#include "base/sha256.h"
#include "kube/config_map.h"
#include "kube/secret.h"

namespace cache {

// 32 bytes, held inline; a ConfigMap and a Secret never share one.
base::Digest ContentDigest(const kube::ConfigMap& config_map);
base::Digest ContentDigest(const kube::Secret& secret);

}  // namespace cache

#endif  // VOLUMEMANAGER_CACHE_OBJECT_DIGEST_H_
