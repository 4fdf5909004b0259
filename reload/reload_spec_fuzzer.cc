// libFuzzer target: the reload annotations as a pod creator may write them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "reload/reload_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Three annotations from one input, split at the first two NUL bytes.
  const size_t a = text.find('\0');
  const size_t b = a == std::string::npos ? std::string::npos : text.find('\0', a + 1);
  std::map<std::string, std::string> annotations;
  annotations[reload::kReloadAnnotation] = text.substr(0, a);
  if (a != std::string::npos) {
    annotations[reload::kReloadVolumesAnnotation] = text.substr(a + 1, b - a - 1);
  }
  if (b != std::string::npos) annotations[reload::kReloadDelayAnnotation] = text.substr(b + 1);
  auto spec = reload::ParseReloadAnnotations(annotations);
  if (spec.ok() && spec->has_value()) {
    for (const reload::Action& action : (*spec)->actions) {
      // What is accepted re-parses to itself, and never carries a line break into a request.
      const std::string shown = action.Text();
      if (shown.find_first_of("\r\n") != std::string::npos) __builtin_trap();
      auto again = reload::ParseAction(shown);
      if (!again.ok() || !(*again == action)) __builtin_trap();
    }
  }
  return 0;
}
