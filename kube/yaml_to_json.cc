#include "kube/yaml_to_json.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <istream>
#include <limits>
#include <map>
#include <regex>
#include <streambuf>
#include <string>
#include <utility>

#include "base/strings.h"
#include "base/utf8.h"

namespace kube {
namespace {

using nlohmann::json;

__extension__ typedef unsigned __int128 Uint128;
__extension__ typedef __int128 Int128;

constexpr char kTagStr[] = "tag:yaml.org,2002:str";
constexpr char kTagInt[] = "tag:yaml.org,2002:int";
constexpr char kTagFloat[] = "tag:yaml.org,2002:float";
constexpr char kTagBool[] = "tag:yaml.org,2002:bool";
constexpr char kTagNull[] = "tag:yaml.org,2002:null";

struct ConvertError {
  std::string message;
  YAML::Mark mark;
};

bool OneOf(const std::string& s, std::initializer_list<const char*> options) {
  for (const char* o : options) {
    if (s == o) return true;
  }
  return false;
}

// strconv.ParseInt(s, 0, 64) after go-yaml's '_' removal: sign, then 0x / 0o / 0b / 0 prefix.
bool ParseGoInt(const std::string& s, json* out) {
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i >= s.size()) return false;
  int base = 10;
  if (s[i] == '0' && i + 1 < s.size()) {
    const char p = s[i + 1];
    if (p == 'x' || p == 'X') {
      base = 16;
      i += 2;
    } else if (p == 'o' || p == 'O') {
      base = 8;
      i += 2;
    } else if (p == 'b' || p == 'B') {
      base = 2;
      i += 2;
    } else {
      base = 8;
      i += 1;
    }
    if (i >= s.size()) return false;
  }
  Uint128 v = 0;
  for (; i < s.size(); ++i) {
    const int d = base::HexDigitValue(s[i]);
    if (d < 0 || d >= base) return false;
    v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    if (v > std::numeric_limits<uint64_t>::max()) return false;
  }
  if (negative) {
    if (v > static_cast<Uint128>(std::numeric_limits<int64_t>::max()) + 1) return false;
    *out = static_cast<int64_t>(-static_cast<Int128>(v));
  } else if (v <= static_cast<Uint128>(std::numeric_limits<int64_t>::max())) {
    *out = static_cast<int64_t>(v);
  } else {
    *out = static_cast<uint64_t>(v);
  }
  return true;
}

// A float as Go's encoding/json would write it back: integral values below 1e21 print without a
// fraction, so they decode as integers again.
json FloatValue(double d) {
  if (std::trunc(d) == d && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  return d;
}

bool ParseGoFloat(const std::string& s, json* out) {
  static const std::regex kYamlStyleFloat(
      R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (s.size() > 1000 || !std::regex_match(s, kYamlStyleFloat)) return false;
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(d)) return false;
  *out = FloatValue(d);
  return true;
}

// A key as errors show it: quoted, and cut short (a key is a name, never a value, but may be long).
std::string QuotedKey(std::string_view key) {
  constexpr size_t kShown = 64;
  std::string out = "\"";
  out += key.substr(0, kShown);
  out += key.size() > kShown ? "...\"" : "\"";
  return out;
}

// Resolves a scalar's tag and text to its JSON value, as go-yaml v2 does.
json ResolveScalar(const std::string& tag, const std::string& s, const YAML::Mark& mark) {
  if (tag == "!" || tag == kTagStr) return s;
  if (tag != "?" && tag != kTagInt && tag != kTagFloat && tag != kTagBool && tag != kTagNull) {
    return s;  // a local or unknown tag: keep the text
  }
  if (OneOf(s, {"", "~", "null", "Null", "NULL"})) return nullptr;
  if (OneOf(s, {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"})) {
    return true;
  }
  if (OneOf(s, {"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"})) {
    return false;
  }
  if (OneOf(s, {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
                ".nan", ".NaN", ".NAN"})) {
    throw ConvertError{"infinity and NaN have no JSON form", mark};
  }
  if (!s.empty() && (s[0] == '+' || s[0] == '-' || s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) {
    std::string plain;
    plain.reserve(s.size());
    for (char c : s) {
      if (c != '_') plain.push_back(c);
    }
    json v;
    if (ParseGoInt(plain, &v) || ParseGoFloat(plain, &v)) return v;
  }
  return s;
}

// Builds JSON values straight from the parser's events (no intermediate YAML::Node tree), with
// an explicit stack, so nesting and alias expansion are bounded here and not by recursion.
class JsonBuilder : public YAML::EventHandler {
 public:
  std::vector<json> TakeDocuments() { return std::move(docs_); }
  YamlCost Cost() const { return {nodes_, bytes_}; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    // yaml-cpp 0.7 loops forever on a document that starts with a token it cannot place (a
    // stray ','): it reports an empty document without consuming anything. Two documents
    // starting at the same place mean no progress.
    if (started_ && mark.pos == last_doc_pos_) throw ConvertError{"unexpected token", mark};
    started_ = true;
    last_doc_pos_ = mark.pos;
    root_ = nullptr;
  }

  void OnDocumentEnd() override {
    if (!root_.is_null()) docs_.push_back(std::move(root_));
    root_ = nullptr;
  }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (ExpectingKey()) return SetKey("null", false, mark);
    Count(1, 0, mark);
    Emit(nullptr, anchor, 1, 0, mark);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) throw ConvertError{"alias to a node that is not complete", mark};
    if (ExpectingKey()) {
      if (!it->second.value.is_string()) throw ConvertError{"mapping keys must be strings", mark};
      return SetKey(it->second.value.get<std::string>(), false, mark);
    }
    Count(it->second.nodes, it->second.bytes, mark);
    Emit(it->second.value, 0, it->second.nodes, it->second.bytes, mark);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    // go-yaml refuses text that is not UTF-8, and a JSON string must be UTF-8: reject it here
    // (yaml-cpp passes raw bytes and "\uD800" escapes through) rather than hand on a value
    // nothing can render. The value itself is never quoted: it may be a Secret's.
    if (!base::IsValidUtf8(value)) throw ConvertError{"invalid UTF-8 in a scalar", mark};
    if (ExpectingKey()) {
      Count(1, value.size(), mark);
      if (anchor != 0) anchors_[anchor] = {json(value), 1, value.size()};
      return SetKey(value, value == "<<" && tag == "?", mark);
    }
    Count(1, value.size(), mark);
    Emit(ResolveScalar(tag, value, mark), anchor, 1, value.size(), mark);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(false, anchor, mark);
  }
  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(true, anchor, mark);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    bool is_map = false;
    json value;
    bool have_key = false;
    std::string key;
    bool key_is_merge = false;
    json merged = json::object();  // merge-key entries; the map's own keys win over them
    YAML::anchor_t anchor = 0;
    size_t nodes_at_start = 0;
    size_t bytes_at_start = 0;
    YAML::Mark mark;
  };
  struct Anchored {
    json value;
    size_t nodes = 0;
    size_t bytes = 0;
  };

  bool ExpectingKey() const {
    return !stack_.empty() && stack_.back().is_map && !stack_.back().have_key;
  }

  void SetKey(std::string key, bool merge, const YAML::Mark& mark) {
    Frame& f = stack_.back();
    // The API server's strict decoding (go-yaml's UnmarshalStrict, and its JSON twin) refuses a
    // key given twice in one mapping, where a lax decoder silently keeps the last: two readers of
    // one manifest must not see two objects.
    if (!merge && f.value.contains(key)) {
      throw ConvertError{"duplicate mapping key " + QuotedKey(key), mark};
    }
    f.key = std::move(key);
    f.key_is_merge = merge;
    f.have_key = true;
  }

  void Count(size_t nodes, size_t bytes, const YAML::Mark& mark) {
    nodes_ += nodes;
    bytes_ += bytes;
    if (nodes_ > kMaxNodes) {
      throw ConvertError{
          "more than " + std::to_string(kMaxNodes) + " nodes (after alias expansion)", mark};
    }
    if (bytes_ > kMaxScalarBytes) {
      throw ConvertError{"more than " + std::to_string(kMaxScalarBytes) +
                             " bytes of scalars (after alias expansion)",
                         mark};
    }
  }

  void Open(bool is_map, YAML::anchor_t anchor, const YAML::Mark& mark) {
    if (ExpectingKey()) throw ConvertError{"mapping keys must be strings", mark};
    if (stack_.size() >= static_cast<size_t>(kMaxDepth)) {
      throw ConvertError{"nesting deeper than " + std::to_string(kMaxDepth) + " levels", mark};
    }
    Count(1, 0, mark);
    Frame f;
    f.is_map = is_map;
    f.value = is_map ? json::object() : json::array();
    f.anchor = anchor;
    f.nodes_at_start = nodes_ - 1;
    f.bytes_at_start = bytes_;
    f.mark = mark;
    stack_.push_back(std::move(f));
  }

  void Close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    if (f.is_map) {
      for (auto& [k, v] : f.merged.items()) {
        if (!f.value.contains(k)) f.value[k] = std::move(v);
      }
    }
    Emit(std::move(f.value), f.anchor, nodes_ - f.nodes_at_start, bytes_ - f.bytes_at_start,
         f.mark);
  }

  // Places a complete value into its parent (or as the document's root).
  void Emit(json value, YAML::anchor_t anchor, size_t nodes, size_t bytes, const YAML::Mark& mark) {
    if (anchor != 0) anchors_[anchor] = {value, nodes, bytes};
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    Frame& parent = stack_.back();
    if (!parent.is_map) {
      parent.value.push_back(std::move(value));
      return;
    }
    parent.have_key = false;
    if (!parent.key_is_merge) {
      parent.value[parent.key] = std::move(value);  // a repeated key was refused by SetKey
      return;
    }
    auto merge_one = [&](json& m) {
      if (!m.is_object()) throw ConvertError{"merge value must be a mapping", mark};
      for (auto& [k, v] : m.items()) {
        if (!parent.merged.contains(k)) parent.merged[k] = std::move(v);
      }
    };
    if (value.is_array()) {
      for (json& m : value) merge_one(m);
    } else {
      merge_one(value);
    }
  }

  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  std::vector<json> docs_;
  json root_;
  bool started_ = false;
  int last_doc_pos_ = 0;
  size_t nodes_ = 0;
  size_t bytes_ = 0;
};

// The parser reads the caller's bytes where they are: a manifest may be 10 MiB, and a copy of it
// would be one more large allocation per read.
class ViewStreamBuf : public std::streambuf {
 public:
  explicit ViewStreamBuf(std::string_view bytes) {
    char* begin = const_cast<char*>(bytes.data());  // read only: no put area is set
    setg(begin, begin, begin + bytes.size());
  }
};

std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ": ";
}

