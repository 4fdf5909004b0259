#include "cmd/volumemanager/admin_publisher.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "base/catch_all.h"
#include "base/rfc3339.h"
#include "base/version.h"
#include "config/go_duration.h"
#include "volumemanager/reconciler/operation_metrics.h"
#include "volumemanager/state/volume_paths.h"

namespace volumemanager {
namespace {

using server::Labels;
using server::MetricFamily;
using server::MetricType;

// To the millisecond: "2026-11-30T12:00:00.123Z".
std::string Rfc3339(std::chrono::system_clock::time_point t) { return base::FormatRfc3339(t, 3); }

// A steady-clock time as wall-clock time, for people reading /debug/state.
std::string Rfc3339(std::chrono::steady_clock::time_point t) {
  const auto from_now = t - std::chrono::steady_clock::now();
  return Rfc3339(std::chrono::system_clock::now() +
                 std::chrono::duration_cast<std::chrono::system_clock::duration>(from_now));
}

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

}  // namespace

struct AdminPublisher::Handles {
  uv_async_t beat{};
  uv_async_t refresh{};
  AdminPublisher* owner = nullptr;
  int open = 0;
};

AdminPublisher::AdminPublisher(uv_loop_t* loop, Daemon* daemon, nlohmann::json configz)
    : loop_(loop),
      daemon_(daemon),
      configz_(std::make_shared<const nlohmann::json>(std::move(configz))) {}

AdminPublisher::~AdminPublisher() { Stop(); }

base::Status AdminPublisher::Start(const std::string& healthz_address,
                                   const std::string& debug_address) {
  if (handles_ != nullptr || server_ != nullptr) {
    return base::Status::Error("admin server: already started");
  }
  handles_ = new Handles;
  handles_->owner = this;
  // Alive, when /healthz asks: the loop ran this callback, and the election loop (when used) is
  // running. No timer: an idle daemon wakes for a probe only.
  uv_async_init(loop_, &handles_->beat, [](uv_async_t* a) {
    auto* h = static_cast<Handles*>(a->data);
    if (h->owner != nullptr) h->owner->BeatIfAlive();
  });
  handles_->beat.data = handles_;
  uv_async_init(loop_, &handles_->refresh, [](uv_async_t* a) {
    auto* h = static_cast<Handles*>(a->data);
    if (h->owner == nullptr) return;
    base::Status s = base::CatchAll("admin snapshot", [&] { h->owner->Publish(); });
    if (!s.ok()) spdlog::error("{}", s.message());
  });
  handles_->refresh.data = handles_;
  handles_->open = 2;
  for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&handles_->beat),
                         reinterpret_cast<uv_handle_t*>(&handles_->refresh)}) {
    uv_unref(h);  // the admin server never keeps the daemon running
  }

  server::AdminServerOptions options;
  options.healthz_address = healthz_address;
  options.debug_address = debug_address;
  options.healthz_name = "--healthz-bind-address";
  options.debug_name = "--debug-bind-address";
  uv_async_t* refresh = &handles_->refresh;
  uv_async_t* beat = &handles_->beat;
  // Server threads: uv_async_send is the one libuv call that is safe from another thread. The
  // server is destroyed (its threads joined) before the handles are closed.
  options.request_refresh = [refresh] { uv_async_send(refresh); };
  options.request_beat = [beat] { uv_async_send(beat); };
  auto started = server::AdminServer::Start(options);
  base::Status error = started.status();
  if (!started.ok() && !healthz_address.empty() && !debug_address.empty()) {
    // One listener failed: serve the other (the probes above all), and still report the error.
    options.debug_address.clear();
    started = server::AdminServer::Start(options);
    if (!started.ok()) {
      options.healthz_address.clear();
      options.debug_address = debug_address;
      started = server::AdminServer::Start(options);
    }
  }
  if (!started.ok()) {
    Stop();
    return error;
  }
  server_ = std::move(started).value();
  if (!server_->healthz_address().empty()) {
    spdlog::info("serving /healthz, /readyz and /metrics on {}", server_->healthz_address());
  }
  if (!server_->debug_address().empty()) {
    spdlog::info("serving /debug/state and /configz on {}", server_->debug_address());
  }
  return error;
}

