#include "volumemanager/reconciler/write_operation.h"

#include <utility>

#include "base/rfc3339.h"
#include "cache/object_manager.h"
#include "cache/token_manager.h"

namespace volumemanager {
namespace {

// The objects one operation reads, taken on the loop thread when it starts: the plugin builds
// the payload from these on a pool thread and never touches the loop-owned object caches. The
// revisions are immutable and the snapshot is not changed after it was taken.
class SnapshotLookup final : public plugins::ObjectLookup {
 public:
  explicit SnapshotLookup(ObjectSnapshot objects) : objects_(std::move(objects)) {}

  base::Result<std::shared_ptr<const kube::ConfigMap>> GetConfigMap(
      const std::string& ns, const std::string& name) override {
    base::Result<const cache::ObjectRevision*> found =
        Find({kube::ObjectKind::kConfigMap, ns, name});
    if (!found.ok()) return found.status();
    return (*found)->config_map;
  }
  base::Result<std::shared_ptr<const kube::Secret>> GetSecret(const std::string& ns,
                                                              const std::string& name) override {
    base::Result<const cache::ObjectRevision*> found = Find({kube::ObjectKind::kSecret, ns, name});
    if (!found.ok()) return found.status();
    return (*found)->secret;
  }

 private:
  base::Result<const cache::ObjectRevision*> Find(const kube::ObjectRef& ref) const {
    for (const auto& [r, revision] : objects_) {
      if (!(r == ref)) continue;
      if (!revision.ok()) return revision.status();
      return &*revision;
    }
    // Not among the volume's references: the plugin asked for something it did not declare.
    return cache::NotRegisteredError(ref.namespace_, ref.name);
  }

  ObjectSnapshot objects_;
};

// The service account tokens one operation includes, taken on the loop thread with the objects:
// the plugin finds each source's token here (by kube::TokenRefFor, as the populator named it).
class SnapshotTokens final : public plugins::ServiceAccountTokenSource {
 public:
  explicit SnapshotTokens(TokenSnapshot tokens) : tokens_(std::move(tokens)) {}

  base::Result<std::string> GetToken(
      const kube::Pod& pod, const kube::ServiceAccountTokenProjection& projection) override {
    const kube::TokenRef ref = kube::TokenRefFor(pod, projection);
    for (const auto& [r, revision] : tokens_) {
      if (!(r == ref)) continue;
      if (!revision.ok()) return revision.status();
      return *revision->token;
    }
    return base::Status::Error("token for " + ref.Account() + " not registered for pod " +
                               ref.namespace_ + "/" + ref.pod_name);
  }

 private:
  TokenSnapshot tokens_;
};

std::string FormatDelay(std::chrono::milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + "ms";
  const long ms = d.count();
  if (ms % 1000 == 0 && ms < 60000) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms / 60000) + "m" + std::to_string((ms % 60000) / 1000) + "s";
}

}  // namespace

base::Status RunWrite(WriteOperation& op, VolumeDisk& disk) {
  SetUpRequest& request = op.request;
  if (op.waits_for_set_up) {
    auto set_up = disk.KubeletHasSetUp(request.location);
    if (!set_up.ok()) return set_up.status();
    if (!*set_up) {
      op.not_set_up = true;  // not a failure: looked at again later
      return base::Status::OK();
    }
    request.kubelet_set_up_checked = true;  // SetUpVolume need not look again
  }
  // The snapshot is the operation's alone from here: the revisions go with the lookups once the
  // payload is built.
  SnapshotLookup lookup(std::move(op.objects));
  SnapshotTokens tokens(std::move(op.tokens));
  plugins::VolumeHost host;
  host.objects = &lookup;
  host.tokens = op.with_tokens ? &tokens : nullptr;
  host.node_allocatable = op.node_allocatable;
  std::unique_ptr<plugins::LiveContent> live;
  if (op.carries_pod_derived_over) {
    live = disk.LiveVersion(request.location);
    host.pod_derived_from = live.get();
  }
  // `spec` points into *pod, which the operation keeps alive.
  base::Result<atomicwriter::Payload> payload = op.plugin->BuildPayload(*op.pod, *op.spec, host);
  if (!payload.ok()) return payload.status();  // nothing written: a first mount leaves no dir
  request.payload = std::move(payload).value();
  op.result = disk.SetUp(request);
  if (op.result.ok() && op.subpaths && !op.subpaths->mounts.empty()) {
    // Published or not (another writer's swap may have left nothing to publish): the bound
    // files need the bytes the volume shows. The operation, and what waits for it, ends
    // only after every copy.
    SubPathUpdateRequest copy;
    copy.location = request.location;
    copy.payload = &request.payload;
    copy.version = op.result->ts_dir;
    copy.mounts = op.subpaths->mounts;
    op.copies = disk.UpdateSubPaths(copy);
  }
  if (op.result.ok() && op.result->on_tmpfs) {
    op.tmpfs_bytes = atomicwriter::TmpfsPageBytes(request.payload);
  }
  request.payload.clear();  // the bytes are on disk; do not keep them until the completion
  return op.result.status();
}

