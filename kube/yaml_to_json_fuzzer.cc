// libFuzzer target for YAML to JSON. Any byte string must convert or fail with a message, never
// crash, hang or exceed the limits; and what it converts to must be sound JSON:
//  * every document renders as JSON (strings are valid UTF-8: nlohmann's dump throws otherwise,
//    and every consumer of the document renders it sooner or later);
//  * its nesting is within kMaxDepth, and JsonNestingDepth measures the rendering correctly;
//  * the rendering, read back as YAML (JSON is YAML), is the same value: quoting, escapes and the
//    scalar resolution rules survive a round trip. Non-finite floats are skipped (no JSON form).
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "kube/fuzz_support.h"
#include "kube/yaml_to_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto docs = kube::YamlToJson(bytes);
  if (!docs.ok()) {
    if (docs.status().message().empty()) __builtin_trap();
    return 0;
  }
  for (const nlohmann::json& doc : *docs) {
    std::string text;
    try {
      text = doc.dump();
    } catch (const std::exception&) {
      __builtin_trap();
    }
    const int depth = kube::NestingDepth(doc);
    if (depth > kube::kMaxDepth) __builtin_trap();
    if (kube::JsonNestingDepth(text) != depth) __builtin_trap();
    // A null document reads back as an empty one, which is skipped.
    if (doc.is_null() || !kube::AllFinite(doc)) continue;
    auto back = kube::YamlToJson(text);
    if (!back.ok() || back->size() != 1 || (*back)[0] != doc) __builtin_trap();
  }
  return 0;
}
