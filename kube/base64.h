// Standard padded base64 (RFC 4648 §4), decoded as Go's base64.StdEncoding does for the API's byte
// fields (ConfigMap.binaryData, Secret.data): padding required, CR and LF ignored, any other
// character outside the alphabet is an error naming its byte offset (never the data).
#ifndef VOLUMEMANAGER_KUBE_BASE64_H_
#define VOLUMEMANAGER_KUBE_BASE64_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace kube {

// Error text: "illegal base64 data at input byte <n>".
base::Result<std::string> DecodeBase64(std::string_view encoded);

std::string EncodeBase64(std::string_view bytes);

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_BASE64_H_
