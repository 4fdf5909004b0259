#include "cmd/volumemanager/daemon.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "base/catch_all.h"
#include "base/redacted_url.h"
#include "base/version.h"
#include "config/go_duration.h"
#include "kube/quantity.h"
#include "leaderelection/file_lock.h"

namespace volumemanager {

base::Result<kube::ResourceList> NodeAllocatable(const config::DaemonConfig& config) {
  std::map<std::string, std::string> text = config.node_allocatable;
  if (!text.count("cpu")) text["cpu"] = std::to_string(::sysconf(_SC_NPROCESSORS_ONLN));
  if (!text.count("memory")) {
    text["memory"] = std::to_string(static_cast<long long>(::sysconf(_SC_PHYS_PAGES)) *
                                    ::sysconf(_SC_PAGE_SIZE));
  }
  if (!text.count("ephemeral-storage")) {
    struct statvfs st {};
    if (::statvfs(config.root_dir.c_str(), &st) == 0) {
      text["ephemeral-storage"] =
          std::to_string(static_cast<unsigned long long>(st.f_blocks) * st.f_frsize);
    }
  }
  kube::ResourceList out;
  for (const auto& [name, value] : text) {
    auto q = kube::Quantity::Parse(value);
    if (!q.ok()) {
      return base::Status::Error("--node-allocatable: " + name + "=" + value + ": " +
                                 q.status().message());
    }
    out[name] = *q;
  }
  return out;
}

Daemon::Daemon(uv_loop_t* loop, config::DaemonConfig config)
    : loop_(loop), config_(std::move(config)) {}

Daemon::~Daemon() {
  // The sources refer to the PodConfig and the volume manager: stop them first.
  if (started_) {
    StopSources();
    stall_monitor_.Stop();
    trimmer_.Stop();
  }
}

std::optional<Daemon::StartError> Daemon::Start() {
  started_ = true;
  auto allocatable = NodeAllocatable(config_);
  if (!allocatable.ok()) return StartError{2, allocatable.status().message()};
  HeapTrimmerOptions trim;
  trim.quiet = heap_trim_quiet_;
  trim.busy = [this] { return manager_ != nullptr && manager_->executor().in_flight() > 0; };
  trimmer_.Start(loop_, std::move(trim));
  // Read-only until the node's lock is held (Start's contract in daemon.h). A root dir that could
  // not be created later fails now, with the error mkdir would give.
  if (struct stat st{}; ::stat(config_.root_dir.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {  // created once the lock is held: its parent must exist
      const size_t slash = config_.root_dir.find_last_of('/');
      const std::string parent = slash == std::string::npos ? "."
                                 : slash == 0               ? "/"
                                                            : config_.root_dir.substr(0, slash);
      err = ::stat(parent.c_str(), &st) == 0 ? 0 : errno;
    }
    if (err != 0) {
      return StartError{1, "--root-dir: mkdir " + config_.root_dir + ": " + std::strerror(err)};
    }
  }
  // The object source first: credentials that cannot be loaded end the start before anything is
  // created on disk.
  registry_ = plugins::PluginRegistry::NewDefault();
  if (auto error = StartObjectSource()) return error;

  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  identity_ = leaderelection::NewIdentity(host);
  gate_ = std::make_unique<WriteGate>(identity_);
  // Pods are merged from the start; the volume manager, created once the lock is held, gets
  // them all then (StartWriting).
  pods_ = std::make_unique<podconfig::PodConfig>([this](const podconfig::PodUpdate& u) {
    if (manager_) manager_->OnPodUpdate(u);
    trimmer_.Request();
  });

  std::vector<std::string> pod_sources;
  if (config::ClusterMode(config_)) pod_sources.push_back("the API server");
  if (!config_.pod_manifest_path.empty()) pod_sources.push_back(config_.pod_manifest_path);
  if (!config_.manifest_url.empty()) {
    pod_sources.push_back(base::RedactedUrl(config_.manifest_url));
  }
  std::string pods_from;
  for (const std::string& source : pod_sources) {
    pods_from += (pods_from.empty() ? "" : " and ") + source;
  }
  spdlog::info(
      "volumemanager {} starting: node \"{}\", root dir {}, state dir {}, pods from {}, objects "
      "from {}, strategy {}, sync frequency {}, volume ownership {}",
      base::kVersion, config_.node_name, config_.root_dir, config_.state_dir, pods_from,
      config::ClusterMode(config_)           ? "the API server"
      : config_.object_manifest_path.empty() ? "(none)"
                                             : config_.object_manifest_path,
      cache::ChangeDetectionStrategyName(config_.strategy),
      config::FormatGoDuration(config_.sync_frequency),
      config::VolumeOwnershipName(config_.volume_ownership));
  if (config_.observe) {
    StartObserving();
  } else if (auto error = StartElection()) {
    return error;
  }
  if (auto error = StartPodSources()) return error;
  // The start-up reads (every object and pod manifest decoded) are bulk work.
  trimmer_.Request();

  if (base::Status s = stall_monitor_.Start(
          loop_,
          std::chrono::duration_cast<std::chrono::microseconds>(config_.loop_stall_log_threshold));
      !s.ok()) {
    spdlog::warn("{}; event-loop stalls are not measured", s.message());
  }
  return std::nullopt;
}

std::optional<Daemon::StartError> Daemon::StartWriting() {
  // As the kubelet does at start: the root dir and its pods dir exist from now on.
  for (const std::string& dir : {config_.root_dir, config_.root_dir + "/pods"}) {
    if (::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
      return StartError{1, "--root-dir: mkdir " + dir + ": " + std::strerror(errno)};
    }
  }
  // A link planted as the pods dir is never followed: every volume below it fails, saying so.
  if (struct stat st{};
      ::lstat((config_.root_dir + "/pods").c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    spdlog::error(
        "{}/pods is {}, not a directory: it is not followed, and every volume below it fails until "
        "it is a directory again",
        config_.root_dir, S_ISLNK(st.st_mode) ? "a symlink" : "not a directory");
  }

  // What the daemon owns under the root dir: only what its journal lists, never what it finds.
  // Opened (and rewritten) only now: a predecessor still holding the lock appends to it until
  // it lets go.
  if (auto error = OpenOwnershipJournal()) return error;
  StartVolumeManager();
  return std::nullopt;
}

void Daemon::StartObserving() {
  spdlog::info(
      "observe mode: writing nothing. No node lock is taken (no leader election, not even the "
      "file lock in {}), no dir is created, the ownership journal is only read, no Event is "
      "posted, no reload action and no subPath copy runs, no tmpfs is mounted; each volume that "
      "a normal run would change is logged (\"Observe: ...\"), in /debug/state and in "
      "volumemanager_observe_volumes_differing",
      config_.state_dir);
  OwnershipJournal::OpenResult journal =
      OwnershipJournal::ReadOnly(config_.state_dir, config_.root_dir);
  journal_loaded_ = journal.loaded;
  spdlog::info("observe mode: ownership journal {} read ({} volumes and dirs owned){}{}",
               journal.journal->file(), journal.journal->Entries().size(),
               journal.detail.empty() ? "" : ": ", journal.detail);
  journal_ = std::move(journal.journal);
  observer_ = std::make_shared<ObservingDisk>();
  StartVolumeManager();
}

void Daemon::StartVolumeManager() {
  auto allocatable = NodeAllocatable(config_);  // checked in Start
  VolumeManagerOptions options;
  options.root_dir = config_.root_dir;
  options.sync_frequency =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.sync_frequency);
  options.durable = config_.fsync;
  options.tmpfs = config_.tmpfs;
  if (allocatable.ok()) options.node_allocatable = *allocatable;
  options.journal = journal_.get();
  options.unpublished_grace =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.unpublished_grace);
  options.kubelet_owns_volumes = config_.volume_ownership == config::VolumeOwnership::kKubelet;
  options.writes_allowed_at_start = holding_ || config_.observe;
  options.writer_identity = identity_;
  options.write_gate = config_.observe ? nullptr : gate_.get();
  options.observe = config_.observe;
  options.disk = observer_;
  options.reload.http.max_concurrent = static_cast<size_t>(config_.reload_max_concurrent);
  options.reload.http.timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.reload_timeout);
  ConfigureVolumeManager(options);
  manager_ = std::make_unique<VolumeManager>(loop_, options, object_manager(), registry_.get(),
                                             [this] { return pods_->AllSourcesSeen(); });
  // The pods merged while waiting for the lock, as each source last delivered them.
  for (const std::string& source : pods_->sources()) {
    podconfig::PodUpdate adds{podconfig::PodOp::kAdd, {}, source};
    podconfig::PodUpdate deletes{podconfig::PodOp::kDelete, {}, source};
    for (const auto& [uid, pod] : pods_->PodsOf(source)) {
      (pod->metadata.deletion_timestamp ? deletes : adds).pods.push_back(pod);
    }
    if (!adds.pods.empty()) manager_->OnPodUpdate(adds);
    if (!deletes.pods.empty()) manager_->OnPodUpdate(deletes);
  }
  manager_->Start();
  trimmer_.Request();
}

