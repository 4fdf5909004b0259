#include "kube/yaml_to_json.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <regex>
#include <string>
#include <utility>

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
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    if (d >= base) return false;
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

class Converter {
 public:
  json Convert(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth) {
      throw ConvertError{"nesting deeper than " + std::to_string(kMaxDepth) + " levels",
                         node.Mark()};
    }
    if (++nodes_ > kMaxNodes) {
      throw ConvertError{
          "more than " + std::to_string(kMaxNodes) + " nodes (after alias expansion)", node.Mark()};
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return nullptr;
      case YAML::NodeType::Scalar:
        return Scalar(node);
      case YAML::NodeType::Sequence: {
        json arr = json::array();
        for (const YAML::Node& item : node) arr.push_back(Convert(item, depth + 1));
        return arr;
      }
      case YAML::NodeType::Map: {
        json obj = json::object();
        json merged = json::object();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) {
            throw ConvertError{"mapping keys must be strings", kv.first.Mark()};
          }
          const std::string& key = kv.first.Scalar();
          Budget(key.size(), kv.first.Mark());
          if (key == "<<" && kv.first.Tag() == "?") {
            Merge(kv.second, depth, &merged);
            continue;
          }
          obj[key] = Convert(kv.second, depth + 1);
        }
        // Keys of the mapping itself win over merged ones.
        for (auto& [k, v] : merged.items()) {
          if (!obj.contains(k)) obj[k] = std::move(v);
        }
        return obj;
      }
    }
    return nullptr;
  }

 private:
  void Merge(const YAML::Node& value, int depth, json* merged) {
    auto merge_one = [&](const YAML::Node& m) {
      if (!m.IsMap()) throw ConvertError{"merge value must be a mapping", m.Mark()};
      json part = Convert(m, depth + 1);
      for (auto& [k, v] : part.items()) {
        if (!merged->contains(k)) (*merged)[k] = std::move(v);
      }
    };
    if (value.IsSequence()) {
      for (const YAML::Node& m : value) merge_one(m);
    } else {
      merge_one(value);
    }
  }

  void Budget(size_t bytes, const YAML::Mark& mark) {
    scalar_bytes_ += bytes;
    if (scalar_bytes_ > kMaxScalarBytes) {
      throw ConvertError{"more than " + std::to_string(kMaxScalarBytes) +
                             " bytes of scalars (after alias expansion)",
                         mark};
    }
  }

  json Scalar(const YAML::Node& node) {
    const std::string& s = node.Scalar();
    Budget(s.size(), node.Mark());
    const std::string& tag = node.Tag();
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
      throw ConvertError{"infinity and NaN have no JSON form", node.Mark()};
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

  size_t nodes_ = 0;
  size_t scalar_bytes_ = 0;
};

std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ": ";
}

}  // namespace

base::Result<std::vector<json>> YamlToJson(std::string_view yaml) {
  std::vector<json> out;
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(std::string(yaml));
    for (const YAML::Node& doc : docs) {
      if (doc.IsNull() || !doc.IsDefined()) continue;
      Converter converter;
      out.push_back(converter.Convert(doc, 0));
    }
  } catch (const ConvertError& e) {
    return base::Status::Error("invalid YAML: " + Where(e.mark) + e.message);
  } catch (const YAML::Exception& e) {
    return base::Status::Error("invalid YAML: " + Where(e.mark) + e.msg);
  } catch (const std::exception& e) {
    return base::Status::Error(std::string("invalid YAML: ") + e.what());
  }
  return out;
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
