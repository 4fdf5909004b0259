#include "podconfig/api_source.h"

#include <spdlog/spdlog.h>
#include <uv.h>

#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "base/catch_all.h"
#include "kube/defaults.h"
#include "kube/object_decoder.h"
#include "kube/validation.h"
#include "kubeclient/watch/object_store.h"
#include "logging/structured_log.h"

namespace podconfig {
namespace {

// kubetypes.ConfigMirrorAnnotationKey: set on the API's copy of a static pod.
constexpr char kConfigMirrorAnnotation[] = "kubernetes.io/config.mirror";

bool IsMirrorPod(const nlohmann::json& object) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return false;
  auto annotations = metadata->find("annotations");
  return annotations != metadata->end() && annotations->is_object() &&
         annotations->contains(kConfigMirrorAnnotation);
}

}  // namespace

struct ApiSource::Impl {
  std::string node_name;
  Sink sink;
  std::unique_ptr<kubeclient::Reflector> reflector;
  uv_timer_t flush_timer{};
  bool stopped = false;
  bool synced = false;
  bool dirty = false;  // the pods changed since the last delivery
  Stats stats;

  struct Entry {
    std::string resource_version;  // of the object last looked at
    PodPtr pod;                    // its last decoded version, if any
  };
  std::map<std::string, Entry> pods;  // "namespace/name" -> entry

  void Upsert(const nlohmann::json& object);
  void Erase(const nlohmann::json& object);
  void ScheduleFlush();
  void Flush();
};

void ApiSource::Impl::Upsert(const nlohmann::json& object) {
  const std::string key = kubeclient::ObjectStore::KeyOf(object);
  const std::string rv = kubeclient::ObjectStore::ResourceVersionOf(object);
  if (IsMirrorPod(object)) {
    ++stats.mirror_skipped;
    logging::Debug("API pod source: mirror pod left out", {{"pod", key}});
    if (pods.erase(key) > 0) dirty = true;
    return;
  }
  Entry& entry = pods[key];
  if (entry.pod && entry.resource_version == rv) return;  // a replayed version
  entry.resource_version = rv;
  base::Result<kube::Pod> pod = kube::DecodePod(object);
  if (!pod.ok()) {
    ++stats.decode_failures;
    logging::Error(entry.pod ? "API pod source: pod cannot be decoded; keeping its last decoded "
                               "version"
                             : "API pod source: pod cannot be decoded; left out",
                   {{"pod", key}, {"resourceVersion", rv}, {"err", pod.status()}});
    if (!entry.pod) pods.erase(key);
    return;
  }
  if (pod->spec.node_name != node_name) {  // a server that ignored the field selector
    ++stats.other_node;
    logging::Warn("API pod source: pod is bound to another node; left out",
                  {{"pod", key}, {"podUID", pod->metadata.uid}, {"node", pod->spec.node_name}});
    if (pods.erase(key) > 0) dirty = true;
    return;
  }
  kube::ApplyDefaults(&*pod);
  // The API server validated it, unless it is not one (or a proxy rewrote it): a pod the file
  // source would refuse is refused here too, before any path of it reaches the disk.
  if (base::Status s = kube::Validate(*pod); !s.ok()) {
    ++stats.decode_failures;
    spdlog::error("API pod source: pod {} (resourceVersion {}) is invalid: {}; {}", key, rv,
                  s.message(), entry.pod ? "keeping its last valid version" : "left out");
    if (!entry.pod) pods.erase(key);
    return;
  }
  pod->metadata.annotations[kConfigSourceAnnotation] = kApiSource;  // PodConfig keeps it as is
  entry.pod = std::make_shared<const kube::Pod>(std::move(pod).value());
  dirty = true;
}

void ApiSource::Impl::Erase(const nlohmann::json& object) {
  if (pods.erase(kubeclient::ObjectStore::KeyOf(object)) > 0) dirty = true;
}