std::optional<Daemon::StartError> Daemon::StartElection() {
  // The state dir holds the lock file: the one thing created before the lock is held.
  if (::mkdir(config_.state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return StartError{1, "--state-dir: mkdir " + config_.state_dir + ": " + std::strerror(errno)};
  }
  const bool leases = config_.leader_election.leader_elect &&
                      config_.leader_election.resource_lock == leaderelection::LockType::kLeases;
  // The flock is always taken: the kernel's exclusion between the processes of this node, whatever
  // other lock is configured (a rollout that changes the lock type still has one writer).
  auto file_lock = std::make_unique<leaderelection::FileLock>(config_.state_dir + "/" +
                                                              leaderelection::kFileLockName);
  const std::string file_what = file_lock->Describe();
  leaderelection::LeaderElectorOptions file_options;
  file_options.identity = identity_;
  // The --leader-elect-* timing when the flock is the configured lock; the file lock's defaults
  // beside a Lease.
  file_options.timing = config_.leader_election.resource_lock == leaderelection::LockType::kFile
                            ? config_.leader_election_timing
                            : leaderelection::DefaultTiming(leaderelection::LockType::kFile);
  leaderelection::LeaderCallbacks file_callbacks;
  file_callbacks.on_term_extended = [this](std::chrono::steady_clock::time_point deadline) {
    file_deadline_ = deadline;
    if (file_held_) OnLockChanged();
  };
  file_callbacks.on_started_leading = [this, leases] {
    file_held_ = true;
    if (leases) {
      lease_elector_->Start();
    } else {
      OnLockChanged();
    }
  };
  file_callbacks.on_stopped_leading = [this, file_what] {
    file_held_ = false;
    OnLockChanged();
    if (lease_elector_) lease_elector_->Stop();  // releases the Lease too
    if (stopping_) return;
    if (manager_ != nullptr) {
      LostAfterWriting(file_what);
      return;
    }
    spdlog::warn("lost the node's lock ({}): no new writes until it is held again", file_what);
    elector_->Start();  // campaign again
  };
  file_callbacks.on_new_leader = [this](const std::string& leader) {
    if (!leader.empty() && leader != identity_) {
      spdlog::info("the node's lock is held by {}: waiting, writing nothing", leader);
    }
  };
  auto elector = leaderelection::LeaderElector::Create(loop_, std::move(file_lock), file_options,
                                                       std::move(file_callbacks));
  if (!elector.ok()) return StartError{2, elector.status().message()};
  elector_ = std::move(elector).value();

  std::string what = file_what;
  if (leases) {
    auto lease = MakeLeaseLock();
    if (!lease.ok()) return StartError{2, lease.status().message()};
    const std::string lease_what = (*lease)->Describe();
    what += " and " + lease_what;
    leaderelection::LeaderElectorOptions lease_options;
    lease_options.identity = identity_;
    lease_options.timing = config_.leader_election_timing;
    leaderelection::LeaderCallbacks callbacks;
    callbacks.on_term_extended = [this](std::chrono::steady_clock::time_point deadline) {
      lease_deadline_ = deadline;
      if (lease_held_) OnLockChanged();
    };
    callbacks.on_started_leading = [this] {
      lease_held_ = true;
      OnLockChanged();
    };
    callbacks.on_stopped_leading = [this, lease_what] {
      lease_held_ = false;
      OnLockChanged();
      if (stopping_ || !file_held_) return;
      if (manager_ != nullptr) {
        LostAfterWriting(lease_what);
        return;
      }
      spdlog::warn("lost the node's lock ({}): no new writes until it is held again", lease_what);
      lease_elector_->Start();  // campaign again
    };
    callbacks.on_new_leader = [this](const std::string& leader) {
      if (!leader.empty() && leader != identity_) {
        spdlog::info("the node's lock is held by {}: waiting, writing nothing", leader);
      }
    };
    auto lease_elector = leaderelection::LeaderElector::Create(loop_, std::move(lease).value(),
                                                               lease_options, std::move(callbacks));
    if (!lease_elector.ok()) return StartError{2, lease_elector.status().message()};
    lease_elector_ = std::move(lease_elector).value();
  }
  // At debug: "holding the node's lock" or "the node's lock is held by" follows at info.
  spdlog::debug("acquiring the node's lock ({}) as {} before writing anything", what, identity_);
  elector_->Start();
  return std::nullopt;
}

void Daemon::LostAfterWriting(const std::string& what) {
  // Another daemon may hold the lock now and rewrite the ownership journal (a new file: this
  // process's descriptor would append to the old one) and the volumes: what this process knows
  // of both is stale from here on. It writes nothing more and restarts, reading them afresh.
  const StartError error{kExitLostLock,
                         "lost the node's lock (" + what +
                             ") after writing: no new writes; restarting to read the ownership "
                             "journal and the volumes afresh"};
  spdlog::error("{}", error.message);
  if (fatal_) fatal_(error);
}

void Daemon::OnLockChanged() {
  const bool held = file_held_ && (lease_elector_ == nullptr || lease_held_);
  if (held) {
    // Open until the earliest end of a term; each renewal moves it.
    gate_->OpenUntil(lease_elector_ ? std::min(file_deadline_, lease_deadline_) : file_deadline_);
  } else {
    gate_->Close();
  }
  if (held == holding_) return;
  holding_ = held;
  if (!held) {
    if (manager_) manager_->SetWritesAllowed(false);
    return;
  }
  spdlog::info("holding the node's lock ({}{}) as {}: writing", elector_->lock()->Describe(),
               lease_elector_ ? " and " + lease_elector_->lock()->Describe() : "", identity_);
  if (manager_ == nullptr && !stopping_) {
    if (before_writing_ && !std::exchange(before_writing_, nullptr)()) return;
    if (stopping_) return;
    if (auto error = StartWriting()) {
      spdlog::error("{}", error->message);
      gate_->Close();
      holding_ = false;
      if (fatal_) fatal_(*error);
      return;
    }
  }
  if (manager_) manager_->SetWritesAllowed(true);
}

std::optional<Daemon::StartError> Daemon::StartObjectSource() {
  objects_ = std::make_unique<cache::LocalObjectStore>();
  if (!config_.object_manifest_path.empty()) {
    cache::LocalObjectStoreOptions options;
    options.dir = config_.object_manifest_path;
    options.strategy = config_.strategy;
    options.cache_ttl =
        std::chrono::duration_cast<std::chrono::milliseconds>(config_.object_cache_ttl);
    options.settle =
        std::chrono::duration_cast<std::chrono::milliseconds>(config_.manifest_settle_time);
    if (base::Status s = objects_->Start(loop_, options); !s.ok()) {
      return StartError{2, "--object-manifest-path: " + s.message()};
    }
  }
  objects_->SetChangeHandler([this](const kube::ObjectRef& ref) { OnObjectChanged(ref); });
  return std::nullopt;
}

cache::ObjectManager* Daemon::object_manager() { return objects_.get(); }

std::map<std::string, std::vector<manifestdir::RejectedManifest>> Daemon::RejectedManifests()
    const {
  std::map<std::string, std::vector<manifestdir::RejectedManifest>> out;
  out["pods"] = file_source_.Rejected();
  out["objects"] = objects_ ? objects_->Rejected() : std::vector<manifestdir::RejectedManifest>{};
  return out;
}

void Daemon::ApplyLiveConfig(const config::DaemonConfig& config) {
  config_.sync_frequency = config.sync_frequency;
  config_.object_cache_ttl = config.object_cache_ttl;
  config_.event_qps = config.event_qps;
  config_.event_burst = config.event_burst;
  config_.log_format = config.log_format;
  config_.verbosity = config.verbosity;
  if (manager_) {
    manager_->SetSyncFrequency(
        std::chrono::duration_cast<std::chrono::milliseconds>(config.sync_frequency));
  }
}

void Daemon::OnObjectChanged(const kube::ObjectRef& object) {
  if (manager_) manager_->OnObjectChanged(object);
  trimmer_.Request();
}

void Daemon::OnTokenChanged(const kube::TokenRef& token) {
  if (manager_) manager_->OnTokenChanged(token);
}

std::optional<Daemon::StartError> Daemon::StartPodSources() {
  // Sources register before any delivers, so "all sources seen" waits for every one of them.
  podconfig::PodConfig::Sink file_sink, http_sink;
  if (!config_.pod_manifest_path.empty()) file_sink = pods_->RegisterSource(podconfig::kFileSource);
  if (!config_.manifest_url.empty()) http_sink = pods_->RegisterSource(podconfig::kHttpSource);
  if (file_sink) {
    podconfig::FileSourceOptions o;
    o.path = config_.pod_manifest_path;
    o.node_name = config_.node_name;
    o.settle = std::chrono::duration_cast<std::chrono::milliseconds>(config_.manifest_settle_time);
    if (base::Status s = file_source_.Start(loop_, o, file_sink); !s.ok()) {
      return StartError{2, "--pod-manifest-path " + config_.pod_manifest_path + ": " + s.message()};
    }
  }
  if (http_sink) {
    podconfig::HttpSourceOptions o;
    o.url = config_.manifest_url;
    o.node_name = config_.node_name;
    if (base::Status s = http_source_.Start(loop_, o, http_sink); !s.ok()) {
      return StartError{
          2, "--manifest-url " + base::RedactedUrl(config_.manifest_url) + ": " + s.message()};
    }
  }
  return std::nullopt;
}

void Daemon::StopSources() {
  file_source_.Stop();
  http_source_.Stop();
  if (objects_) objects_->Stop();
}

std::optional<Daemon::StartError> Daemon::OpenOwnershipJournal() {
  auto journal = OwnershipJournal::Open(config_.state_dir, config_.root_dir);
  if (!journal.ok()) return StartError{1, journal.status().message()};
  journal_loaded_ = journal->loaded;
  switch (journal->loaded) {
    case OwnershipJournal::Loaded::kNew:
      spdlog::info(
          "{}: this daemon owns no volume under {}; it records each volume it sets up from now on "
          "in {}",
          journal->detail, config_.root_dir, journal->journal->file());
      break;
    case OwnershipJournal::Loaded::kTrusted:
      if (!journal->detail.empty())
        spdlog::info("{}: {}", journal->journal->file(), journal->detail);
      break;
    case OwnershipJournal::Loaded::kRejected:
      spdlog::error(
          "ownership journal not trusted ({}): this daemon owns nothing under {} and will remove "
          "nothing it finds there; volumes it sets up from now on are recorded in {}",
          journal->detail, config_.root_dir, journal->journal->file());
      break;
    case OwnershipJournal::Loaded::kOtherRoot:
      spdlog::error(
          "ownership journal of another root dir ({}): --root-dir changed? This daemon owns "
          "nothing "
          "under {} and will remove nothing it finds there; volumes it sets up from now on are "
          "recorded in a new {}. To go back to the old root dir, stop the daemon and move the old "
          "journal back",
          journal->detail, config_.root_dir, journal->journal->file());
      break;
  }
  journal_ = std::move(journal->journal);
  return std::nullopt;
}

std::string Daemon::OwnershipJournalState() const {
  // A standby opens the journal only once it holds the node's lock.
  if (journal_ == nullptr) return "not_opened";
  if (manager_ != nullptr && !manager_->waiting_for_filesystem().empty()) {
    return "waiting_for_filesystem";
  }
  switch (journal_loaded_) {
    case OwnershipJournal::Loaded::kNew:
    case OwnershipJournal::Loaded::kTrusted:
      return "trusted";
    case OwnershipJournal::Loaded::kRejected:
      return "rejected";
    case OwnershipJournal::Loaded::kOtherRoot:
      return "other_root_dir";
  }
  return "trusted";
}

std::vector<server::ReadinessCheck> Daemon::ReadinessChecks() const {
  std::vector<server::ReadinessCheck> checks;
  // A standby (not holding the node's lock yet) has nothing to check: it reads the journal only
  // once it holds the lock, and is ready to take over once its pod sources are listed.
  checks.push_back(
      {"volume-reconstruction", manager_ != nullptr ? manager_->reconstructed() : !holding_,
       manager_ != nullptr && !manager_->waiting_for_filesystem().empty()
           ? "waiting for the root dir's recorded filesystem: " + manager_->waiting_for_filesystem()
           : "the start-up check of the volumes in the ownership journal has not finished"});
  if (manager_ != nullptr) {
    // Every desired volume's objects fetched and its content written or checked once (or the
    // attempt failed, or the kubelet has not set it up): what the object caches and the first
    // passes owe a new daemon before it counts as serving.
    size_t pending = 0;
    std::string examples;
    for (const auto& [key, desired] : manager_->desired().volumes()) {
      const MountedVolume* mounted = manager_->actual().Find(key);
      const VolumeRecord* record = manager_->reconciler().Find(key);
      const bool done =
          (mounted != nullptr && !mounted->uncertain) ||
          (record != nullptr && record->operation_ended && !manager_->executor().InFlight(key));
      if (done) continue;
      if (++pending <= 3) {
        examples += std::string(examples.empty() ? "" : ", ") + "pod " +
                    desired.pod->metadata.NamespacedName() + " volume " + key.volume_name;
      }
    }
    // Not holding the node's lock (another daemon writes, e.g. during a rolling update) is no
    // reason to be unready: the rollout would stall.
    checks.push_back(
        {"volumes-synced", pending == 0 || !manager_->writes_allowed(),
         std::to_string(pending) + " of " + std::to_string(manager_->desired().volumes().size()) +
             " volumes not yet fetched and written or checked since start (" + examples + ")"});
  }
  if (pods_ != nullptr) {
    for (const std::string& source : pods_->sources()) {
      std::string from = source == podconfig::kFileSource ? config_.pod_manifest_path
                         : source == podconfig::kHttpSource
                             ? base::RedactedUrl(config_.manifest_url)
                             : "the API server";
      checks.push_back({"pod-source-" + source, pods_->SourceSeen(source),
                        "no complete list of pods received yet from " + from});
    }
  }
  checks.push_back({"shutdown", !stopping_, "the daemon is stopping"});
  return checks;
}

bool Daemon::ready() const {
  return pods_ != nullptr && pods_->AllSourcesSeen() &&
         (manager_ != nullptr ? manager_->reconstructed() : started_ && !holding_);
}

void Daemon::Stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  StopSources();
  stall_monitor_.Stop();
  trimmer_.Stop();
  // Writes finish first; then the locks are released (the Lease, then the flock), so a successor
  // takes over at once.
  auto release = [this, done = std::move(done)]() mutable {
    if (elector_ == nullptr) {  // Start failed before the election
      if (done) done();
      return;
    }
    auto finish = [this, done = std::move(done)]() mutable {
      // Released. An elector may not be destroyed from its own callback: on the next loop
      // iteration, so that its handles are closed too when `done` runs.
      struct Next {
        uv_timer_t timer;
        Daemon* self;
        std::function<void()> done;
      };
      auto* next = new Next{{}, this, std::move(done)};
      uv_timer_init(loop_, &next->timer);
      next->timer.data = next;
      uv_timer_start(
          &next->timer,
          [](uv_timer_t* t) {
            auto* n = static_cast<Next*>(t->data);
            n->self->DestroyElector();
            if (n->done) base::CatchAll("stop", [&] { n->done(); }).IgnoreError();
            uv_close(reinterpret_cast<uv_handle_t*>(t),
                     [](uv_handle_t* h) { delete static_cast<Next*>(h->data); });
          },
          0, 0);
    };
    auto stop_file = [this, finish = std::move(finish)]() mutable {
      elector_->Stop(std::move(finish));
    };
    if (lease_elector_) {
      lease_elector_->Stop(std::move(stop_file));
    } else {
      stop_file();
    }
  };
  if (manager_) {
    manager_->Stop(std::move(release));
  } else {
    release();
  }
}

}  // namespace volumemanager
