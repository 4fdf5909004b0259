// Md5Hex: the MD5 digest of some bytes as 32 lowercase hex digits (RFC 1321), for the identities
// the kubelet derives with MD5 (a static pod's UID). Not for anything that needs collision
// resistance. No library: the daemon need not load a crypto library for it. Safe on any thread.
#ifndef VOLUMEMANAGER_BASE_MD5_H_
#define VOLUMEMANAGER_BASE_MD5_H_

#include <string>
#include <string_view>

namespace base {

std::string Md5Hex(std::string_view bytes);

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_MD5_H_