void AdminPublisher::Stop() {
  server_.reset();  // joins the server's threads: no uv_async_send after this
  if (handles_ == nullptr) return;
  handles_->owner = nullptr;
  auto closed = [](uv_handle_t* h) {
    auto* handles = static_cast<Handles*>(h->data);
    if (--handles->open == 0) delete handles;
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&handles_->beat), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&handles_->refresh), closed);
  handles_ = nullptr;
}

void AdminPublisher::BeatIfAlive() {
  if (server_ != nullptr && daemon_->ElectionAlive(std::chrono::steady_clock::now())) {
    server_->Beat();
  }
}

void AdminPublisher::Publish() {
  if (server_ == nullptr) return;
  BeatIfAlive();  // the loop is answering
  const server::AdminServer::Requests requests = server_->requests();
  auto snapshot = std::make_shared<server::Snapshot>();
  snapshot->seq = requests.seq;
  snapshot->readiness = daemon_->ReadinessChecks();
  snapshot->metrics = BuildMetrics();
  // The debug state lists every volume: built only when /debug/state asked since the last one.
  if (requests.debug_seq > debug_seq_) {
    debug_state_ = std::make_shared<const nlohmann::json>(BuildDebugState());
    debug_seq_ = requests.debug_seq;
  }
  snapshot->debug_seq = debug_seq_;
  snapshot->debug_state = debug_state_;
  snapshot->configz = configz_;
  server_->Publish(std::move(snapshot));
}

namespace {

// Observe mode: the observations of the volumes the daemon knows (desired or in the actual
// state), and of those a normal run would tear down (gone from both once looked at).
std::map<VolumeKey, VolumeObservation> CurrentObservations(const Daemon& daemon) {
  std::map<VolumeKey, VolumeObservation> out;
  const ObservingDisk* observer = daemon.observer();
  const VolumeManager* vm = daemon.volume_manager();
  if (observer == nullptr || vm == nullptr) return out;
  for (auto& [key, o] : observer->Observations()) {
    if (o.reason == "tear_down" || vm->desired().Find(key) != nullptr ||
        vm->actual().Find(key) != nullptr) {
      out.emplace(key, std::move(o));
    }
  }
  return out;
}

}  // namespace

