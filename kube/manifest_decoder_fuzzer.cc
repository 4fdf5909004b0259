// libFuzzer target for the manifest decoder. Besides never crashing, hanging or growing memory
// without bound, any byte string must:
//  * fail with a Status that says why (a non-empty message), or decode to objects that pass
//    validation again (the decoder validates every object it returns);
//  * decode the same way twice (a pure function of its input);
//  * decode document by document as it decodes whole (kube::SplitManifestDocuments and
//    DecodeManifestPiece): the pieces cover the input, and when every piece decodes and their
//    summed cost is within the limits, the whole decodes to their objects, in order, at that cost
//    (a reader that decodes again only the documents an edit changed relies on it); a piece
//    without its bare marker line (WithoutBareMarker) decodes as the piece does;
//  * decode the same way as YAML and as JSON: a single-document YAML stream whose document is an
//    object decodes to exactly what the JSON rendering of that object decodes to (both paths share
//    one object mapping, so any difference is a converter bug).
// Input whose first non-blank byte is '{' is one JSON value to the decoder (as to the kubelet and
// kubectl, which never read such a file as YAML): `{kind: Pod}` is refused there although YAML
// would read it. So the YAML side of that comparison is the input behind a "---" line, which the
// decoder reads as YAML; comparing the JSON reading of the bytes with their YAML reading would
// hold the decoder to a rule the API machinery does not have.
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
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

// manifest_decoder.h: a file whose first non-blank character is '{' is read as JSON.
bool ReadAsJson(std::string_view bytes) {
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && bytes[first] == '{';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kube::YamlCost cost;
  auto result = kube::DecodeManifest(bytes, "fuzz", &cost);
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

  const std::vector<std::string_view> pieces = kube::SplitManifestDocuments(bytes);
  if (!pieces.empty()) {
    std::string joined;
    for (std::string_view piece : pieces) joined += piece;
    if (joined != bytes) __builtin_trap();
    std::vector<kube::ManifestObject> objects;
    kube::YamlCost total;
    bool all_decode = true;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const bool followed = i + 1 < pieces.size();
      kube::YamlCost piece_cost;
      auto decoded = kube::DecodeManifestPiece(pieces[i], followed, "fuzz", &piece_cost);
      // The piece without its bare marker line decodes alike (a reader takes one for the other).
      const std::string_view bare = kube::WithoutBareMarker(pieces[i]);
      if (bare.size() != pieces[i].size()) {
        kube::YamlCost bare_cost;
        auto b = kube::DecodeManifestPiece(bare, followed, "fuzz", &bare_cost);
        if (decoded.ok() != b.ok()) __builtin_trap();
        if (decoded.ok() && (*decoded != *b || piece_cost.nodes != bare_cost.nodes ||
                             piece_cost.scalar_bytes != bare_cost.scalar_bytes)) {
          __builtin_trap();
        }
      }
      if (!decoded.ok()) {
        all_decode = false;
        continue;
      }
      objects.insert(objects.end(), decoded->begin(), decoded->end());
      total.nodes += piece_cost.nodes;
      total.scalar_bytes += piece_cost.scalar_bytes;
    }
    if (all_decode && total.nodes <= kube::kMaxNodes &&
        total.scalar_bytes <= kube::kMaxScalarBytes) {
      if (!result.ok() || *result != objects) __builtin_trap();
      if (cost.nodes != total.nodes || cost.scalar_bytes != total.scalar_bytes) __builtin_trap();
    }
  }

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
  base::Result<std::vector<kube::ManifestObject>> from_yaml =
      ReadAsJson(bytes) ? kube::DecodeManifest("---\n" + std::string(bytes), "fuzz")
                        : std::move(result);
  auto from_json = kube::DecodeManifest(json_text, "fuzz");
  if (from_json.ok() != from_yaml.ok()) __builtin_trap();
  if (from_json.ok() && *from_json != *from_yaml) __builtin_trap();
  return 0;
}
