// PayloadDigest: a SHA-256 over everything a payload puts on disk (paths, modes, owners, bytes),
// so the reconciler can tell on the loop thread that a rebuilt payload equals the one last
// written, without touching the disk. The digest reveals nothing of a Secret's bytes and is
// never logged.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_PAYLOAD_DIGEST_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_PAYLOAD_DIGEST_H_

#include <string>

#include "atomicwriter/atomic_writer.h"

namespace volumemanager {

// 32 raw bytes. Equal payloads give equal digests; the map's order makes it deterministic.
std::string PayloadDigest(const atomicwriter::Payload& payload);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_PAYLOAD_DIGEST_H_