std::vector<MetricFamily> AdminPublisher::BuildMetrics() const {
  std::vector<MetricFamily> out;
  MetricFamily operations = Family(
      "storage_operation_duration_seconds",
      "Storage operation duration (the kubelet's metric): volume_mount covers first mounts and "
      "refreshes, volume_unmount teardowns",
      MetricType::kHistogram);
  MetricFamily propagation =
      Family("volumemanager_propagation_duration_seconds",
             "Seconds from a remount request (an object or pod change observed, or the periodic "
             "resync) to the new content published in the volume",
             MetricType::kHistogram);
  MetricFamily errors = Family("volumemanager_operation_errors_total",
                               "Failed volume operations by reason (filesystem, "
                               "object_unavailable, invalid_volume)",
                               MetricType::kCounter);
  MetricFamily outcomes =
      Family("volumemanager_reconciler_outcomes_total",
             "What the reconciler's operations came to, by outcome", MetricType::kCounter);
  MetricFamily subpath_copies =
      Family("volumemanager_subpath_copies_total",
             "subPath files of pods annotated volumemanager.io/update-subpaths after their "
             "volume's writes, by result: updated (the new bytes written in place), current "
             "(already the published bytes, or bound to the live file), not_bound (the "
             "container has not started: nothing bound yet, no failure), refused (not the "
             "kubelet's bind of that file, a key removed, subPathExpr, a directory), failed",
             MetricType::kCounter);
  MetricFamily volumes =
      Family("volumemanager_volumes",
             "Volumes by state: mounted (content current as far as known), failing (the last "
             "attempt failed, backing off), waiting_for_kubelet, left_to_kubelet (only the "
             "kubelet can produce them), left_to_kubelet_by_policy (they read objects the "
             "daemon is configured not to read: --no-secrets, --object-namespaces)",
             MetricType::kGauge);
  MetricFamily failing_by_status =
      Family("volumemanager_failing_volumes_by_api_status",
             "Failing volumes (as in volumemanager_volumes{state=\"failing\"}) whose last attempt "
             "failed on an API answer about an object they read, by its HTTP code and reason: "
             "403 Forbidden (the daemon's identity may not read it), 404 NotFound (a non-optional "
             "object missing)",
             MetricType::kGauge);
  MetricFamily total_volumes = Family(
      "volume_manager_total_volumes",
      "Volumes in the desired and actual state of the world, by plugin (the kubelet's metric)",
      MetricType::kGauge);
  MetricFamily busy = Family("volumemanager_loop_iteration_busy_seconds",
                             "Time each event-loop iteration spent running callbacks, i.e. how "
                             "late an event could be served",
                             MetricType::kHistogram);
  MetricFamily longest = Family("volumemanager_loop_longest_iteration_seconds",
                                "The busiest event-loop iteration since start", MetricType::kGauge);
  MetricFamily build = Family("volumemanager_build_info", "The daemon's version; the value is 1",
                              MetricType::kGauge);
  MetricFamily journal_state =
      Family("volumemanager_ownership_journal_state",
             "1 for the ownership journal's state, 0 for the others: not_opened (a standby: "
             "opened once the node's lock is held), trusted (read, or new), "
             "rejected (unreadable or corrupt: nothing owned), other_root_dir (kept for another "
             "--root-dir: nothing owned), waiting_for_filesystem (the root dir is not on the "
             "filesystem the journal was recorded on: nothing reconciled yet)",
             MetricType::kGauge);
  MetricFamily reload_actions =
      Family("volumemanager_reload_actions_total",
             "Reload actions (volumemanager.io/reload) by kind (http, signal) and result: success, "
             "failure (after its retries), refused (not the pod's own address, signals not "
             "enabled, pod gone or changed), skipped (pod terminating or not running, or every "
             "container started after the change)",
             MetricType::kCounter);
  MetricFamily reload_latency =
      Family("volumemanager_reload_duration_seconds",
             "Seconds from the first object change a reload covered (or the kubelet's swap seen) "
             "to its last action answered, reload-delay included",
             MetricType::kHistogram);
  MetricFamily reload_errors =
      Family("volumemanager_reload_annotation_errors",
             "Pods whose reload annotations were refused (see the log, Events or /debug/state)",
             MetricType::kGauge);
  MetricFamily reload_policy =
      Family("volumemanager_reload_policy_refusals",
             "Pods whose reload actions are never run by the daemon's rules, not their fault "
             "(cluster mode: a hostNetwork pod's HTTP actions; /debug/state says which)",
             MetricType::kGauge);
  MetricFamily lock_error =
      Family("volumemanager_leader_election_lock_error",
             "1 while the node's lock cannot be used at all (its last attempt failed with an error "
             "other than being held by another daemon: see /debug/state), else 0; absent "
             "without --leader-elect",
             MetricType::kGauge);

  MetricFamily tmpfs_bytes =
      Family("volumemanager_tmpfs_bytes",
             "Memory the daemon holds in tmpfs-backed volumes: the pages (each file rounded up to "
             "4 KiB) of the live version of each volume on a tmpfs that the daemon set up (self "
             "ownership) or whose live version it wrote (beside the kubelet). Charged to the "
             "daemon's memory cgroup like its own RSS; not in process_resident_memory_bytes",
             MetricType::kGauge);
  MetricFamily leader = Family("volumemanager_leader_election_leader",
                               "1 while this daemon holds the node's lock (it writes), 0 while it "
                               "stands by; absent without --leader-elect",
                               MetricType::kGauge);
  const VolumeManager* manager = daemon_->volume_manager();
  tmpfs_bytes.values.push_back(
      {{}, manager != nullptr ? static_cast<double>(manager->actual().tmpfs_bytes()) : 0.0});
  if (const VolumeManager* vm = manager) {
    const reload::ReloadController& reload = vm->reload();
    for (const auto& [key, count] : reload.action_counts()) {
      reload_actions.values.push_back(
          {{{"action", key.first}, {"result", key.second}}, static_cast<double>(count)});
    }
    reload_latency.histograms.push_back({{}, reload.latency()});
    reload_errors.values.push_back({{}, static_cast<double>(reload.annotation_errors())});
    reload_policy.values.push_back({{}, static_cast<double>(reload.policy_refusals())});
    const OperationMetrics& m = vm->reconciler().metrics();
    for (const auto& [key, h] : m.operations()) {
      const auto& [plugin, operation, status] = key;
      operations.histograms.push_back(
          {{{"operation_name", operation}, {"status", status}, {"volume_plugin", plugin}}, h});
    }
    for (const auto& [plugin, h] : m.propagation()) {
      propagation.histograms.push_back({{{"volume_plugin", plugin}}, h});
    }
    for (const auto& [key, count] : m.failures()) {
      const auto& [operation, plugin, reason] = key;
      errors.values.push_back(
          {{{"operation_name", operation}, {"reason", reason}, {"volume_plugin", plugin}},
           static_cast<double>(count)});
    }
    const ReconcilerStats& st = vm->stats();
    static_assert(sizeof(ReconcilerStats) == 14 * sizeof(long),
                  "a new ReconcilerStats counter needs its outcome below (and in README.md)");
    for (const auto& [outcome, value] : std::initializer_list<std::pair<const char*, long>>{
             {"mounted", st.mounts_ok},
             {"refreshed", st.refreshes_ok},
             {"mount_failed", st.mounts_failed},
             {"version_published", st.versions_published},
             {"unchanged", st.remounts_unchanged},
             {"torn_down", st.teardowns_ok},
             {"teardown_failed", st.teardowns_failed},
             {"left_in_place", st.teardowns_not_owned},
             {"cleanup_failed", st.cleanups_failed},
             {"kubelet_setup_pending", st.kubelet_setup_checks},
             {"released_to_kubelet", st.released_to_kubelet},
             {"swap_verified", st.swaps_verified},
             {"foreign_swap", st.foreign_swaps},
             {"waited_for_first_read", st.waits_for_first_read}}) {
      outcomes.values.push_back({{{"outcome", outcome}}, static_cast<double>(value)});
    }
    const SubPathCopyStats& sp = vm->reconciler().subpath_stats();
    for (const auto& [result, value] :
         std::initializer_list<std::pair<const char*, long>>{{"updated", sp.updated},
                                                             {"current", sp.current},
                                                             {"not_bound", sp.not_bound},
                                                             {"refused", sp.refused},
                                                             {"failed", sp.failed}}) {
      subpath_copies.values.push_back({{{"result", result}}, static_cast<double>(value)});
    }

    long failing = 0;
    std::map<std::pair<int, std::string>, long> failing_by_api_status;
    std::map<std::string, long> desired_by_plugin, actual_by_plugin;
    std::set<VolumeKey> failing_keys;
    for (const auto& [key, d] : vm->desired().volumes()) {
      ++desired_by_plugin[std::string(d.plugin->Name())];
      const ExponentialBackoff* backoff = vm->executor().Backoff(key);
      if (backoff != nullptr && backoff->delay().count() > 0) {
        ++failing;
        failing_keys.insert(key);
        const base::Status last_error = vm->executor().LastErrorStatus(key);
        if (last_error.api_code() != 0) {
          ++failing_by_api_status[{last_error.api_code(), last_error.api_reason()}];
        }
      }
    }
    long mounted = 0;
    for (const auto& [key, v] : vm->actual().volumes()) {
      ++actual_by_plugin[PluginNameOfDir(v.plugin_dir())];
      if (failing_keys.count(key) == 0) ++mounted;
    }
    volumes.values.push_back({{{"state", "mounted"}}, static_cast<double>(mounted)});
    volumes.values.push_back({{{"state", "failing"}}, static_cast<double>(failing)});
    volumes.values.push_back({{{"state", "waiting_for_kubelet"}},
                              static_cast<double>(vm->reconciler().waiting_for_kubelet_count())});
    volumes.values.push_back({{{"state", "left_to_kubelet"}},
                              static_cast<double>(vm->populator().left_to_kubelet().size())});
    volumes.values.push_back({{{"state", "left_to_kubelet_by_policy"}},
                              static_cast<double>(vm->populator().left_by_policy().size())});
    for (const auto& [status, n] : failing_by_api_status) {
      failing_by_status.values.push_back(
          {{{"code", std::to_string(status.first)}, {"reason", status.second}},
           static_cast<double>(n)});
    }
    for (const auto& [plugin, n] : desired_by_plugin) {
      total_volumes.values.push_back(
          {{{"plugin_name", plugin}, {"state", "desired_state_of_world"}}, static_cast<double>(n)});
    }
    for (const auto& [plugin, n] : actual_by_plugin) {
      total_volumes.values.push_back(
          {{{"plugin_name", plugin}, {"state", "actual_state_of_world"}}, static_cast<double>(n)});
    }
  }
  busy.histograms.push_back({{}, daemon_->stall_monitor().busy_histogram()});
  longest.values.push_back(
      {{}, std::chrono::duration<double>(daemon_->stall_monitor().longest()).count()});
  build.values.push_back({{{"compiler", __VERSION__}, {"version", base::kVersion}}, 1});
  const std::string state = daemon_->OwnershipJournalState();
  for (const char* s :
       {"not_opened", "trusted", "rejected", "other_root_dir", "waiting_for_filesystem"}) {
    journal_state.values.push_back({{{"state", s}}, state == s ? 1.0 : 0.0});
  }

  for (MetricFamily* f :
       {&operations, &propagation, &errors, &outcomes, &subpath_copies, &volumes,
        &failing_by_status, &total_volumes, &busy, &longest, &build, &journal_state,
        &reload_actions, &reload_latency, &reload_errors, &reload_policy, &tmpfs_bytes}) {
    out.push_back(std::move(*f));
  }
  if (daemon_->observer() != nullptr) {
    MetricFamily differing =
        Family("volumemanager_observe_volumes_differing",
               "Observe mode (--observe): volumes whose disk differs from what a normal run would "
               "leave, by reason: not_set_up (would set up), content (would publish), modes (only "
               "modes or owners differ: left as they are), tear_down (would remove)",
               MetricType::kGauge);
    std::map<std::string, long> by_reason = {
        {"not_set_up", 0}, {"content", 0}, {"modes", 0}, {"tear_down", 0}};
    for (const auto& [key, o] : CurrentObservations(*daemon_)) {
      if (o.differs()) ++by_reason[o.reason];
    }
    for (const auto& [reason, n] : by_reason) {
      differing.values.push_back({{{"reason", reason}}, static_cast<double>(n)});
    }
    out.push_back(std::move(differing));
  }
  if (const leaderelection::LeaderElector* elector = daemon_->elector()) {
    lock_error.values.push_back({{}, elector->last_error().empty() ? 0.0 : 1.0});
    out.push_back(std::move(lock_error));
    leader.values.push_back({{}, elector->IsLeader() ? 1.0 : 0.0});
    out.push_back(std::move(leader));
  }
  MetricFamily manifest_errors = Family(
      "volumemanager_manifest_errors",
      "Manifest files rejected: there, but unreadable or invalid past the settle time (listed in "
      "/debug/state), by source (pods, objects)",
      MetricType::kGauge);
  for (const auto& [source, rejected] : daemon_->RejectedManifests()) {
    manifest_errors.values.push_back({{{"source", source}}, static_cast<double>(rejected.size())});
  }
  out.push_back(std::move(manifest_errors));
  daemon_->AddSourceMetrics(&out);
  if (extra_metrics_) extra_metrics_(&out);
  return out;
}