void ApiSource::Impl::ScheduleFlush() {
  if (stopped || !synced || !dirty || uv_is_active(reinterpret_cast<uv_handle_t*>(&flush_timer))) {
    return;
  }
  // A zero timeout fires on the next loop turn, after everything this turn brings in.
  uv_timer_start(
      &flush_timer,
      [](uv_timer_t* t) {
        auto* impl = static_cast<Impl*>(t->data);
        base::Status s = base::CatchAll("API pod source delivery", [impl] { impl->Flush(); });
        if (!s.ok()) spdlog::error("API pod source: {}", s.message());
      },
      0, 0);
}

void ApiSource::Impl::Flush() {
  if (stopped || !dirty) return;
  dirty = false;
  std::vector<PodPtr> set;
  set.reserve(pods.size());
  for (const auto& [key, entry] : pods) {
    if (entry.pod) set.push_back(entry.pod);
  }
  ++stats.deliveries;
  spdlog::debug("API pod source: {} pods", set.size());
  sink(std::move(set));  // may Stop the source; nothing of it is touched afterwards
}

ApiSource::~ApiSource() { Stop(); }

base::Status ApiSource::Start(kubeclient::ApiClient* api, ApiSourceOptions options, Sink sink) {
  if (impl_ != nullptr) return base::Status::Error("API pod source: already started");
  if (options.node_name.empty()) return base::Status::Error("API pod source: empty node name");
  auto* impl = new Impl;
  impl->node_name = options.node_name;
  impl->sink = std::move(sink);
  uv_timer_init(api->http()->loop(), &impl->flush_timer);
  impl->flush_timer.data = impl;

  kubeclient::ReflectorOptions reflector = std::move(options.reflector);
  reflector.path = "/api/v1/pods";
  reflector.field_selector = "spec.nodeName=" + options.node_name;
  reflector.kind = "Pod";
  reflector.api_version = "v1";
  reflector.description = "pods on node " + options.node_name;
  // The handlers decode the new object and key deletions by name: the reflector's store need not
  // hold every pod as JSON beside its decoded copy.
  reflector.keep_objects = false;
  kubeclient::ReflectorHandlers handlers;
  handlers.on_add = [impl](const nlohmann::json& object) {
    impl->Upsert(object);
    impl->ScheduleFlush();
  };
  handlers.on_update = [impl](const nlohmann::json&, const nlohmann::json& object) {
    impl->Upsert(object);
    impl->ScheduleFlush();
  };
  handlers.on_delete = [impl](const nlohmann::json& object) {
    impl->Erase(object);
    impl->ScheduleFlush();
  };
  handlers.on_synced = [impl] {
    if (!impl->synced) {
      impl->synced = true;
      impl->dirty = true;  // the first list is delivered even when it brought no pod
      spdlog::info("API pod source: first list of pods on node {} complete", impl->node_name);
    }
    impl->ScheduleFlush();
  };
  impl->reflector = std::make_unique<kubeclient::Reflector>(api, std::move(reflector), handlers);
  impl_ = impl;
  impl->reflector->Start();
  return base::Status::OK();
}

void ApiSource::Stop() {
  if (impl_ == nullptr) return;
  Impl* impl = impl_;
  impl_ = nullptr;
  impl->stopped = true;
  // The reflector goes now (its handlers never call the sink, so Stop is never inside them); the
  // Impl goes once its timer closed, so a Stop from inside the sink returns into a live object.
  impl->reflector.reset();
  uv_close(reinterpret_cast<uv_handle_t*>(&impl->flush_timer),
           [](uv_handle_t* h) { delete static_cast<Impl*>(h->data); });
}

ApiSource::Stats ApiSource::stats() const { return impl_ ? impl_->stats : Stats{}; }

bool ApiSource::synced() const { return impl_ != nullptr && impl_->synced; }

const kubeclient::Reflector* ApiSource::reflector() const {
  return impl_ ? impl_->reflector.get() : nullptr;
}

}  // namespace podconfig