void LogWriteDone(const WriteReport& r) {
  if (r.observe) {
    // The disk compared and reported (ObservingDisk): nothing was set up or written.
    logging::Debug(
        "Observe: volume compared",
        {{"pod", r.pod}, {"podUID", r.pod_uid}, {"volume", r.volume}, {"version", r.version}});
  } else if (r.first_mount && r.kubelet_owned) {
    // The kubelet set the volume up; the daemon's first write into it (published when the
    // kubelet's content was not the objects' latest) is no set-up.
    logging::Info("Volume set up by the kubelet: refreshed from now on",
                  {{"pod", r.pod},
                   {"podUID", r.pod_uid},
                   {"volume", r.volume},
                   {"objects", logging::Value::IfSet(r.objects)},
                   {"version", r.version},
                   {"published", r.published},
                   {"writer", r.writer}});
  } else if (r.first_mount) {
    logging::Info("MountVolume.SetUp succeeded", {{"pod", r.pod},
                                                  {"podUID", r.pod_uid},
                                                  {"volume", r.volume},
                                                  {"version", r.version},
                                                  {"writer", r.writer}});
  } else if (r.published || r.recovered) {
    // A refresh is said once, with what it brought and how long after the change; a volume whose
    // last attempt had failed says it recovered.
    logging::Info(r.recovered ? "Volume recovered after failures" : "Volume updated",
                  {{"pod", r.pod},
                   {"podUID", r.pod_uid},
                   {"volume", r.volume},
                   {"objects", logging::Value::IfSet(r.objects)},
                   {"tokens", r.tokens_only ? logging::Value("renewed") : logging::Value::Absent()},
                   {"version", r.version},
                   {"published", r.published},
                   {"latencyMs", static_cast<long>(r.latency.count())},
                   {"writer", r.writer}});
  } else {
    // Every write is logged with its writer (one writer per node can be checked).
    logging::Debug("Volume checked, unchanged", {{"pod", r.pod},
                                                 {"podUID", r.pod_uid},
                                                 {"volume", r.volume},
                                                 {"version", r.version},
                                                 {"writer", r.writer}});
  }
}

void LogWriteFailed(const VolumeKey& key, const DesiredVolume& desired, const std::string& error,
                    std::chrono::milliseconds retry_in, std::chrono::system_clock::time_point now) {
  // The objects whose content did not reach the volume (a write error names only a file): the
  // one `object`, or a projected volume's several as `objects` ("kind/namespace/name,...").
  std::string objects;
  if (desired.objects.size() > 1) {
    for (const kube::ObjectRef& ref : desired.objects) {
      if (!objects.empty()) objects += ',';
      objects +=
          std::string(kube::ObjectKindName(ref.kind)) + '/' + ref.namespace_ + '/' + ref.name;
    }
  }
  // The kubelet's "no retries permitted until <time> (durationBeforeRetry <delay>)", as keys.
  logging::Warn("FailedMount: MountVolume.SetUp failed",
                {{"pod", logging::KObj(desired.pod->metadata)},
                 {"podUID", key.pod_uid.str()},
                 {"volume", key.volume_name},
                 {"uniqueName", desired.unique_name(key)},
                 {"object", desired.objects.size() == 1 ? logging::KRef(desired.objects.front())
                                                        : logging::Value::Absent()},
                 {"objects", logging::Value::IfSet(objects)},
                 {"err", error},
                 {"noRetriesUntil", base::FormatRfc3339(now + retry_in)},
                 {"durationBeforeRetry", FormatDelay(retry_in)}});
}

}  // namespace volumemanager
