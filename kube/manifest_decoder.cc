#include "kube/manifest_decoder.h"

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kube/defaults.h"
#include "kube/object_decoder.h"
#include "kube/validation.h"
#include "kube/yaml_to_json.h"

namespace kube {
namespace {

using nlohmann::json;

bool LooksLikeJson(std::string_view bytes) {
  for (char c : bytes) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{';
  }
  return false;
}

// Decodes, defaults and validates one object of a known kind.
template <typename T>
base::Status AddObject(base::Result<T> decoded, std::vector<ManifestObject>* out) {
  if (!decoded.ok()) return decoded.status();
  T object = std::move(decoded).value();
  ApplyDefaults(&object);
  if (base::Status s = Validate(object); !s.ok()) return s;
  out->push_back(std::move(object));
  return base::Status::OK();
}

base::Status AddDocument(const json& doc, bool in_list, std::vector<ManifestObject>* out);

base::Status AddItems(const json& doc, std::vector<ManifestObject>* out, const char* item_kind) {
  auto items = doc.find("items");
  if (items == doc.end() || items->is_null()) return base::Status::OK();
  if (!items->is_array()) return base::Status::Error("items: expected array");
  for (size_t i = 0; i < items->size(); ++i) {
    json item = (*items)[i];
    // Items of typed lists carry no kind; give them their list's.
    if (item_kind != nullptr && item.is_object() && !item.contains("kind"))
      item["kind"] = item_kind;
    base::Status s = AddDocument(item, true, out);
    if (!s.ok()) return s.WithContext("items[" + std::to_string(i) + "]");
  }
  return base::Status::OK();
}

base::Status AddDocument(const json& doc, bool in_list, std::vector<ManifestObject>* out) {
  if (!doc.is_object()) return base::Status::Error("expected an object with a kind");
  auto kind_it = doc.find("kind");
  if (kind_it == doc.end() || !kind_it->is_string()) {
    return base::Status::Error("kind: Required value");
  }
  const std::string kind = kind_it->get<std::string>();
  if (kind == "Pod") return AddObject(DecodePod(doc), out);
  if (kind == "ConfigMap") return AddObject(DecodeConfigMap(doc), out);
  if (kind == "Secret") return AddObject(DecodeSecret(doc), out);
  if (!in_list) {
    if (kind == "PodList") return AddItems(doc, out, "Pod");
    if (kind == "ConfigMapList") return AddItems(doc, out, "ConfigMap");
    if (kind == "SecretList") return AddItems(doc, out, "Secret");
    if (kind == "List") return AddItems(doc, out, nullptr);
  }
  return base::Status::Error("kind: Unsupported value: \"" + kind +
                             "\": supported values: \"Pod\", \"ConfigMap\", \"Secret\" and their "
                             "lists");
}

}  // namespace

const char* KindOf(const ManifestObject& object) {
  switch (object.index()) {
    case 0:
      return "Pod";
    case 1:
      return "ConfigMap";
    default:
      return "Secret";
  }
}

const ObjectMeta& MetadataOf(const ManifestObject& object) {
  return std::visit([](const auto& o) -> const ObjectMeta& { return o.metadata; }, object);
}

base::Result<std::vector<ManifestObject>> DecodeManifest(std::string_view bytes,
                                                         std::string_view source, YamlCost* cost) {
  const std::string prefix = std::string(source) + ": ";
  std::vector<json> docs;
  if (LooksLikeJson(bytes)) {
    if (JsonNestingDepth(bytes) > kMaxDepth) {
      return base::Status::Error(prefix + "invalid JSON: nesting deeper than " +
                                 std::to_string(kMaxDepth) + " levels");
    }
    // The API server's strict decoding refuses a key given twice in one object (nlohmann, like
    // encoding/json, would keep the last): the keys of each open object, to find a repeat.
    std::vector<std::set<std::string>> keys;
    std::string duplicate;
    json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::object_start) {
        keys.emplace_back();
      } else if (event == json::parse_event_t::object_end) {
        if (!keys.empty()) keys.pop_back();
      } else if (event == json::parse_event_t::key && duplicate.empty() && !keys.empty() &&
                 parsed.is_string() && !keys.back().insert(parsed.get<std::string>()).second) {
        duplicate = parsed.get<std::string>();
      }
      return true;
    };
    json doc = json::parse(bytes, check, /*allow_exceptions=*/false);
    if (!doc.is_discarded() && !duplicate.empty()) {
      if (duplicate.size() > 64) duplicate = duplicate.substr(0, 64) + "...";
      return base::Status::Error(prefix + "invalid JSON: duplicate key \"" + duplicate + "\"");
    }
    if (doc.is_discarded()) {
      // nlohmann's own message quotes the input, which may be a Secret: report the place only.
      try {
        json ignored = json::parse(bytes);
        (void)ignored;
      } catch (const json::parse_error& e) {
        return base::Status::Error(prefix + "invalid JSON at byte " + std::to_string(e.byte));
      } catch (const std::exception&) {
      }
      return base::Status::Error(prefix + "invalid JSON");
    }
    docs.push_back(std::move(doc));
  } else {
    auto parsed = YamlToJson(bytes, cost);
    if (!parsed.ok()) return parsed.status().WithContext(source);
    docs = std::move(parsed).value();
  }

  std::vector<ManifestObject> out;
  for (size_t i = 0; i < docs.size(); ++i) {
    base::Status s = AddDocument(docs[i], false, &out);
    if (!s.ok()) {
      if (docs.size() > 1) s = s.WithContext("document " + std::to_string(i + 1));
      return s.WithContext(source);
    }
  }
  return out;
}

