#include "podconfig/pod_config.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <utility>

#include "logging/structured_log.h"

namespace podconfig {
namespace {

// Annotations PodConfig itself sets: never a reason for an update.
bool IsLocalAnnotation(const std::string& key) { return key == kConfigSourceAnnotation; }

bool AnnotationsEqual(const std::map<std::string, std::string>& a,
                      const std::map<std::string, std::string>& b) {
  auto skip_local = [](auto it, auto end) {
    while (it != end && IsLocalAnnotation(it->first)) ++it;
    return it;
  };
  auto ia = skip_local(a.begin(), a.end());
  auto ib = skip_local(b.begin(), b.end());
  while (ia != a.end() && ib != b.end()) {
    if (*ia != *ib) return false;
    ia = skip_local(++ia, a.end());
    ib = skip_local(++ib, b.end());
  }
  return ia == a.end() && ib == b.end();
}

// The kubelet's podsDifferSemantically, plus name and namespace (which an API pod cannot change,
// but a static pod with an explicit UID can).
bool DifferSemantically(const kube::Pod& existing, const kube::Pod& ref) {
  const kube::ObjectMeta& a = existing.metadata;
  const kube::ObjectMeta& b = ref.metadata;
  return existing.spec != ref.spec || a.name != b.name || a.namespace_ != b.namespace_ ||
         a.labels != b.labels || !AnnotationsEqual(a.annotations, b.annotations) ||
         a.deletion_timestamp != b.deletion_timestamp ||
         a.deletion_grace_period_seconds != b.deletion_grace_period_seconds;
}

// What a DELETE says of one pod. A DELETE is a pod marked for deletion (deletionTimestamp set),
// still in its source; it is graceful only with a grace period: with deletionGracePeriodSeconds 0
// (a forced delete, a pod that had finished, or the kubelet's final delete once the containers
// stopped) the API server removes the object right after (the REMOVE that follows).
const char* MarkedForDeletion(const kube::ObjectMeta& meta) {
  if (!meta.deletion_grace_period_seconds) return "Pod marked for deletion";
  return *meta.deletion_grace_period_seconds > 0 ? "Pod marked for deletion (graceful)"
                                                 : "Pod marked for deletion with no grace period";
}

}  // namespace

const char* PodOpName(PodOp op) {
  switch (op) {
    case PodOp::kAdd:
      return "ADD";
    case PodOp::kUpdate:
      return "UPDATE";
    case PodOp::kDelete:
      return "DELETE";
    case PodOp::kRemove:
      return "REMOVE";
    case PodOp::kReconcile:
      return "RECONCILE";
  }
  return "UNKNOWN";
}

PodConfig::PodConfig(std::function<void(const PodUpdate&)> on_update)
    : on_update_(std::move(on_update)) {}

PodConfig::Sink PodConfig::RegisterSource(const std::string& source) {
  sources_.insert(source);
  pods_by_source_[source];
  return [this, source](std::vector<PodPtr> pods) { Set(source, std::move(pods)); };
}

// One info line per pod added, updated, removed or marked for deletion; a large batch (a source's
// first state in cluster mode, a node drained) is one info line with its count, the pods at debug.
void PodConfig::LogUpdate(const PodUpdate& update, const std::string& source) {
  const char* what = "Pod added";
  const char* batch = "Pods added";
  switch (update.op) {
    case PodOp::kUpdate:
      what = "Pod updated";
      batch = "Pods updated";
      break;
    case PodOp::kRemove:
      what = "Pod removed";
      batch = "Pods removed";
      break;
    case PodOp::kDelete:
      batch = "Pods marked for deletion";
      break;
    default:
      break;
  }
  const bool summarize = update.pods.size() > kMaxPodLinesPerUpdate;
  if (summarize) {
    logging::Info(batch, {{"count", update.pods.size()}, {"source", source}});
  }
  for (const PodPtr& pod : update.pods) {
    const kube::ObjectMeta& meta = pod->metadata;
    const bool deletion = update.op == PodOp::kDelete;
    logging::Log(summarize ? spdlog::level::debug : spdlog::level::info,
                 deletion ? MarkedForDeletion(meta) : what,
                 {{"pod", logging::KObj(meta)},
                  {"podUID", meta.uid},
                  {"gracePeriodSeconds", deletion && meta.deletion_grace_period_seconds
                                             ? logging::Value(*meta.deletion_grace_period_seconds)
                                             : logging::Value::Absent()},
                  {"source", source}});
  }
}

bool PodConfig::AllSourcesSeen() const { return seen_.size() == sources_.size(); }

bool PodConfig::SourceSeen(const std::string& source) const { return seen_.count(source) > 0; }

const std::map<std::string, PodPtr>& PodConfig::PodsOf(const std::string& source) const {
  static const std::map<std::string, PodPtr> kNone;
  auto it = pods_by_source_.find(source);
  return it == pods_by_source_.end() ? kNone : it->second;
}

void PodConfig::Set(const std::string& source, std::vector<PodPtr> pods) {
  const bool first_set = seen_.insert(source).second;
  std::map<std::string, PodPtr> old_pods = std::move(pods_by_source_[source]);
  std::map<std::string, PodPtr> new_pods;
  PodUpdate adds{PodOp::kAdd, {}, source};
  PodUpdate updates{PodOp::kUpdate, {}, source};
  PodUpdate deletes{PodOp::kDelete, {}, source};
  PodUpdate removes{PodOp::kRemove, {}, source};
  PodUpdate reconciles{PodOp::kReconcile, {}, source};

  std::set<std::string> full_names;
  for (PodPtr& pod : pods) {
    const kube::ObjectMeta& meta = pod->metadata;
    const std::string full_name = meta.NamespacedName();
    if (meta.uid.empty()) {
      logging::Warn("Pod has no metadata.uid; ignoring it",
                    {{"pod", logging::KObj(meta)}, {"source", source}});
      continue;
    }
    if (!full_names.insert(full_name).second) {
      logging::Warn("Duplicate pod full name; ignoring it",
                    {{"pod", logging::KObj(meta)}, {"podUID", meta.uid}, {"source", source}});
      continue;
    }
    if (new_pods.count(meta.uid)) {
      logging::Warn("Duplicate pod UID; ignoring it",
                    {{"pod", logging::KObj(meta)}, {"podUID", meta.uid}, {"source", source}});
      continue;
    }
    auto annotation = meta.annotations.find(kConfigSourceAnnotation);
    if (annotation == meta.annotations.end() || annotation->second != source) {
      auto annotated = std::make_shared<kube::Pod>(*pod);
      annotated->metadata.annotations[kConfigSourceAnnotation] = source;
      pod = std::move(annotated);
    }
    const std::string uid = pod->metadata.uid;
    auto old = old_pods.find(uid);
    if (old == old_pods.end()) {
      adds.pods.push_back(pod);
    } else if (DifferSemantically(*old->second, *pod)) {
      (pod->metadata.deletion_timestamp ? deletes : updates).pods.push_back(pod);
    } else if (old->second->status != pod->status) {
      reconciles.pods.push_back(pod);
    }
    new_pods.emplace(uid, std::move(pod));
  }
  for (auto& [uid, pod] : old_pods) {
    if (!new_pods.count(uid)) removes.pods.push_back(std::move(pod));
  }
  pods_by_source_[source] = std::move(new_pods);

  for (PodUpdate* u : {&removes, &adds, &updates, &deletes}) {
    if (u->pods.empty()) continue;
    LogUpdate(*u, source);
    on_update_(*u);
  }
  if (first_set && adds.pods.empty() && updates.pods.empty() && deletes.pods.empty()) {
    on_update_(adds);  // empty ADD: "this source is ready"
  }
  if (!reconciles.pods.empty()) on_update_(reconciles);
  if (first_set) spdlog::info("pod source {} delivered its first state", source);
}

}  // namespace podconfig
