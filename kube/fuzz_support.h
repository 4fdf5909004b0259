// Helpers shared by the kube/ libFuzzer targets (manifest_decoder_fuzzer, yaml_to_json_fuzzer);
// not part of the library.
#ifndef VOLUMEMANAGER_KUBE_FUZZ_SUPPORT_H_
#define VOLUMEMANAGER_KUBE_FUZZ_SUPPORT_H_

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

namespace kube {

// True when no number in `value` is NaN or infinite: only then is its JSON rendering (which
// writes those as null) the same value.
inline bool AllFinite(const nlohmann::json& value) {
  std::vector<const nlohmann::json*> stack{&value};
  while (!stack.empty()) {
    const nlohmann::json* v = stack.back();
    stack.pop_back();
    if (v->is_number_float() && !std::isfinite(v->get<double>())) return false;
    if (v->is_structured()) {
      for (const auto& child : *v) stack.push_back(&child);
    }
  }
  return true;
}

// Nesting depth of [ and { in `value` (0 for a scalar), without recursion.
inline int NestingDepth(const nlohmann::json& value) {
  int deepest = 0;
  std::vector<std::pair<const nlohmann::json*, int>> stack{{&value, 0}};
  while (!stack.empty()) {
    auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const auto& child : *v) stack.push_back({&child, depth + 1});
  }
  return deepest;
}

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_FUZZ_SUPPORT_H_