std::vector<std::string_view> SplitManifestDocuments(std::string_view bytes) {
  if (LooksLikeJson(bytes)) return {};
  std::vector<std::string_view> pieces;
  size_t piece = 0;  // where the current piece starts
  for (size_t line = 0; line < bytes.size();) {
    size_t end = bytes.find('\n', line);
    end = end == std::string_view::npos ? bytes.size() : end + 1;  // the next line's start
    if (bytes[line] == '%') return {};
    // "---" ended as YAML ends a marker: a space, a tab, a line break or the end of the input.
    const std::string_view rest = bytes.substr(line, end - line);
    if (line > piece && rest.substr(0, 3) == "---" &&
        (rest.size() == 3 || rest[3] == ' ' || rest[3] == '\t' || rest[3] == '\n' ||
         rest.substr(3, 2) == "\r\n")) {
      pieces.push_back(bytes.substr(piece, line - piece));
      piece = line;
    }
    line = end;
  }
  pieces.push_back(bytes.substr(piece));
  return pieces;
}

base::Result<std::vector<ManifestObject>> DecodeManifestPiece(std::string_view piece, bool followed,
                                                              std::string_view source,
                                                              YamlCost* cost) {
  if (!followed) return DecodeManifest(piece, source, cost);
  // The next piece's marker, bare: it ends what that marker ends, and starts an empty document,
  // whose one null node is not the piece's.
  std::string text(piece);
  text += "---\n";
  YamlCost with_marker;
  base::Result<std::vector<ManifestObject>> decoded = DecodeManifest(text, source, &with_marker);
  if (decoded.ok() && cost != nullptr) {
    *cost = {with_marker.nodes - (with_marker.nodes > 0 ? 1 : 0), with_marker.scalar_bytes};
  }
  return decoded;
}

std::string_view WithoutBareMarker(std::string_view piece) {
  std::string_view rest = piece;
  if (piece.substr(0, 4) == "---\n") {
    rest = piece.substr(4);
  } else if (piece.substr(0, 5) == "---\r\n") {
    rest = piece.substr(5);
  }
  // Only when the document's content starts on the next line: a marker before nothing but blank
  // lines, comments or a "..." starts an empty document (a null node to the stream's limits) where
  // the same text alone holds none; and alone, text that opens with '{' would be read as JSON.
  if (rest.size() == piece.size() || rest.empty() || rest.substr(0, 3) == "..." ||
      std::string_view(" \t\r\n#{").find(rest[0]) != std::string_view::npos) {
    return piece;
  }
  return rest;
}

}  // namespace kube
