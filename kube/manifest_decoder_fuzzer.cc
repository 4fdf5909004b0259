// libFuzzer target for the manifest decoder. Besides never crashing, hanging or growing memory
// without bound, any byte string must:
//  * fail with a Status that says why (a non-empty message), or decode to objects that pass
//    validation again (the decoder validates every object it returns);
//  * decode the same way twice (a pure function of its input);
//  * decode the same way as YAML and as JSON: a single-document YAML stream whose document is an
//    object decodes to exactly what the JSON rendering of that object decodes to (both paths share
//    one object mapping, so any difference is a converter bug).
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kube/fuzz_support.h"
#include "kube/manifest_decoder.h"
#include "kube/validation.h"
#include "kube/yaml_to_json.h"

namespace {

bool Revalidates(const kube::ManifestObject& object) {
  return std::visit([](const auto& o) { return kube::Validate(o).ok(); }, object);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto result = kube::DecodeManifest(bytes, "fuzz");
  if (!result.ok()) {
    if (result.status().message().empty()) __builtin_trap();  // errors must say why
  } else {
    for (const kube::ManifestObject& object : *result) {
      if (!Revalidates(object)) __builtin_trap();
    }
  }

  auto again = kube::DecodeManifest(bytes, "fuzz");
  if (again.ok() != result.ok()) __builtin_trap();
  if (again.ok() && *again != *result) __builtin_trap();
  if (!again.ok() && again.status().message() != result.status().message()) __builtin_trap();

  // The YAML path against the JSON path. Non-finite numbers have no JSON form, so a document
  // holding one is skipped (nlohmann would render it as null).
  auto docs = kube::YamlToJson(bytes);
  if (!docs.ok() || docs->size() != 1 || !(*docs)[0].is_object()) return 0;
  std::string json_text;
  try {
    json_text = (*docs)[0].dump();
  } catch (const std::exception&) {
    __builtin_trap();  // YamlToJson must produce values that render (valid UTF-8 strings)
  }
  if (!kube::AllFinite((*docs)[0])) return 0;
  auto from_json = kube::DecodeManifest(json_text, "fuzz");
  if (from_json.ok() != result.ok()) __builtin_trap();
  if (from_json.ok() && *from_json != *result) __builtin_trap();
  return 0;
}
