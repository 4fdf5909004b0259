#include "cache/read_policy.h"

#include "base/strings.h"

namespace cache {

std::string ReadPolicy::Refusal(const kube::ObjectRef& ref) const {
  if (!secrets && ref.kind == kube::ObjectKind::kSecret) {
    return ref.ToString() +
           " is not read: the daemon reads no Secrets (--no-secrets; chart: rbac.secrets: false)";
  }
  if (!namespaces.empty() && namespaces.count(ref.namespace_) == 0) {
    return ref.ToString() + " is not read: the daemon reads ConfigMaps and Secrets only in " +
           "the namespaces " + base::Join(namespaces, ", ") +
           " (--object-namespaces; chart: rbac.namespaces)";
  }
  return "";
}

std::string ReadPolicy::FirstRefusal(const std::vector<kube::ObjectRef>& refs) const {
  for (const kube::ObjectRef& ref : refs) {
    if (std::string refusal = Refusal(ref); !refusal.empty()) return refusal;
  }
  return "";
}

std::string ReadPolicy::Describe() const {
  std::vector<std::string> parts;
  if (!secrets) parts.push_back("no Secrets (--no-secrets)");
  if (!namespaces.empty()) {
    parts.push_back("ConfigMaps and Secrets only in the namespaces " +
                    base::Join(namespaces, ", ") + " (--object-namespaces)");
  }
  return base::Join(parts, "; ");
}

std::vector<kube::ObjectRef> PolicyObjectManager::Allowed(
    const std::vector<kube::ObjectRef>& refs) const {
  std::vector<kube::ObjectRef> out;
  for (const kube::ObjectRef& ref : refs) {
    if (policy_.Refusal(ref).empty()) out.push_back(ref);
  }
  return out;
}

void PolicyObjectManager::RegisterPod(const std::string& pod_uid,
                                      const std::vector<kube::ObjectRef>& refs) {
  inner_->RegisterPod(pod_uid, Allowed(refs));
}

namespace {

// `get()`, unless `policy` refuses `ref`: then the refusal, and nothing is asked.
template <typename Get>
auto Checked(const ReadPolicy& policy, const kube::ObjectRef& ref, Get get) -> decltype(get()) {
  if (std::string refusal = policy.Refusal(ref); !refusal.empty()) {
    return base::Status::Error(refusal);
  }
  return get();
}

}  // namespace

base::Result<std::shared_ptr<const kube::ConfigMap>> PolicyObjectManager::GetConfigMap(
    const std::string& ns, const std::string& name) {
  return Checked(policy_, {kube::ObjectKind::kConfigMap, ns, name},
                 [&] { return inner_->GetConfigMap(ns, name); });
}

base::Result<std::shared_ptr<const kube::Secret>> PolicyObjectManager::GetSecret(
    const std::string& ns, const std::string& name) {
  return Checked(policy_, {kube::ObjectKind::kSecret, ns, name},
                 [&] { return inner_->GetSecret(ns, name); });
}

base::Result<ObjectRevision> PolicyObjectManager::GetRevision(const kube::ObjectRef& ref) {
  return Checked(policy_, ref, [&] { return inner_->GetRevision(ref); });
}

bool PolicyObjectManager::Unread(const kube::ObjectRef& ref) const {
  // A refused object has its answer (the refusal): nothing is on its way.
  return policy_.Refusal(ref).empty() && inner_->Unread(ref);
}

void PolicyObjectManager::Fetch(const std::vector<kube::ObjectRef>& refs, FetchMode mode,
                                std::function<void()> done) {
  inner_->Fetch(Allowed(refs), mode, std::move(done));
}

}  // namespace cache
