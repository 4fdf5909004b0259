// libFuzzer target for YAML to JSON. Any byte string must convert or fail with a message, never
// crash, hang or exceed the limits; and what it converts to must be sound JSON:
//  * every document renders as JSON (strings are valid UTF-8: nlohmann's dump throws otherwise,
//    and every consumer of the document renders it sooner or later);
//  * its nesting is within kMaxDepth, and JsonNestingDepth measures the rendering correctly;
//  * the rendering (in ASCII), read back as YAML (JSON is YAML), is the same value: quoting,
//    escapes and the scalar resolution rules survive a round trip. Non-finite floats are skipped
//    (no JSON form).
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "kube/fuzz_support.h"
#include "kube/yaml_to_json.h"

namespace {

// YAML text may not hold DEL, the C1 controls, U+FFFE or U+FFFF (YamlToJson refuses them, as
// go-yaml does), while a JSON rendering holds them raw inside strings: escaped here, as a JSON
// writer for YAML readers must. (All of nlohmann's ensure_ascii escapes would not do: it writes
// characters above the BMP as surrogate pairs, which YAML's \u escapes do not combine.)
std::string EscapeUnprintable(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    const auto c = static_cast<unsigned char>(json[i]);
    const auto next = [&](size_t k) {
      return i + k < json.size() ? static_cast<unsigned char>(json[i + k]) : 0;
    };
    unsigned code = 0;
    size_t len = 1;
    if (c == 0x7F) {
      code = 0x7F;
    } else if (c == 0xC2 && next(1) >= 0x80 && next(1) <= 0x9F) {
      code = next(1);
      len = 2;
    } else if (c == 0xEF && next(1) == 0xBF && (next(2) == 0xBE || next(2) == 0xBF)) {
      code = next(2) == 0xBE ? 0xFFFE : 0xFFFF;
      len = 3;
    }
    if (code == 0) {
      out += json[i];
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\u%04x", code);
    out += buf;
    i += len - 1;
  }
  return out;
}

// YAML allows an implicit (flow) mapping key of at most 1024 characters; a key whose JSON
// rendering is longer (JSON doubles every backslash) has no JSON-as-YAML form to read back.
bool HasKeyTooLongForYaml(const nlohmann::json& v) {
  if (v.is_array()) {
    for (const auto& e : v) {
      if (HasKeyTooLongForYaml(e)) return true;
    }
  }
  if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      if (nlohmann::json(key).dump().size() > 1024 || HasKeyTooLongForYaml(value)) return true;
    }
  }
  return false;
}

}  // namespace

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
    if (doc.is_null() || !kube::AllFinite(doc) || HasKeyTooLongForYaml(doc)) continue;
    auto back = kube::YamlToJson(EscapeUnprintable(text));
    if (!back.ok() || back->size() != 1 || (*back)[0] != doc) __builtin_trap();
  }
  return 0;
}