// go-yaml refuses a stream holding a character outside YAML's printable set: C0 controls other
// than tab, line feed and carriage return, DEL, C1 controls other than NEL (U+0085), U+FFFE and
// U+FFFF. yaml-cpp passes them through, into keys and values a real decoder never produces.
// Bytes that are not UTF-8 are left to the scalar check, which names them. Returns the error, or
// an empty string.
std::string FindControlCharacter(std::string_view yaml) {
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < yaml.size();) {
    uint32_t rune = 0;
    size_t len = base::DecodeUtf8Rune(yaml, i, &rune);
    if (len == 0) {
      len = 1;
    } else if (!(rune == 0x09 || rune == 0x0A || rune == 0x0D || (rune >= 0x20 && rune <= 0x7E) ||
                 rune == 0x85 || (rune >= 0xA0 && rune <= 0xD7FF) ||
                 (rune >= 0xE000 && rune <= 0xFFFD) || rune >= 0x10000)) {
      char code[16];
      std::snprintf(code, sizeof(code), "U+%04X", static_cast<unsigned>(rune));
      return "line " + std::to_string(line) + ", column " + std::to_string(column) +
             ": control characters are not allowed (" + code + ")";
    }
    if (rune == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += len;
  }
  return "";
}

}  // namespace

base::Result<std::vector<json>> YamlToJson(std::string_view yaml, YamlCost* cost) {
  if (std::string bad = FindControlCharacter(yaml); !bad.empty()) {
    return base::Status::Error("invalid YAML: " + bad);
  }
  JsonBuilder builder;
  try {
    ViewStreamBuf view(yaml);
    std::istream in(&view);
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(builder)) {
    }
  } catch (const ConvertError& e) {
    return base::Status::Error("invalid YAML: " + Where(e.mark) + e.message);
  } catch (const YAML::Exception& e) {
    return base::Status::Error("invalid YAML: " + Where(e.mark) + e.msg);
  } catch (const std::exception& e) {
    return base::Status::Error(std::string("invalid YAML: ") + e.what());
  }
  if (cost != nullptr) *cost = builder.Cost();
  return builder.TakeDocuments();
}

int JsonNestingDepth(std::string_view text) {
  int depth = 0;
  int max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) max_depth = depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace kube
