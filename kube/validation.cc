#include "kube/validation.h"

#include <cctype>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>
#include <variant>

#include "base/strings.h"

namespace kube {
namespace {

constexpr char kConfigKeyMsg[] =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
constexpr char kLabelMsg[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
constexpr char kSubdomainMsg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
constexpr char kQualifiedNameMsg[] =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
constexpr char kLabelValueMsg[] =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
constexpr size_t kMaxAnnotationBytes = 256 * 1024;
constexpr char kModeMsg[] = "must be a number between 0 and 0777 (octal), both inclusive";
// Not upstream's: the API server takes a NUL in an item path or key (the kubelet's Go then fails
// the mount with EINVAL). Every system call cuts a name at its NUL ("a/..\0x" is "a/.."), so a
// name with one is refused outright, naming the field; the value is quoted with it as \x00.
constexpr char kNulMsg[] = "must not contain a NUL byte";

bool IsAlnumLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsAlnumLower(c) || (c >= 'A' && c <= 'Z'); }

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!IsAlnumLower(s.front()) || !IsAlnumLower(s.back())) return false;
  for (char c : s) {
    if (!IsAlnumLower(c) && c != '-') return false;
  }
  return true;
}

bool IsDnsSubdomainSyntax(std::string_view s) {
  if (s.empty()) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view part = s.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (part.empty() || !IsAlnumLower(part.front()) || !IsAlnumLower(part.back())) return false;
    for (char c : part) {
      if (!IsAlnumLower(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// Quotes a name, key or path for a message, escaping as Go's %q would for the common cases.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

class Errors {
 public:
  void Required(const std::string& field) { list_.push_back(field + ": Required value"); }
  void Invalid(const std::string& field, const std::string& value, const std::string& msg) {
    list_.push_back(field + ": Invalid value: " + Quote(value) + ": " + msg);
  }
  void InvalidInt(const std::string& field, int64_t value, const std::string& msg) {
    list_.push_back(field + ": Invalid value: " + std::to_string(value) + ": " + msg);
  }
  void Add(const std::string& field, const std::string& msg) {
    list_.push_back(field + ": " + msg);
  }

  base::Status ToStatus(const std::string& object) const {
    if (list_.empty()) return base::Status::OK();
    std::string msg = object + ": ";
    for (size_t i = 0; i < list_.size(); ++i) {
      if (i > 0) msg += "; ";
      msg += list_[i];
    }
    return base::Status::Error(msg);
  }

 private:
  std::vector<std::string> list_;
};

void CheckName(const std::string& field, const std::string& name, bool subdomain, Errors* errs) {
  if (name.empty()) {
    errs->Required(field);
    return;
  }
  if (base::HasNul(name)) errs->Invalid(field, name, kNulMsg);
  if (subdomain) {
    if (name.size() > 253) errs->Invalid(field, name, "must be no more than 253 characters");
    if (!IsDnsSubdomainSyntax(name)) errs->Invalid(field, name, kSubdomainMsg);
  } else {
    if (name.size() > 63) errs->Invalid(field, name, "must be no more than 63 characters");
    if (!IsDnsLabel(name) && name.size() <= 63) errs->Invalid(field, name, kLabelMsg);
  }
}

bool IsQualifiedName(const std::string& s, std::vector<std::string>* msgs);

// A label value as apimachinery's IsValidLabelValue accepts it: empty, or at most 63 alphanumeric
// characters, '-', '_' or '.', starting and ending with an alphanumeric one.
bool IsLabelValue(std::string_view v) {
  if (v.empty()) return true;
  if (v.size() > 63 || !IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  for (char c : v) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// Labels and annotations as ValidateObjectMeta checks them: qualified-name keys (annotation keys
// case-insensitively), label values, annotations at most 256 KiB in all.
void CheckLabelsAndAnnotations(const ObjectMeta& m, Errors* errs) {
  for (const auto& [key, value] : m.labels) {
    std::vector<std::string> msgs;
    IsQualifiedName(key, &msgs);
    for (const std::string& msg : msgs) errs->Invalid("metadata.labels", key, msg);
    if (!IsLabelValue(value)) errs->Invalid("metadata.labels", value, kLabelValueMsg);
  }
  size_t total = 0;
  for (const auto& [key, value] : m.annotations) {
    std::string lower = key;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::vector<std::string> msgs;
    IsQualifiedName(lower, &msgs);
    for (const std::string& msg : msgs) errs->Invalid("metadata.annotations", key, msg);
    total += key.size() + value.size();
  }
  if (total > kMaxAnnotationBytes) {
    errs->Add("metadata.annotations",
              "Too long: must have at most " + std::to_string(kMaxAnnotationBytes) + " bytes");
  }
}

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF),
// as a JSON string from the API server always is.
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

void CheckMeta(const ObjectMeta& m, Errors* errs) {
  CheckName("metadata.name", m.name, true, errs);
  if (!m.namespace_.empty()) CheckName("metadata.namespace", m.namespace_, false, errs);
  CheckLabelsAndAnnotations(m, errs);
}

void CheckMode(const std::string& field, const std::optional<int32_t>& mode, Errors* errs) {
  if (mode && (*mode < 0 || *mode > 0777)) errs->InvalidInt(field, *mode, kModeMsg);
}

void CheckPath(const std::string& field, const std::string& path, Errors* errs) {
  if (path.empty()) {
    errs->Required(field);
    return;
  }
  for (const std::string& msg : ValidateLocalPath(path)) errs->Invalid(field, path, msg);
}

void CheckItems(const std::string& field, const std::vector<KeyToPath>& items, Errors* errs,
                std::set<std::string>* paths) {
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (items[i].key.empty()) errs->Required(f + ".key");
    // Only looked up, never a file name, but one with a NUL can match no valid data key (and
    // would be logged cut): refused with its field, as a path is.
    if (base::HasNul(items[i].key)) errs->Invalid(f + ".key", items[i].key, kNulMsg);
    CheckPath(f + ".path", items[i].path, errs);
    CheckMode(f + ".mode", items[i].mode, errs);
    if (paths && !items[i].path.empty() && !paths->insert(items[i].path).second) {
      errs->Invalid(f + ".path", items[i].path, "conflicting duplicate paths");
    }
  }
}

bool IsQualifiedName(const std::string& s, std::vector<std::string>* msgs) {
  std::string_view name = s;
  const size_t slash = s.find('/');
  if (slash != std::string::npos) {
    std::string_view prefix = name.substr(0, slash);
    name = name.substr(slash + 1);
    if (prefix.empty()) {
      msgs->push_back("prefix part must be non-empty");
    } else if (prefix.size() > 253 || !IsDnsSubdomainSyntax(prefix)) {
      // Literal + string, not string + literal: g++ 12 reports a false -Warray-bounds for the
      // latter here, depending on what it inlines.
      msgs->push_back("prefix part " + std::string(kSubdomainMsg));
    }
  }
  if (name.empty()) {
    msgs->push_back("name part must be non-empty");
  } else {
    if (name.size() > 63) msgs->push_back("name part must be no more than 63 characters");
    bool ok = IsAlnum(name.front()) && IsAlnum(name.back());
    for (char c : name) ok = ok && (IsAlnum(c) || c == '-' || c == '_' || c == '.');
    if (!ok) msgs->push_back(kQualifiedNameMsg);
  }
  return msgs->empty();
}

void CheckFieldRef(const std::string& field, const ObjectFieldSelector& ref, Errors* errs) {
  if (ref.api_version.empty()) {
    errs->Required(field + ".apiVersion");
  } else if (ref.api_version != "v1") {
    errs->Add(field + ".apiVersion",
              "Unsupported value: " + Quote(ref.api_version) + ": supported values: \"v1\"");
  }
  const std::string& p = ref.field_path;
  const std::string f = field + ".fieldPath";
  if (p.empty()) {
    errs->Required(f);
    return;
  }
  static const std::set<std::string> kPlain = {"metadata.name", "metadata.namespace",
                                               "metadata.uid", "metadata.labels",
                                               "metadata.annotations"};
  if (kPlain.count(p)) return;
  for (const char* base : {"metadata.labels", "metadata.annotations"}) {
    const std::string open = std::string(base) + "['";
    if (p.size() > open.size() + 2 && p.compare(0, open.size(), open) == 0 &&
        p.compare(p.size() - 2, 2, "']") == 0) {
      std::string key = p.substr(open.size(), p.size() - open.size() - 2);
      if (std::string_view(base) == "metadata.annotations") {
        for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      std::vector<std::string> msgs;
      if (!IsQualifiedName(key, &msgs)) {
        for (const std::string& m : msgs) errs->Invalid(f, p, m);
      }
      return;
    }
  }
  errs->Add(f, "Unsupported value: " + Quote(p) +
                   ": supported values: \"metadata.annotations\", \"metadata.labels\", "
                   "\"metadata.name\", \"metadata.namespace\", \"metadata.uid\"");
}

bool IsHugePages(const std::string& resource) {
  return resource.rfind("hugepages-", 0) == 0 && resource.size() > 10;
}

void CheckResourceFieldRef(const std::string& field, const ResourceFieldSelector& ref,
                           Errors* errs) {
  if (ref.container_name.empty()) errs->Required(field + ".containerName");
  const std::string& r = ref.resource;
  if (r.empty()) {
    errs->Required(field + ".resource");
    return;
  }
  std::string name;
  if (r.rfind("limits.", 0) == 0) {
    name = r.substr(7);
  } else if (r.rfind("requests.", 0) == 0) {
    name = r.substr(9);
  }
  const bool cpu = name == "cpu";
  if (!cpu && name != "memory" && name != "ephemeral-storage" && !IsHugePages(name)) {
    errs->Add(field + ".resource",
              "Unsupported value: " + Quote(r) +
                  ": supported values: \"limits.cpu\", \"limits.ephemeral-storage\", "
                  "\"limits.memory\", \"requests.cpu\", \"requests.ephemeral-storage\", "
                  "\"requests.memory\"");
    return;
  }
  if (!ref.divisor || ref.divisor->IsZero()) return;
  static const char* kCpuDivisors[] = {"1m", "1"};
  static const char* kByteDivisors[] = {"1",   "1k",  "1M",  "1G",  "1T",  "1P", "1E",
                                        "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"};
  bool ok = false;
  if (cpu) {
    for (const char* d : kCpuDivisors) ok = ok || *Quantity::Parse(d) == *ref.divisor;
  } else {
    for (const char* d : kByteDivisors) ok = ok || *Quantity::Parse(d) == *ref.divisor;
  }
  if (!ok) {
    errs->Invalid(field + ".divisor", ref.divisor->text(),
                  cpu ? "only divisor's values 1m and 1 are supported with the cpu resource"
                      : "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, "
                        "1Pi, 1Ei are supported with the local ephemeral storage and memory "
                        "resources");
  }
}

void CheckDownwardAPIItems(const std::string& field,
                           const std::vector<DownwardAPIVolumeFile>& items, Errors* errs,
                           std::set<std::string>* paths) {
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    const DownwardAPIVolumeFile& item = items[i];
    CheckPath(f + ".path", item.path, errs);
    CheckMode(f + ".mode", item.mode, errs);
    if (item.field_ref && item.resource_field_ref) {
      errs->Add(f,
                "Invalid value: \"resource\": fieldRef and resourceFieldRef can not be "
                "specified simultaneously");
    } else if (item.field_ref) {
      CheckFieldRef(f + ".fieldRef", *item.field_ref, errs);
    } else if (item.resource_field_ref) {
      CheckResourceFieldRef(f + ".resourceFieldRef", *item.resource_field_ref, errs);
    } else {
      errs->Add(f, "Required value: one of fieldRef and resourceFieldRef is required");
    }
    if (paths && !item.path.empty() && !paths->insert(item.path).second) {
      errs->Invalid(f + ".path", item.path, "conflicting duplicate paths");
    }
  }
}

void CheckProjected(const std::string& field, const ProjectedVolumeSource& p, Errors* errs) {
  CheckMode(field + ".defaultMode", p.default_mode, errs);
  std::set<std::string> paths;  // explicit paths across all sources
  for (size_t i = 0; i < p.sources.size(); ++i) {
    const std::string f = field + ".sources[" + std::to_string(i) + "]";
    const VolumeProjection& s = p.sources[i];
    if (s.config_map) {
      if (s.config_map->name.empty()) errs->Required(f + ".configMap.name");
      CheckItems(f + ".configMap.items", s.config_map->items, errs, &paths);
    } else if (s.secret) {
      if (s.secret->name.empty()) errs->Required(f + ".secret.name");
      CheckItems(f + ".secret.items", s.secret->items, errs, &paths);
    } else if (s.downward_api) {
      CheckDownwardAPIItems(f + ".downwardAPI.items", s.downward_api->items, errs, &paths);
    } else if (s.service_account_token) {
      const auto& t = *s.service_account_token;
      CheckPath(f + ".serviceAccountToken.path", t.path, errs);
      if (t.expiration_seconds && *t.expiration_seconds < 600) {
        errs->Add(f + ".serviceAccountToken.expirationSeconds",
                  "Invalid value: " + std::to_string(*t.expiration_seconds) +
                      ": may not specify a duration less than 10 minutes");
      } else if (t.expiration_seconds && *t.expiration_seconds > (int64_t{1} << 32)) {
        errs->Add(f + ".serviceAccountToken.expirationSeconds",
                  "Invalid value: " + std::to_string(*t.expiration_seconds) +
                      ": may not specify a duration larger than 2^32 seconds");
      }
      if (!t.path.empty() && !paths.insert(t.path).second) {
        errs->Invalid(f + ".serviceAccountToken.path", t.path, "conflicting duplicate paths");
      }
    } else if (s.cluster_trust_bundle) {
      const auto& b = *s.cluster_trust_bundle;
      CheckPath(f + ".clusterTrustBundle.path", b.path, errs);
      if (b.name && b.signer_name) {
        errs->Add(f + ".clusterTrustBundle",
                  "Invalid value: \"\": only one of name and signerName may be set");
      } else if (!b.name && !b.signer_name) {
        errs->Add(f + ".clusterTrustBundle",
                  "Required value: either name or signerName must be set");
      }
      if (!b.path.empty() && !paths.insert(b.path).second) {
        errs->Invalid(f + ".clusterTrustBundle.path", b.path, "conflicting duplicate paths");
      }
    } else if (s.unsupported_kind.empty()) {
      errs->Add(f, "Required value: must specify exactly one projection source");
    }
  }
}

void CheckVolume(const std::string& field, const Volume& v, Errors* errs) {
  if (const auto* cm = std::get_if<ConfigMapVolumeSource>(&v.source)) {
    if (cm->name.empty()) errs->Required(field + ".configMap.name");
    CheckMode(field + ".configMap.defaultMode", cm->default_mode, errs);
    CheckItems(field + ".configMap.items", cm->items, errs, nullptr);
  } else if (const auto* s = std::get_if<SecretVolumeSource>(&v.source)) {
    if (s->secret_name.empty()) errs->Required(field + ".secret.secretName");
    CheckMode(field + ".secret.defaultMode", s->default_mode, errs);
    CheckItems(field + ".secret.items", s->items, errs, nullptr);
  } else if (const auto* d = std::get_if<DownwardAPIVolumeSource>(&v.source)) {
    CheckMode(field + ".downwardAPI.defaultMode", d->default_mode, errs);
    CheckDownwardAPIItems(field + ".downwardAPI.items", d->items, errs, nullptr);
  } else if (const auto* p = std::get_if<ProjectedVolumeSource>(&v.source)) {
    CheckProjected(field + ".projected", *p, errs);
  }
}

void CheckContainers(const std::string& field, const std::vector<Container>& containers,
                     const std::set<std::string>& volumes, Errors* errs) {
  for (size_t i = 0; i < containers.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (containers[i].name.empty()) errs->Required(f + ".name");
    const auto& mounts = containers[i].volume_mounts;
    for (size_t m = 0; m < mounts.size(); ++m) {
      const std::string mf = f + ".volumeMounts[" + std::to_string(m) + "]";
      if (mounts[m].name.empty()) {
        errs->Required(mf + ".name");
      } else if (!volumes.count(mounts[m].name)) {
        errs->Add(mf + ".name", "Not found: " + Quote(mounts[m].name));
      }
      if (mounts[m].mount_path.empty()) errs->Required(mf + ".mountPath");
      // Upstream's validateLocalDescendingPath: relative, no ".." element, no NUL ("..data/x"
      // is allowed, unlike an item's path).
      for (const auto& [name, value] :
           {std::pair<const char*, const std::string&>{".subPath", mounts[m].sub_path},
            {".subPathExpr", mounts[m].sub_path_expr}}) {
        for (const std::string& msg : ValidateLocalDescendingPath(value)) {
          errs->Invalid(mf + name, value, msg);
        }
      }
      if (!mounts[m].sub_path.empty() && !mounts[m].sub_path_expr.empty()) {
        errs->Invalid(mf + ".subPathExpr", mounts[m].sub_path_expr,
                      "subPathExpr and subPath are mutually exclusive");
      }
    }
  }
}

void CheckData(const std::map<std::string, std::string>& data, const char* field, size_t* total,
               Errors* errs) {
  for (const auto& [key, value] : data) {
    // The key inside the field's brackets is shown with any NUL escaped, as in the value.
    const std::string f = std::string(field) + "[" + base::ShowNul(key) + "]";
    for (const std::string& msg : ValidateConfigKey(key)) errs->Invalid(f, key, msg);
    *total += value.size();
  }
}

}  // namespace

std::vector<std::string> ValidateConfigKey(const std::string& key) {
  std::vector<std::string> msgs;
  if (base::HasNul(key)) msgs.push_back(kNulMsg);
  if (key.size() > 253) msgs.push_back("must be no more than 253 characters");
  bool chars_ok = !key.empty();
  for (char c : key) chars_ok = chars_ok && (IsAlnum(c) || c == '-' || c == '_' || c == '.');
  if (!chars_ok) msgs.push_back(kConfigKeyMsg);
  if (key == ".") {
    msgs.push_back("must not be '.'");
  } else if (key == "..") {
    msgs.push_back("must not be '..'");
  } else if (key.rfind("..", 0) == 0) {
    msgs.push_back("must not start with '..'");
  }
  return msgs;
}

std::vector<std::string> ValidateQualifiedName(const std::string& key) {
  std::vector<std::string> msgs;
  IsQualifiedName(key, &msgs);
  return msgs;
}

std::vector<std::string> ValidateSubdomainName(const std::string& name) {
  std::vector<std::string> msgs;
  if (name.size() > 253) msgs.push_back("must be no more than 253 characters");
  if (!IsDnsSubdomainSyntax(name)) msgs.push_back(kSubdomainMsg);
  return msgs;
}

std::vector<std::string> ValidateLabelName(const std::string& name) {
  std::vector<std::string> msgs;
  if (name.size() > 63) msgs.push_back("must be no more than 63 characters");
  if (!IsDnsLabel(name) && name.size() <= 63) msgs.push_back(kLabelMsg);
  return msgs;
}

std::vector<std::string> ValidateLocalDescendingPath(const std::string& path) {
  std::vector<std::string> msgs;
  if (base::HasNul(path)) msgs.push_back(kNulMsg);
  if (!path.empty() && path[0] == '/') msgs.push_back("must be a relative path");
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (slash - start == 2 && path.compare(start, 2, "..") == 0) {
      msgs.push_back("must not contain '..'");
      break;
    }
    start = slash + 1;
  }
  return msgs;
}

std::vector<std::string> ValidateLocalPath(const std::string& path) {
  std::vector<std::string> msgs = ValidateLocalDescendingPath(path);
  if (path.rfind("..", 0) == 0) msgs.push_back("must not start with '..'");
  return msgs;
}

base::Status Validate(const Pod& pod) {
  Errors errs;
  CheckMeta(pod.metadata, &errs);
  // The UID names the pod's dir under the root dir (upstream leaves its form to the server).
  if (base::HasNul(pod.metadata.uid)) errs.Invalid("metadata.uid", pod.metadata.uid, kNulMsg);
  std::set<std::string> names;
  for (size_t i = 0; i < pod.spec.volumes.size(); ++i) {
    const std::string f = "spec.volumes[" + std::to_string(i) + "]";
    const Volume& v = pod.spec.volumes[i];
    CheckName(f + ".name", v.name, false, &errs);
    if (!v.name.empty() && !names.insert(v.name).second) {
      errs.Add(f + ".name", "Duplicate value: " + Quote(v.name));
    }
    CheckVolume(f, v, &errs);
  }
  CheckContainers("spec.initContainers", pod.spec.init_containers, names, &errs);
  CheckContainers("spec.containers", pod.spec.containers, names, &errs);
  return errs.ToStatus("pods/" + pod.metadata.name);
}

base::Status Validate(const ConfigMap& config_map) {
  Errors errs;
  CheckMeta(config_map.metadata, &errs);
  size_t total = 0;
  CheckData(config_map.data, "data", &total, &errs);
  CheckData(config_map.binary_data, "binaryData", &total, &errs);
  for (const auto& [key, value] : config_map.data) {
    if (!IsUtf8(value)) {
      errs.Add("data[" + base::ShowNul(key) + "]",
               "Invalid value: must be valid UTF-8 (binaryData holds bytes)");
    }
    if (config_map.binary_data.count(key)) {
      errs.Invalid("data[" + base::ShowNul(key) + "]", key,
                   "duplicate of key present in binaryData");
    }
  }
  if (total > kMaxObjectDataBytes) {
    errs.Add("data",
             "Too long: must have at most " + std::to_string(kMaxObjectDataBytes) + " bytes");
  }
  return errs.ToStatus("configmaps/" + config_map.metadata.name);
}

base::Status Validate(const Secret& secret) {
  Errors errs;
  CheckMeta(secret.metadata, &errs);
  size_t total = 0;
  CheckData(secret.data, "data", &total, &errs);
  if (total > kMaxObjectDataBytes) {
    errs.Add("data",
             "Too long: must have at most " + std::to_string(kMaxObjectDataBytes) + " bytes");
  }
  return errs.ToStatus("secrets/" + secret.metadata.name);
}

}  // namespace kube
