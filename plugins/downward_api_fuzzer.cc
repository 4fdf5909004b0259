// libFuzzer target for the downward API's formatting: GoQuote, FormatMap, fieldRef values and
// resourceFieldRef values (quantities divided by divisors). The input builds a pod (labels,
// annotations, container resources), node allocatable and one downward API item. Whatever it is:
//  * GoQuote round-trips: Go's strconv.Unquote rules (a literal reading of them is the reference
//    here) give back the original bytes, and the quoted form is printable, valid UTF-8 with no
//    control bytes, so a label value can never inject a line into the labels file;
//  * FormatMap writes one line per label (keys without a newline), each key="quoted value";
//  * a fieldRef or resourceFieldRef value either fails with a message or is exactly the field's
//    value: metadata fields as they are, a resource as ceil(value / divisor) in the resource's
//    unit (milli-units for cpu), computed here in exact integers within float64's exact range;
//  * CollectDownwardAPIData writes the item at its cleaned path, or fails naming why.
// Built only with -DVM_FUZZ=ON (clang).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "atomicwriter/path_validation.h"
#include "kube/pod.h"
#include "kube/quantity.h"
#include "plugins/downwardapi/downward_api_plugin.h"
#include "plugins/downwardapi/go_quote.h"

namespace {

using kube::Int128;

void AppendUtf8(uint32_t r, std::string* out) {
  if (r < 0x80) {
    *out += static_cast<char>(r);
  } else if (r < 0x800) {
    *out += static_cast<char>(0xC0 | (r >> 6));
    *out += static_cast<char>(0x80 | (r & 0x3F));
  } else if (r < 0x10000) {
    *out += static_cast<char>(0xE0 | (r >> 12));
    *out += static_cast<char>(0x80 | ((r >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (r & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (r >> 18));
    *out += static_cast<char>(0x80 | ((r >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((r >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (r & 0x3F));
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Go's strconv.Unquote for a double-quoted string; false when `q` is not one.
bool GoUnquote(const std::string& q, std::string* out) {
  if (q.size() < 2 || q.front() != '"' || q.back() != '"') return false;
  out->clear();
  for (size_t i = 1; i + 1 < q.size();) {
    const char c = q[i];
    if (c == '"' || c == '\n') return false;
    if (c != '\\') {
      *out += c;
      ++i;
      continue;
    }
    if (i + 2 >= q.size()) return false;
    const char e = q[i + 1];
    i += 2;
    switch (e) {
      case 'a':
        *out += '\a';
        continue;
      case 'b':
        *out += '\b';
        continue;
      case 'f':
        *out += '\f';
        continue;
      case 'n':
        *out += '\n';
        continue;
      case 'r':
        *out += '\r';
        continue;
      case 't':
        *out += '\t';
        continue;
      case 'v':
        *out += '\v';
        continue;
      case '\\':
        *out += '\\';
        continue;
      case '"':
        *out += '"';
        continue;
      default:
        break;
    }
    const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (n == 0 || i + n >= q.size()) return false;
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      const int d = HexDigit(q[i + k]);
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    i += n;
    if (e == 'x') {
      *out += static_cast<char>(v);
    } else {
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
      AppendUtf8(v, out);
    }
  }
  return true;
}

bool ValidUtf8WithoutControls(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x20 || b == 0x7F) return false;
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

void CheckQuote(const std::string& s) {
  const std::string q = plugins::GoQuote(s);
  std::string back;
  if (!GoUnquote(q, &back) || back != s) __builtin_trap();
  if (!ValidUtf8WithoutControls(q)) __builtin_trap();
}

Int128 CeilDiv(Int128 a, Int128 b) {
  const Int128 q = a / b;
  return (a % b != 0 && ((a > 0) == (b > 0))) ? q + 1 : q;
}

const char* const kResources[] = {"cpu",           "memory",     "ephemeral-storage",
                                  "hugepages-2Mi", "hugepages-", "pods"};

std::optional<kube::Quantity> ConsumeQuantity(FuzzedDataProvider& in) {
  auto q = kube::Quantity::Parse(in.ConsumeRandomLengthString(24));
  if (!q.ok()) return std::nullopt;
  return *q;
}

void ConsumeResources(FuzzedDataProvider& in, kube::ResourceList* list) {
  const int n = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < n; ++i) {
    const char* name = in.PickValueInArray(kResources);
    if (auto q = ConsumeQuantity(in)) (*list)[name] = *q;
  }
}

kube::Quantity Lookup(const kube::ResourceList& list, const std::string& name) {
  auto it = list.find(name);
  return it == list.end() ? kube::Quantity() : it->second;
}

// The expected value of a resourceFieldRef, or nullopt when it is not computed here exactly.
std::optional<std::string> ExpectedResource(const kube::ResourceFieldSelector& sel,
                                            const kube::Container& c,
                                            const kube::ResourceList& allocatable) {
  std::string name;
  bool limit = false;
  if (sel.resource.rfind("limits.", 0) == 0) {
    name = sel.resource.substr(7);
    limit = true;
  } else if (sel.resource.rfind("requests.", 0) == 0) {
    name = sel.resource.substr(9);
  } else {
    return std::nullopt;
  }
  kube::Quantity value = Lookup(limit ? c.resources.limits : c.resources.requests, name);
  if (limit && value.IsZero() &&
      (name == "cpu" || name == "memory" || name == "ephemeral-storage")) {
    value = Lookup(allocatable, name);
  }
  kube::Quantity divisor =
      sel.divisor && !sel.divisor->IsZero() ? *sel.divisor : kube::Quantity::FromInt(1);
  const Int128 unit = name == "cpu" ? 1'000'000 : 1'000'000'000;  // nanos per (milli-)unit
  if (name != "cpu" && name != "memory" && name != "ephemeral-storage" &&
      !(name.rfind("hugepages-", 0) == 0 && name.size() > 10)) {
    return std::nullopt;
  }
  const Int128 a = CeilDiv(value.nanos(), unit);
  const Int128 b = CeilDiv(divisor.nanos(), unit);
  constexpr Int128 kExact = Int128{1} << 52;
  if (b == 0 || a >= kExact || a <= -kExact || b >= kExact || b <= -kExact) return std::nullopt;
  const Int128 q = CeilDiv(a, b);
  return std::to_string(static_cast<int64_t>(q));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kube::Pod pod;
  pod.metadata.name = in.ConsumeRandomLengthString(32);
  pod.metadata.namespace_ = in.ConsumeRandomLengthString(16);
  pod.metadata.uid = in.ConsumeRandomLengthString(16);
  for (int i = in.ConsumeIntegralInRange(0, 4); i > 0; --i) {
    std::string key = in.ConsumeRandomLengthString(16);
    pod.metadata.labels[key] = in.ConsumeRandomLengthString(64);
  }
  for (int i = in.ConsumeIntegralInRange(0, 2); i > 0; --i) {
    std::string key = in.ConsumeRandomLengthString(16);
    pod.metadata.annotations[key] = in.ConsumeRandomLengthString(64);
  }
  for (const char* name : {"c0", "c1"}) {
    kube::Container c;
    c.name = name;
    ConsumeResources(in, &c.resources.limits);
    ConsumeResources(in, &c.resources.requests);
    pod.spec.containers.push_back(std::move(c));
  }
  kube::ResourceList allocatable;
  ConsumeResources(in, &allocatable);

  kube::DownwardAPIVolumeFile item;
  item.path = in.ConsumeRandomLengthString(32);
  if (in.ConsumeBool()) {
    static const char* const kFields[] = {
        "metadata.name",        "metadata.namespace", "metadata.uid",           "metadata.labels",
        "metadata.annotations", "metadata.labels['",  "metadata.annotations['", ""};
    std::string field = in.PickValueInArray(kFields);
    field += in.ConsumeRandomLengthString(24);
    item.field_ref = kube::ObjectFieldSelector{"v1", field};
  } else {
    kube::ResourceFieldSelector sel;
    sel.container_name = in.ConsumeBool() ? "c0" : in.ConsumeRandomLengthString(4);
    sel.resource =
        std::string(in.ConsumeBool() ? "limits." : "requests.") +
        (in.ConsumeBool() ? in.PickValueInArray(kResources) : in.ConsumeRandomLengthString(16));
    if (in.ConsumeBool()) sel.divisor = ConsumeQuantity(in);
    item.resource_field_ref = sel;
  }
  CheckQuote(in.ConsumeRemainingBytesAsString());

  // Labels: one line per key, each key="value" with the value quoted.
  for (const auto& [key, value] : pod.metadata.labels) CheckQuote(value);
  const std::string labels = plugins::FormatMap(pod.metadata.labels);
  bool plain_keys = true;
  for (const auto& [key, value] : pod.metadata.labels) {
    plain_keys = plain_keys && key.find('\n') == std::string::npos;
  }
  if (plain_keys) {
    size_t lines = labels.empty() && pod.metadata.labels.empty() ? 0 : 1;
    for (char c : labels) lines += c == '\n';
    if (lines != pod.metadata.labels.size()) __builtin_trap();
  }

  if (item.field_ref) {
    auto value = plugins::ExtractFieldPath(pod, item.field_ref->field_path);
    const std::string& f = item.field_ref->field_path;
    if (!value.ok() && value.status().message().empty()) __builtin_trap();
    if (f == "metadata.name" && (!value.ok() || *value != pod.metadata.name)) __builtin_trap();
    if (f == "metadata.uid" && (!value.ok() || *value != pod.metadata.uid)) __builtin_trap();
    if (f == "metadata.labels" && (!value.ok() || *value != labels)) __builtin_trap();
  } else {
    const kube::ResourceFieldSelector& sel = *item.resource_field_ref;
    auto value = plugins::ExtractResourceValue(sel, pod, allocatable);
    if (!value.ok() && value.status().message().empty()) __builtin_trap();
    if (sel.container_name == "c0") {
      if (auto expected = ExpectedResource(sel, pod.spec.containers[0], allocatable)) {
        if (!value.ok() || *value != *expected) __builtin_trap();
      }
    }
  }

  auto payload = plugins::CollectDownwardAPIData({item}, pod, allocatable, 0644);
  if (payload.ok()) {
    if (payload->size() != 1 || !payload->count(atomicwriter::CleanPath(item.path)))
      __builtin_trap();
  } else if (payload.status().message().empty()) {
    __builtin_trap();
  }
  return 0;
}
