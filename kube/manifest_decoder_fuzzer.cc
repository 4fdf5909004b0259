// libFuzzer entry point for the manifest decoder: any byte string must decode or fail with a
// Status, never crash, hang or grow memory without bound. Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kube/manifest_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto result =
      kube::DecodeManifest(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!result.ok() && result.status().message().empty()) __builtin_trap();  // errors must say why
  return 0;
}
