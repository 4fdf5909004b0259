#include "podconfig/static_pod.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <utility>
#include <variant>

#include "base/md5.h"
#include "base/redacted_url.h"
#include "kube/manifest_decoder.h"
#include "kube/validation.h"
#include "kube/yaml_to_json.h"
#include "podconfig/pod_update.h"

namespace podconfig {
namespace {

using nlohmann::json;

// The JSON value of each Pod in the manifest, in the order DecodeManifest returns the objects:
// documents in order, a list's items in place of the list.
base::Result<std::vector<json>> PodJsonValues(std::string_view bytes) {
  base::Result<std::vector<json>> docs = kube::YamlToJson(bytes);
  if (!docs.ok()) return docs.status();
  std::vector<json> pods;
  for (json& doc : *docs) {
    auto kind = doc.is_object() ? doc.find("kind") : doc.end();
    const bool is_list = kind != doc.end() && kind->is_string() &&
                         kind->get_ref<const std::string&>().ends_with("List");
    if (!is_list) {
      pods.push_back(std::move(doc));
      continue;
    }
    auto items = doc.find("items");
    if (items != doc.end() && items->is_array()) {
      for (json& item : *items) pods.push_back(std::move(item));
    }
  }
  return pods;
}

// The kubelet's applyDefaults for static pods. `origin` is "file:<path>" or "url:<url>".
base::Status ApplyStaticPodDefaults(const json& manifest, const std::string& node_name,
                                    const std::string& origin, kube::Pod* pod) {
  if (pod->metadata.uid.empty()) {
    std::string input = manifest.dump();
    if (origin.starts_with("file:")) input += "host:" + node_name;
    input += origin;
    pod->metadata.uid = base::Md5Hex(input);
  }
  std::string node_lower = node_name;
  std::transform(node_lower.begin(), node_lower.end(), node_lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string original_name = pod->metadata.name;
  pod->metadata.name += "-" + node_lower;
  // The generated name must still be a valid object name (at most 253 characters, DNS subdomain).
  if (base::Status s = kube::Validate(*pod); !s.ok()) {
    return base::Status::Error("pod " + original_name + " on node " + node_lower + ": " +
                               s.message());
  }
  if (pod->metadata.namespace_.empty()) pod->metadata.namespace_ = "default";
  pod->spec.node_name = node_name;
  pod->metadata.annotations[kConfigHashAnnotation] = pod->metadata.uid;
  pod->status.phase = "Pending";
  return base::Status::OK();
}

base::Result<std::vector<kube::Pod>> DecodeStaticPods(std::string_view bytes,
                                                      const std::string& source,
                                                      const std::string& node_name,
                                                      const std::string& origin) {
  base::Result<std::vector<kube::ManifestObject>> objects = kube::DecodeManifest(bytes, source);
  if (!objects.ok()) return objects.status();
  base::Result<std::vector<json>> values = PodJsonValues(bytes);
  if (!values.ok()) return values.status().WithContext(source);
  if (values->size() != objects->size()) {
    return base::Status::Error(source + ": could not match the decoded pods to the manifest");
  }
  std::vector<kube::Pod> pods;
  for (size_t i = 0; i < objects->size(); ++i) {
    kube::ManifestObject& object = (*objects)[i];
    if (!std::holds_alternative<kube::Pod>(object)) {
      return base::Status::Error(source + ": " + kube::KindOf(object) + " " +
                                 kube::MetadataOf(object).name + ": expected kind Pod");
    }
    kube::Pod pod = std::get<kube::Pod>(std::move(object));
    if (base::Status s = ApplyStaticPodDefaults((*values)[i], node_name, origin, &pod); !s.ok()) {
      return s.WithContext(source);
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

}  // namespace

base::Result<kube::Pod> DecodeStaticPodFile(std::string_view bytes, const std::string& path,
                                            const std::string& node_name) {
  base::Result<std::vector<kube::Pod>> pods =
      DecodeStaticPods(bytes, path, node_name, "file:" + path);
  if (!pods.ok()) return pods.status();
  if (pods->size() != 1) {
    return base::Status::Error(path + ": expected exactly one Pod, found " +
                               std::to_string(pods->size()));
  }
  return std::move(pods->front());
}

base::Result<std::vector<kube::Pod>> DecodeStaticPodsFromUrl(std::string_view bytes,
                                                             const std::string& url,
                                                             const std::string& node_name) {
  // Errors name the URL without its credentials; the UID still hashes the URL as given.
  return DecodeStaticPods(bytes, base::RedactedUrl(url), node_name, "url:" + url);
}

}  // namespace podconfig
