#include "plugins/downwardapi/downward_api_plugin.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <variant>

#include "atomicwriter/path_validation.h"
#include "base/strings.h"
#include "kube/validation.h"
#include "plugins/aggregate_error.h"
#include "plugins/downwardapi/go_quote.h"

namespace plugins {
namespace {

// ("metadata.labels", "k", true) for "metadata.labels['k']" (upstream SplitMaybeSubscriptedPath).
bool SplitSubscript(const std::string& field_path, std::string* path, std::string* subscript) {
  if (field_path.size() < 2 || field_path.compare(field_path.size() - 2, 2, "']") != 0) {
    return false;
  }
  const std::string s = field_path.substr(0, field_path.size() - 2);
  const size_t open = s.find("['");
  if (open == std::string::npos || open == 0) return false;
  *path = s.substr(0, open);
  *subscript = s.substr(open + 2);
  return true;
}

const kube::Container* FindContainer(const kube::Pod& pod, const std::string& name) {
  for (const kube::Container& c : pod.spec.containers) {
    if (c.name == name) return &c;
  }
  for (const kube::Container& c : pod.spec.init_containers) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// int64(math.Ceil(a / b)) as Go computes it in float64; saturates where Go's conversion would
// be undefined.
int64_t CeilDivide(int64_t a, int64_t b) {
  const double q = std::ceil(static_cast<double>(a) / static_cast<double>(b));
  if (std::isnan(q)) return 0;
  if (q >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (q <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(q);
}

kube::Quantity Lookup(const kube::ResourceList& list, const std::string& name) {
  auto it = list.find(name);
  return it == list.end() ? kube::Quantity() : it->second;
}

}  // namespace

std::string FormatMap(const std::map<std::string, std::string>& m) {
  std::string out;
  for (const auto& [key, value] : m) {  // std::map iterates in sorted key order
    if (!out.empty()) out += '\n';
    out += key + "=" + GoQuote(value);
  }
  return out;
}

base::Result<std::string> ExtractFieldPath(const kube::Pod& pod, const std::string& field_path) {
  std::string path;
  std::string subscript;
  if (SplitSubscript(field_path, &path, &subscript)) {
    if (path == "metadata.annotations") {
      std::string lower = subscript;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (auto errs = kube::ValidateQualifiedName(lower); !errs.empty()) {
        return base::Status::Error("invalid key subscript in " + field_path + ": " +
                                   base::Join(errs, ";"));
      }
      auto it = pod.metadata.annotations.find(subscript);
      return it == pod.metadata.annotations.end() ? std::string() : it->second;
    }
    if (path == "metadata.labels") {
      if (auto errs = kube::ValidateQualifiedName(subscript); !errs.empty()) {
        return base::Status::Error("invalid key subscript in " + field_path + ": " +
                                   base::Join(errs, ";"));
      }
      auto it = pod.metadata.labels.find(subscript);
      return it == pod.metadata.labels.end() ? std::string() : it->second;
    }
    return base::Status::Error("fieldPath \"" + field_path + "\" does not support subscript");
  }
  if (field_path == "metadata.annotations") return FormatMap(pod.metadata.annotations);
  if (field_path == "metadata.labels") return FormatMap(pod.metadata.labels);
  if (field_path == "metadata.name") return pod.metadata.name;
  if (field_path == "metadata.namespace") return pod.metadata.namespace_;
  if (field_path == "metadata.uid") return pod.metadata.uid;
  return base::Status::Error("unsupported fieldPath: " + field_path);
}

base::Result<std::string> ExtractResourceValue(const kube::ResourceFieldSelector& selector,
                                               const kube::Pod& pod,
                                               const kube::ResourceList& node_allocatable) {
  const kube::Container* found = FindContainer(pod, selector.container_name);
  if (found == nullptr) {
    return base::Status::Error("container " + selector.container_name + " not found");
  }
  // Unset (or zero) limits of cpu, memory and ephemeral storage are node allocatable; hugepages
  // are never overcommitted, so they always have a limit.
  kube::ResourceList limits = found->resources.limits;
  for (const char* name : {"cpu", "memory", "ephemeral-storage"}) {
    auto it = limits.find(name);
    if (it == limits.end() || it->second.IsZero()) {
      if (auto cap = node_allocatable.find(name); cap != node_allocatable.end()) {
        limits[name] = cap->second;
      }
    }
  }
  const kube::ResourceList& requests = found->resources.requests;
  kube::Quantity divisor = kube::Quantity::FromInt(1);
  if (selector.divisor && !selector.divisor->IsZero()) divisor = *selector.divisor;

  const std::string& r = selector.resource;
  std::string name;
  const kube::ResourceList* list = nullptr;
  if (r.rfind("limits.", 0) == 0) {
    name = r.substr(7);
    list = &limits;
  } else if (r.rfind("requests.", 0) == 0) {
    name = r.substr(9);
    list = &requests;
  }
  if (list != nullptr) {
    const kube::Quantity value = Lookup(*list, name);
    if (name == "cpu") return std::to_string(CeilDivide(value.MilliValue(), divisor.MilliValue()));
    if (name == "memory" || name == "ephemeral-storage" ||
        (name.rfind("hugepages-", 0) == 0 && name.size() > 10)) {
      return std::to_string(CeilDivide(value.Value(), divisor.Value()));
    }
  }
  return base::Status::Error("unsupported container resource : " + r);
}

base::Result<atomicwriter::Payload> CollectDownwardAPIData(
    const std::vector<kube::DownwardAPIVolumeFile>& items, const kube::Pod& pod,
    const kube::ResourceList& node_allocatable, std::optional<int32_t> default_mode) {
  if (!default_mode) {
    return base::Status::Error("no defaultMode used, not even the default value for it");
  }
  std::vector<base::Status> errors;
  atomicwriter::Payload payload;
  for (const kube::DownwardAPIVolumeFile& item : items) {
    atomicwriter::FileProjection file;
    file.mode = static_cast<mode_t>(item.mode.value_or(*default_mode));
    if (item.field_ref) {
      auto value = ExtractFieldPath(pod, item.field_ref->field_path);
      if (value.ok()) {
        file.data = std::move(value).value();
      } else {
        errors.push_back(value.status());
      }
    } else if (item.resource_field_ref) {
      auto value = ExtractResourceValue(*item.resource_field_ref, pod, node_allocatable);
      if (value.ok()) {
        file.data = std::move(value).value();
      } else {
        errors.push_back(value.status());
      }
    }
    payload[atomicwriter::CleanPath(item.path)] = std::move(file);
  }
  if (base::Status s = AggregateError(errors); !s.ok()) return s;
  return payload;
}

bool DownwardAPIPlugin::Supports(const kube::Volume& volume) const {
  return std::holds_alternative<kube::DownwardAPIVolumeSource>(volume.source);
}

base::Result<atomicwriter::Payload> DownwardAPIPlugin::BuildPayload(const kube::Pod& pod,
                                                                    const kube::Volume& volume,
                                                                    const VolumeHost& host) const {
  const auto& src = std::get<kube::DownwardAPIVolumeSource>(volume.source);
  return CollectDownwardAPIData(src.items, pod, AllocatableOf(host), src.default_mode);
}

}  // namespace plugins