namespace {

// "apiStatus": {"code": 403, "reason": "Forbidden"} when `error` is an API answer (nothing else).
void AddApiStatus(const base::Status& error, nlohmann::json* out) {
  if (error.api_code() == 0) return;
  (*out)["apiStatus"] = {{"code", error.api_code()}, {"reason", error.api_reason()}};
}

}  // namespace

nlohmann::json AdminPublisher::BuildDebugState() const {
  nlohmann::json state = nlohmann::json::object();
  nlohmann::json volumes = nlohmann::json::array();
  const VolumeManager* vm = daemon_->volume_manager();
  if (vm == nullptr) {  // a standby: not holding the node's lock yet
    state["volumes"] = volumes;
    AddRejectedManifests(&state);
    AddLockState(&state);
    return state;
  }
  cache::ObjectManager* objects = daemon_->objects_for_debug();
  std::set<VolumeKey> keys;
  for (const auto& [key, d] : vm->desired().volumes()) keys.insert(key);
  for (const auto& [key, v] : vm->actual().volumes()) keys.insert(key);
  const std::map<VolumeKey, VolumeObservation> observations = CurrentObservations(*daemon_);
  for (const auto& [key, o] : observations) keys.insert(key);
  if (daemon_->observer() != nullptr) state["observe"] = true;
  for (const VolumeKey& key : keys) {
    const DesiredVolume* d = vm->desired().Find(key);
    const MountedVolume* m = vm->actual().Find(key);
    nlohmann::json v;
    v["podUID"] = key.pod_uid;
    v["volume"] = key.volume_name;
    v["desired"] = d != nullptr;
    if (d != nullptr) {
      v["pod"] = d->pod->metadata.NamespacedName();
      v["plugin"] = std::string(d->plugin->Name());
      v["uniqueName"] = d->unique_name(key);
      nlohmann::json refs = nlohmann::json::array();
      for (const kube::ObjectRef& ref : d->objects) {
        nlohmann::json o;
        o["kind"] = ref.kind == kube::ObjectKind::kConfigMap ? "ConfigMap" : "Secret";
        o["namespace"] = ref.namespace_;
        o["name"] = ref.name;
        // What a get returns now: only the metadata, never the data.
        base::Result<cache::ObjectRevision> revision = objects->GetRevision(ref);
        if (!revision.ok()) {
          o["error"] = revision.status().message();
          AddApiStatus(revision.status(), &o);
        } else if (!revision->exists()) {
          o["exists"] = false;
        } else {
          o["exists"] = true;
          const std::string& rv = revision->config_map
                                      ? revision->config_map->metadata.resource_version
                                      : revision->secret->metadata.resource_version;
          o["resourceVersion"] = rv.empty() ? nlohmann::json() : nlohmann::json(rv);  // unknown
        }
        refs.push_back(std::move(o));
      }
      v["objects"] = std::move(refs);
      // Its service account tokens: times and errors, never a token.
      if (!d->tokens.empty()) {
        nlohmann::json tokens = nlohmann::json::array();
        for (const kube::TokenRef& ref : d->tokens) {
          nlohmann::json t = {{"serviceAccount", ref.namespace_ + "/" + ref.service_account},
                              {"audience", ref.audience},
                              {"expirationSeconds", ref.expiration_seconds}};
          const std::optional<cache::TokenStatus> status =
              vm->tokens() != nullptr ? vm->tokens()->Status(ref) : std::nullopt;
          if (!status) {
            t["error"] =
                vm->tokens() != nullptr ? "not registered" : "no token source (standalone)";
          } else {
            t["hasToken"] = status->has_token;
            t["requesting"] = status->requesting;
            if (status->has_token) {
              t["expiresAt"] = Rfc3339(status->expires_at);
              t["refreshAt"] = Rfc3339(status->refresh_at);
            }
            t["error"] =
                status->last_error.empty() ? nlohmann::json() : nlohmann::json(status->last_error);
          }
          tokens.push_back(std::move(t));
        }
        v["serviceAccountTokens"] = std::move(tokens);
      }
    } else if (m != nullptr) {
      v["plugin"] = PluginNameOfDir(m->plugin_dir());
    }
    if (m != nullptr) {
      nlohmann::json actual;
      actual["dir"] = VolumeDir(vm->root_dir(), key.pod_uid, m->plugin_dir(), key.volume_name);
      actual["version"] = m->ts_dir;
      actual["uncertain"] = m->uncertain;
      actual["remountRequired"] = m->remount_required;
      if (m->last_sync.time_since_epoch().count() != 0) actual["lastSync"] = Rfc3339(m->last_sync);
      v["actual"] = std::move(actual);
    } else {
      v["actual"] = nullptr;
    }
    if (daemon_->observer() != nullptr) {
      // Observe mode: what a normal run would do with it (names only, never bytes).
      auto it = observations.find(key);
      if (it == observations.end()) {
        v["observe"] = {{"state", "not_compared"}};
      } else {
        const VolumeObservation& o = it->second;
        v["observe"] = {{"state", o.differs() ? "differs" : "current"},
                        {"reason", o.reason.empty() ? nlohmann::json() : nlohmann::json(o.reason)},
                        {"wouldWrite", o.would_write()},
                        {"added", o.added},
                        {"removed", o.removed},
                        {"changed", o.changed},
                        {"modes", o.modes},
                        {"liveVersion", o.live_version.empty() ? nlohmann::json()
                                                               : nlohmann::json(o.live_version)},
                        {"at", Rfc3339(o.at)}};
        if (d == nullptr && !o.pod.empty()) v["pod"] = o.pod;
      }
    }
    const base::Status last_error = vm->executor().LastErrorStatus(key);
    v["lastError"] = last_error.message();
    AddApiStatus(last_error, &v);
    v["inFlight"] = vm->executor().InFlight(key);
    // Where the reconciler has the volume (reconciler/volume_record.h, VolumeRecord): idle,
    // fetching, writing...
    const VolumeRecord* record = vm->reconciler().Find(key);
    v["phase"] =
        record != nullptr ? nlohmann::json(VolumePhaseName(record->phase)) : nlohmann::json();
    // The pod's subPath files of the volume after its last write (annotated pods only).
    if (record != nullptr && !record->subpath_copies.empty()) {
      nlohmann::json copies = nlohmann::json::array();
      for (const SubPathCopy& c : record->subpath_copies) {
        nlohmann::json j = {
            {"container", c.container},
            {"index", c.index},
            {"subPath", c.sub_path},
            {"result", SubPathResultName(c.result)},
            {"version", c.version.empty() ? nlohmann::json() : nlohmann::json(c.version)},
            {"boundVersion",
             c.bound_version.empty() ? nlohmann::json() : nlohmann::json(c.bound_version)}};
        if (!c.reason.empty()) j["reason"] = c.reason;
        copies.push_back(std::move(j));
      }
      v["subPathCopies"] = std::move(copies);
    }
    const ExponentialBackoff* backoff = vm->executor().Backoff(key);
    if (backoff != nullptr && backoff->delay().count() > 0) {
      v["backoff"] = {{"delay", config::FormatGoDuration(backoff->delay())},
                      {"until", Rfc3339(backoff->retry_at())}};
    } else {
      v["backoff"] = nullptr;
    }
    volumes.push_back(std::move(v));
  }
  state["volumes"] = std::move(volumes);
  nlohmann::json left = nlohmann::json::array();
  for (const VolumeKey& key : vm->populator().left_to_kubelet()) {
    left.push_back({{"podUID", key.pod_uid.str()}, {"volume", key.volume_name}});
  }
  for (const auto& [key, refusal] : vm->populator().left_by_policy()) {
    left.push_back(
        {{"podUID", key.pod_uid.str()}, {"volume", key.volume_name}, {"policy", refusal}});
  }
  state["leftToKubelet"] = std::move(left);
  // Reload actions: per pod with a reload annotation, what it asks, what is pending and which
  // volumes that waits for, and its last run (results, the objects' versions it covered, the
  // triggering volumes failing then; never data or answer bodies).
  nlohmann::json reloads = nlohmann::json::array();
  for (const auto& [uid, view] : vm->reload().View()) {
    nlohmann::json r;
    r["podUID"] = uid;
    r["pod"] = view.pod;
    r["actions"] = view.actions;
    r["annotationError"] =
        view.annotation_error.empty() ? nlohmann::json() : nlohmann::json(view.annotation_error);
    r["policyRefusal"] =
        view.policy_refusal.empty() ? nlohmann::json() : nlohmann::json(view.policy_refusal);
    r["pendingVolumes"] = view.pending_volumes;
    r["waitingFor"] = view.waiting_for;
    r["running"] = view.running;
    if (view.last) {
      r["last"] = {{"at", Rfc3339(view.last->at)},  {"ok", view.last->ok},
                   {"results", view.last->results}, {"volumes", view.last->volumes},
                   {"objects", view.last->objects}, {"failingVolumes", view.last->failing_volumes}};
    } else {
      r["last"] = nullptr;
    }
    reloads.push_back(std::move(r));
  }
  state["reloads"] = std::move(reloads);
  // Volume dirs found not to be the ones the daemon made (a dir bound over their plugin dir, or
  // another inode in their place): released and left in place, for a person to look at.
  nlohmann::json foreign = nlohmann::json::array();
  if (const OwnershipJournal* journal = vm->journal(); journal != nullptr) {
    for (const OwnershipJournal::ForeignVolumeDir& f : journal->ForeignVolumeDirs()) {
      foreign.push_back({{"path", f.path}, {"reason", f.reason}});
    }
  }
  state["foreignVolumeDirs"] = std::move(foreign);
  AddRejectedManifests(&state);
  AddLockState(&state);
  return state;
}

