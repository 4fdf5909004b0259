// YAML to JSON: turns each document of a YAML stream into the JSON value Kubernetes' own decoder
// (sigs.k8s.io/yaml over go-yaml v2) would produce, so YAML and JSON manifests share one object
// mapping (object_decoder.h).
//
// Plain (unquoted) scalars resolve as go-yaml v2 resolves them: ~/null -> null; y/yes/on/true
// (and n/no/off/false, in their capitalisations) -> booleans; integers in decimal, 0x hex, 0o or
// leading-0 octal (`mode: 0644` is 420) and 0b binary, with '_' separators; floats; anything else
// is a string. Quoted scalars are strings. Merge keys (<<) are honoured. Not reproduced: go-yaml's
// conversion of plain timestamps (2024-01-01) into RFC 3339 strings; they stay as written.
//
// Limits (hostile input fails with an error, never a crash or unbounded memory): nesting deeper
// than kMaxDepth, and alias expansion beyond kMaxNodes nodes or kMaxScalarBytes bytes.
#ifndef VOLUMEMANAGER_KUBE_YAML_TO_JSON_H_
#define VOLUMEMANAGER_KUBE_YAML_TO_JSON_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kube {

inline constexpr int kMaxDepth = 512;
inline constexpr size_t kMaxNodes = 1'000'000;
inline constexpr size_t kMaxScalarBytes = 64u << 20;

// What a stream cost against the limits above, after alias expansion. The counts run over the
// whole stream, document after document (no anchor reaches into another document), so a stream's
// cost is the sum of its documents' costs.
struct YamlCost {
  size_t nodes = 0;
  size_t scalar_bytes = 0;
};

// One JSON value per document; empty documents (e.g. a trailing "---") are skipped. Errors carry
// "line L, column C" (1-based) when the parser knows them. `cost`, when given, receives the
// stream's cost (on success).
base::Result<std::vector<nlohmann::json>> YamlToJson(std::string_view yaml,
                                                     YamlCost* cost = nullptr);

// Deepest nesting of [ and { in a JSON text, ignoring brackets inside strings: a cheap guard run
// before parsing untrusted JSON.
int JsonNestingDepth(std::string_view text);

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_YAML_TO_JSON_H_