void AdminPublisher::AddRejectedManifests(nlohmann::json* out) const {
  nlohmann::json rejected = nlohmann::json::array();
  for (const auto& [source, files] : daemon_->RejectedManifests()) {
    for (const manifestdir::RejectedManifest& r : files) {
      rejected.push_back({{"source", source}, {"file", r.file}, {"reason", r.reason}});
    }
  }
  (*out)["rejectedManifests"] = std::move(rejected);
}

void AdminPublisher::AddLockState(nlohmann::json* out) const {
  nlohmann::json& state = *out;
  nlohmann::json readiness = nlohmann::json::array();
  for (const server::ReadinessCheck& c : daemon_->ReadinessChecks()) {
    readiness.push_back({{"name", c.name}, {"ok", c.ok}});
  }
  state["readiness"] = std::move(readiness);
  // The node's lock (--leader-elect): who holds it and, while the lock cannot be used at all (a
  // planted symlink, an API error), why: the daemon stays live and ready but writes nothing.
  if (const leaderelection::LeaderElector* elector = daemon_->elector()) {
    state["leaderElection"] = {
        {"lock", elector->lock()->Describe()},
        {"identity", elector->identity()},
        {"leader", elector->leader()},
        {"isLeader", elector->IsLeader()},
        {"lastError",
         elector->last_error().empty() ? nlohmann::json() : nlohmann::json(elector->last_error())}};
  }
}

}  // namespace volumemanager
