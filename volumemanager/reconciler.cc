#include "volumemanager/reconciler.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>
#include <utility>

#include "atomicwriter/open_beneath.h"
#include "atomicwriter/path_validation.h"
#include "base/errno_error.h"
#include "base/unique_fd.h"
#include "base/strings.h"
#include "logging/structured_log.h"
#include "plugins/ownership_pass.h"
#include "volumemanager/volume_setup.h"

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

// The files of a volume's live version, read through its ..data link (pool thread): the volume
// dir opened beneath the root dir, `..data` read as a link that must name a version dir in it,
// and the file opened beneath that version dir; no other link is followed.
class LiveVersion final : public plugins::LiveContent {
 public:
  explicit LiveVersion(VolumeLocation location) : location_(std::move(location)) {}

  base::Result<std::string> Read(const std::string& path) override {
    const std::string full = location_.dir() + "/" + atomicwriter::kDataDirName + "/" + path;
    if (!vol_.valid()) {
      auto vol = OpenVolumeDir(location_);
      if (!vol.ok()) return vol.status();
      vol_ = std::move(vol).value();
    }
    char target[256];
    const ssize_t len =
        ::readlinkat(vol_.get(), atomicwriter::kDataDirName, target, sizeof(target));
    if (len < 0) return base::ErrnoError("readlink", location_.dir() + "/..data", errno);
    const std::string version(target, static_cast<size_t>(len));
    if (!version.starts_with("..") || version.find('/') != std::string::npos || version == "..") {
      return base::Status::Error(location_.dir() + "/..data: points at " + version +
                                 ", not a version dir of the volume");
    }
    const int fd = atomicwriter::OpenBeneath(
        vol_.get(), version + "/" + atomicwriter::CleanPath(path), O_RDONLY);
    if (fd < 0) return atomicwriter::OpenBeneathError(base::ShowNul(full), errno);
    std::string out;
    char buf[8192];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        return base::ErrnoError("read", full, err);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

 private:
  VolumeLocation location_;
  base::UniqueFd vol_;
};

std::string FormatTime(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatDelay(std::chrono::milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + "ms";
  const long ms = d.count();
  if (ms % 1000 == 0 && ms < 60000) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms / 60000) + "m" + std::to_string((ms % 60000) / 1000) + "s";
}

}  // namespace

Reconciler::Reconciler(ReconcilerOptions options, DesiredStateOfWorld* dsw, ActualStateOfWorld* asw,
                       OperationExecutor* executor, cache::ObjectManager* objects)
    : options_(std::move(options)),
      node_allocatable_(std::make_shared<const kube::ResourceList>(options_.node_allocatable)),
      dsw_(dsw),
      asw_(asw),
      executor_(executor),
      objects_(objects) {}

Reconciler::~Reconciler() = default;

void Reconciler::Reconcile(SteadyTime now, bool ready_to_unmount,
                           const std::function<bool(const std::string&)>& is_terminating) {
  while (!cleanup_due_.empty() && cleanup_due_.begin()->first <= now) {
    const VolumeKey key = cleanup_due_.begin()->second;
    cleanup_due_.erase(cleanup_due_.begin());
    if (dsw_->Find(key) != nullptr) asw_->MarkRemountRequired(key, now);
  }
  while (!kubelet_wait_.empty() && kubelet_wait_.begin()->first <= now) {
    pending_.insert(kubelet_wait_.begin()->second);
    kubelet_wait_entry_.erase(kubelet_wait_.begin()->second);
    kubelet_wait_.erase(kubelet_wait_.begin());
  }
  pending_.merge(dsw_->TakeChanged());
  pending_.merge(asw_->TakeChanged());
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (Evaluate(*it, now, ready_to_unmount, is_terminating)) {
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

bool Reconciler::Evaluate(const VolumeKey& key, SteadyTime now, bool ready_to_unmount,
                          const std::function<bool(const std::string&)>& is_terminating) {
  const DesiredVolume* desired = dsw_->Find(key);
  const MountedVolume* mounted = asw_->Find(key);
  if (desired == nullptr) {
    if (mounted == nullptr) {
      // Neither desired nor mounted: nothing about the volume is worth keeping, including the
      // backoff of a volume that never mounted.
      asw_->ForgetRequests(key);
      executor_->Forget(key);
      fetched_.erase(key);
      fresh_.erase(key);
      verify_.erase(key);
      set_up_seen_.erase(key);
      ledgers_.erase(key);
      if (auto w = kubelet_wait_entry_.find(key); w != kubelet_wait_entry_.end()) {
        kubelet_wait_.erase(w->second);
        kubelet_wait_entry_.erase(w);
      }
      return true;
    }
    if (options_.kubelet_owns_volumes) {
      // The kubelet tears it down: the daemon only stops refreshing it.
      if (executor_->InFlight(key)) return false;
      asw_->Remove(key);
      executor_->Forget(key);
      ledgers_.erase(key);
      verify_.erase(key);
      if (options_.on_volume_released) options_.on_volume_released(key);
      ++stats_.released_to_kubelet;
      logging::Debug("Volume no longer refreshed; the kubelet tears it down",
                     {{"pod", PodName(key)}, {"podUID", key.pod_uid}, {"volume", key.volume_name}});
      return true;
    }
    if (!ready_to_unmount || !executor_->CanStart(key, now)) return false;
    return StartTearDown(*mounted);  // its completion puts the key back
  }
  if (mounted != nullptr && !mounted->uncertain && verify_.count(key) != 0) {
    if (!executor_->CanStart(key, now)) return false;
    return StartVerify(*mounted);
  }
  const bool needed = mounted == nullptr || mounted->uncertain ||
                      (mounted->remount_required && !is_terminating(key.pod_uid));
  if (!needed) {
    fetched_.erase(key);  // a fetch is for the operation it preceded, not a later one
    return true;
  }
  if (!executor_->CanStart(key, now)) return false;
  if (options_.kubelet_owns_volumes && mounted == nullptr && set_up_seen_.count(key) == 0) {
    return StartSetUpCheck(*desired);
  }
  return StartMount(*desired, mounted, now);
}

void Reconciler::LogFailure(const DesiredVolume& desired, const std::string& error) {
  const ExponentialBackoff* backoff = executor_->Backoff(desired.key);
  const auto wait = backoff != nullptr ? backoff->delay() : std::chrono::milliseconds(0);
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
                 {"podUID", desired.key.pod_uid},
                 {"volume", desired.key.volume_name},
                 {"uniqueName", desired.unique_name},
                 {"object", desired.objects.size() == 1 ? logging::KRef(desired.objects.front())
                                                        : logging::Value::Absent()},
                 {"objects", logging::Value::IfSet(objects)},
                 {"err", error},
                 {"noRetriesUntil", FormatTime(std::chrono::system_clock::now() + wait)},
                 {"durationBeforeRetry", FormatDelay(wait)}});
  if (options_.on_mount_failure)
    options_.on_mount_failure(*desired.pod, desired.key.volume_name, error);
}

logging::Value Reconciler::PodName(const VolumeKey& key) const {
  if (const DesiredVolume* d = dsw_->Find(key)) return logging::KObj(d->pod->metadata);
  if (const MountedVolume* m = asw_->Find(key)) return logging::Value::IfSet(m->pod);
  return logging::Value::Absent();
}

void Reconciler::AwaitKubeletSetUp(const VolumeKey& key, bool was_mounted) {
  if (was_mounted) {
    asw_->Remove(key);
    verify_.erase(key);
    if (options_.on_volume_released) options_.on_volume_released(key);
  }
  if (dsw_->Find(key) != nullptr && kubelet_wait_entry_.count(key) == 0) {
    kubelet_wait_entry_[key] = kubelet_wait_.emplace(
        std::chrono::steady_clock::now() + options_.kubelet_setup_recheck, key);
  }
}

bool Reconciler::StartSetUpCheck(const DesiredVolume& desired) {
  const VolumeKey key = desired.key;
  auto set_up = std::make_shared<bool>(false);
  const VolumeLocation loc{options_.root_dir, key.pod_uid, desired.plugin->EscapedName(),
                           key.volume_name};
  return executor_->Run(
      key,
      [set_up, loc] {
        // A path that cannot be walked safely counts as set up here: the mount that follows
        // fails on it with its error, an Event and backoff, instead of waiting in silence.
        auto r = KubeletHasSetUp(loc);
        *set_up = !r.ok() || *r;
        return base::Status::OK();
      },
      [this, key, set_up](const base::Status& s) {
        if (IsCancelled(s)) {  // the lock was lost before it started: due again, no failure
          pending_.insert(key);
          if (on_done_) on_done_(key);
          return;
        }
        ++stats_.kubelet_setup_checks;
        if (*set_up) {
          set_up_seen_.insert(key);
          pending_.insert(key);  // fetch and write in the next pass
          if (on_fetched_) on_fetched_();
        } else {
          AwaitKubeletSetUp(key, /*was_mounted=*/false);
        }
        if (on_done_) on_done_(key);
      });
}

void Reconciler::RequestVerify(const VolumeKey& key) {
  if (asw_->Find(key) == nullptr) return;
  verify_.insert(key);
  pending_.insert(key);
}

bool Reconciler::StartVerify(const MountedVolume& mounted) {
  const VolumeKey key = mounted.key;
  verify_.erase(key);
  struct Seen {
    bool exists = false;
    std::string target;
  };
  auto seen = std::make_shared<Seen>();
  return executor_->Run(
      key,
      [seen, loc = VolumeLocation{options_.root_dir, key.pod_uid, mounted.plugin_dir,
                                  key.volume_name}]() -> base::Status {
        auto vol = OpenVolumeDir(loc);
        if (!vol.ok()) {
          // Gone (torn down by the kubelet): not set up. A link or file on its path: an error.
          if (vol.status().sys_errno() == ENOENT) return base::Status::OK();
          return vol.status();
        }
        const std::string link = loc.dir() + "/" + atomicwriter::kDataDirName;
        char buf[PATH_MAX];
        const ssize_t n = ::readlinkat(vol->get(), atomicwriter::kDataDirName, buf, sizeof(buf));
        if (n < 0) {
          if (errno == ENOENT || errno == ENOTDIR) return base::Status::OK();
          return base::ErrnoError("readlink", link, errno);
        }
        seen->exists = true;
        seen->target.assign(buf, static_cast<size_t>(n));
        return base::Status::OK();
      },
      [this, key, seen, expected = mounted.ts_dir, dir = mounted.dir](const base::Status& s) {
        if (IsCancelled(s)) {  // the lock was lost before it started: due again, no failure
          verify_.insert(key);
          pending_.insert(key);
          if (on_done_) on_done_(key);
          return;
        }
        ++stats_.swaps_verified;
        if (!s.ok()) {
          logging::Warn("Checking the volume's ..data link failed", {{"pod", PodName(key)},
                                                                     {"podUID", key.pod_uid},
                                                                     {"volume", key.volume_name},
                                                                     {"err", s}});
        } else if (!seen->exists) {
          if (options_.kubelet_owns_volumes) AwaitKubeletSetUp(key, /*was_mounted=*/true);
        } else if (seen->target != expected) {
          ++stats_.foreign_swaps;
          logging::Info(
              "..data was swapped by another writer; reading the volume's objects fresh from the "
              "source",
              {{"pod", PodName(key)},
               {"podUID", key.pod_uid},
               {"volume", key.volume_name},
               {"expected", expected},
               {"found", seen->target}});
          RequestFreshRemount(key, std::chrono::steady_clock::now());
        } else if (options_.on_volume_verified) {
          options_.on_volume_verified(key, dir);  // e.g. re-arms a watch that was lost
        }
        pending_.insert(key);
        if (on_done_) on_done_(key);
      });
}

void Reconciler::RequestFreshRemount(const VolumeKey& key, SteadyTime now) {
  if (dsw_->Find(key) == nullptr) return;
  if (const MountedVolume* m = asw_->Find(key)) {
    // The disk changed behind the daemon's back: what it last verified says nothing now.
    VolumeInputs inputs = m->inputs;
    asw_->SetVerified(key, std::move(inputs), SteadyTime{});
  }
  fresh_.insert(key);
  asw_->MarkRemountRequired(key, now);
  pending_.insert(key);
}

bool Reconciler::FetchObjects(const DesiredVolume& desired) {
  const VolumeKey& key = desired.key;
  if (fetched_.erase(key) != 0) return true;
  if (desired.objects.empty()) return true;
  if (fetching_.count(key) != 0) return false;
  const auto mode = fresh_.erase(key) != 0 ? cache::ObjectManager::FetchMode::kFresh
                                           : cache::ObjectManager::FetchMode::kStrategy;
  // The manager may complete inside the call (a cache that is current): then the operation goes
  // on at once instead of waiting for another pass.
  struct State {
    bool in_call = true;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  fetching_.insert(key);
  objects_->Fetch(desired.objects, mode, [this, key, state, alive = std::weak_ptr<char>(alive_)] {
    if (alive.expired()) return;
    state->done = true;
    if (state->in_call) return;
    fetching_.erase(key);
    fetched_.insert(key);
    pending_.insert(key);
    if (on_fetched_) on_fetched_();
  });
  state->in_call = false;
  if (!state->done) return false;
  fetching_.erase(key);
  return true;
}

bool Reconciler::StartMount(const DesiredVolume& desired, const MountedVolume* mounted,
                            SteadyTime now) {
  const VolumeKey key = desired.key;
  // In progress: the fetch's completion puts the key back.
  if (!FetchObjects(desired)) return true;
  if (options_.kubelet_owns_volumes) {
    // The kubelet's content is there; an object whose first read has not landed (1,000 watches
    // being set up at the client's QPS) is no reason for a FailedMount on a healthy pod. Its
    // first read notifies, and the volume comes back then.
    for (const kube::ObjectRef& ref : desired.objects) {
      if (!objects_->Unread(ref)) continue;
      ++stats_.waits_for_first_read;
      spdlog::debug("volume \"{}\" of pod UID \"{}\" waits for the first read of {}",
                    key.volume_name, key.pod_uid, ref.ToString());
      return true;
    }
  }
  const bool first_mount = mounted == nullptr;
  // The objects as they are now: shared immutable revisions, cheap to take on the loop thread.
  ObjectSnapshot objects;
  objects.reserve(desired.objects.size());
  for (const kube::ObjectRef& ref : desired.objects) {
    objects.emplace_back(ref, objects_->GetRevision(ref));
  }
  VolumeInputs inputs{digests_.Digest(objects), desired.pod};
  if (mounted != nullptr && !mounted->uncertain &&
      SameInputs(mounted->inputs, inputs, key.volume_name,
                 desired.plugin->DependsOnPod(desired.volume())) &&
      now - mounted->verified_at < options_.disk_verify_interval) {
    // Built from the same inputs as the content on disk, checked recently: nothing to build,
    // write or read. The newer pod object is kept, so the older one can be released.
    const MountedVolume same = *mounted;
    asw_->MarkMounted(key, same.plugin_dir, same.dir, same.ts_dir, std::chrono::system_clock::now(),
                      now);
    asw_->SetInputs(key, std::move(inputs));
    ++stats_.remounts_unchanged;
    return true;
  }

  // Building the payload (copies of the object bytes) and writing it run on a pool thread.
  auto lookup = std::make_shared<SnapshotLookup>(std::move(objects));
  auto request = std::make_shared<SetUpRequest>();
  request->location = VolumeLocation{options_.root_dir, key.pod_uid, desired.plugin->EscapedName(),
                                     key.volume_name};
  request->set_permissions = plugins::OwnershipPassFor(*desired.pod, key.volume_name);
  request->durable = options_.durable;
  const bool kubelet = options_.kubelet_owns_volumes;
  request->refresh_only = kubelet;
  request->tmpfs =
      !kubelet && options_.tmpfs && desired.plugin->medium() == plugins::Medium::kMemory;
  request->journal = options_.journal;
  auto& ledger = ledgers_[key];
  if (!ledger) ledger = std::make_shared<atomicwriter::UnpublishedLedger>();
  request->ledger = ledger.get();
  request->unpublished_grace = options_.unpublished_grace;
  request->removals = options_.removals;
  auto result =
      std::make_shared<base::Result<atomicwriter::WriteResult>>(base::Status::Error("not run"));
  const std::string plugin_dir = request->location.plugin_dir;
  const std::string dir = request->location.dir();
  auto not_set_up = std::make_shared<bool>(false);

  const bool started = executor_->Run(
      key,
      [request, result, ledger, lookup, not_set_up, kubelet, pod = desired.pod, spec = desired.spec,
       plugin = desired.plugin, allocatable = node_allocatable_]() -> base::Status {
        // (`ledger` is captured to outlive the write.)
        if (kubelet) {
          auto set_up = KubeletHasSetUp(request->location);
          if (!set_up.ok()) return set_up.status();
          if (!*set_up) {
            *not_set_up = true;  // not a failure: looked at again later
            return base::Status::OK();
          }
          request->kubelet_set_up_checked = true;  // SetUpVolume need not look again
        }
        plugins::VolumeHost host;
        host.objects = lookup.get();
        host.node_allocatable = allocatable;
        LiveVersion live(request->location);
        if (kubelet) host.pod_derived_from = &live;
        // `spec` points into *pod, which this closure keeps alive.
        base::Result<atomicwriter::Payload> payload = plugin->BuildPayload(*pod, *spec, host);
        if (!payload.ok()) return payload.status();  // nothing written: a first mount leaves no dir
        request->payload = std::move(payload).value();
        *result = SetUpVolume(*request);
        request->payload.clear();  // the bytes are on disk; do not keep them until the callback
        return result->status();
      },
      [this, key, first_mount, plugin_dir, dir, result, not_set_up, inputs = std::move(inputs),
       started_at = now](const base::Status& s) mutable {
        if (IsCancelled(s)) {  // the lock was lost before it started: due again, no failure
          pending_.insert(key);
          if (on_done_) on_done_(key);
          return;
        }
        const DesiredVolume* d = dsw_->Find(key);
        set_up_seen_.erase(key);
        if (s.ok() && *not_set_up) {
          // The kubelet has torn the volume down (or not set it up after all): nothing to refresh.
          ++stats_.kubelet_setup_checks;
          AwaitKubeletSetUp(key, !first_mount);
          if (on_done_) on_done_(key);
          return;
        }
        if (s.ok()) {
          const bool published = (*result)->published;
          RecordMount(key, plugin_dir, published, started_at);
          asw_->MarkMounted(key, plugin_dir, dir, (*result)->ts_dir,
                            std::chrono::system_clock::now(), started_at);
          if (d != nullptr) asw_->SetPod(key, d->pod->metadata.namespace_, d->pod->metadata.name);
          const auto done_at = std::chrono::steady_clock::now();
          const atomicwriter::WriteResult& w = **result;
          const bool leftovers = !w.cleanup_error.empty() || w.awaiting_grace > 0;
          // With leftovers, the disk counts as not recently verified, so that the write planned
          // below goes to the disk instead of being served from the inputs.
          asw_->SetVerified(key, std::move(inputs),
                            leftovers ? done_at - options_.disk_verify_interval : done_at);
          ++stats_.mounts_ok;
          if (published) ++stats_.versions_published;
          if (options_.on_volume_verified) options_.on_volume_verified(key, dir);
          if (!w.cleanup_error.empty()) {
            ++stats_.cleanups_failed;
            logging::Warn("Volume shows its new content, but cleaning up after the write failed",
                          {{"pod", PodName(key)},
                           {"podUID", key.pod_uid},
                           {"volume", key.volume_name},
                           {"err", w.cleanup_error},
                           {"retryInS", std::chrono::duration_cast<std::chrono::seconds>(
                                            options_.unpublished_grace)
                                            .count()}});
          }
          if (leftovers) {
            // Back to the disk once the leftovers may go.
            cleanup_due_.emplace(
                done_at + options_.unpublished_grace + std::chrono::milliseconds(100), key);
          }
          if (first_mount) {
            logging::Info("MountVolume.SetUp succeeded", {{"pod", PodName(key)},
                                                          {"podUID", key.pod_uid},
                                                          {"volume", key.volume_name},
                                                          {"version", (*result)->ts_dir},
                                                          {"writer", options_.writer_identity}});
          } else {
            // Every write is logged with its writer (one writer per node can be checked).
            logging::Debug(published ? "Volume updated" : "Volume checked, unchanged",
                           {{"pod", PodName(key)},
                            {"podUID", key.pod_uid},
                            {"volume", key.volume_name},
                            {"version", (*result)->ts_dir},
                            {"writer", options_.writer_identity}});
          }
        } else {
          ++stats_.mounts_failed;
          RecordFailure(kOperationMount, d, plugin_dir, s, started_at);
          asw_->SetLastError(key, s.message());
          if (d != nullptr) {
            LogFailure(*d, s.message());
          } else {
            logging::Warn("FailedMount: MountVolume.SetUp failed", {{"pod", PodName(key)},
                                                                    {"podUID", key.pod_uid},
                                                                    {"volume", key.volume_name},
                                                                    {"err", s}});
          }
        }
        pending_.insert(key);  // look again: a failure retries, a success may have more to do
        if (on_done_) on_done_(key);
      });
  if (!started) {
    logging::Error("Could not queue the mount operation",
                   {{"pod", PodName(key)}, {"podUID", key.pod_uid}, {"volume", key.volume_name}});
  }
  return started;
}

bool Reconciler::StartTearDown(const MountedVolume& mounted) {
  const VolumeKey key = mounted.key;
  VolumeLocation loc{options_.root_dir, key.pod_uid, mounted.plugin_dir, key.volume_name};
  auto outcome = std::make_shared<TearDownOutcome>(TearDownOutcome::kRemoved);
  return executor_->Run(
      key,
      [loc, outcome, journal = options_.journal] {
        auto r = TearDownVolume(loc, *journal);
        if (r.ok()) *outcome = *r;
        return r.status();
      },
      [this, key, outcome, dir = loc.dir(), plugin_dir = mounted.plugin_dir, pod = mounted.pod,
       started = std::chrono::steady_clock::now()](const base::Status& s) {
        if (IsCancelled(s)) {  // the lock was lost before it started: due again, no failure
          pending_.insert(key);
          if (on_done_) on_done_(key);
          return;
        }
        if (s.ok()) {
          metrics_.ObserveOperation(kOperationUnmount, PluginNameOfDir(plugin_dir), true,
                                    std::chrono::steady_clock::now() - started);
          // A pod that came back while the teardown ran is mounted again by the next pass.
          asw_->Remove(key);
          executor_->Forget(key);
          ledgers_.erase(key);
          if (*outcome == TearDownOutcome::kNotOwned) {
            ++stats_.teardowns_not_owned;
            logging::Info(
                "Volume no longer refreshed; left in place: this daemon did not set it up",
                {{"pod", logging::Value::IfSet(pod)},
                 {"podUID", key.pod_uid},
                 {"volume", key.volume_name},
                 {"dir", dir}});
          } else {
            ++stats_.teardowns_ok;
            logging::Info("UnmountVolume.TearDown succeeded", {{"pod", logging::Value::IfSet(pod)},
                                                               {"podUID", key.pod_uid},
                                                               {"volume", key.volume_name},
                                                               {"dir", dir}});
          }
        } else {
          ++stats_.teardowns_failed;
          RecordFailure(kOperationUnmount, nullptr, plugin_dir, s, started);
          logging::Warn("UnmountVolume.TearDown failed", {{"pod", logging::Value::IfSet(pod)},
                                                          {"podUID", key.pod_uid},
                                                          {"volume", key.volume_name},
                                                          {"err", s}});
        }
        pending_.insert(key);
        if (on_done_) on_done_(key);
      });
}

void Reconciler::RecordMount(const VolumeKey& key, const std::string& plugin_dir, bool published,
                             SteadyTime started) {
  const SteadyTime done = std::chrono::steady_clock::now();
  const std::string plugin = PluginNameOfDir(plugin_dir);
  metrics_.ObserveOperation(kOperationMount, plugin, true, done - started);
  const MountedVolume* m = asw_->Find(key);
  // Served: requested before the operation read its objects.
  if (published && m != nullptr && m->remount_requested_at && *m->remount_requested_at <= started) {
    metrics_.ObservePropagation(plugin, done - *m->remount_requested_at);
  }
}

void Reconciler::RecordFailure(const char* operation, const DesiredVolume* desired,
                               const std::string& plugin_dir, const base::Status& error,
                               SteadyTime started) {
  const std::string plugin = PluginNameOfDir(plugin_dir);
  metrics_.ObserveOperation(operation, plugin, false, std::chrono::steady_clock::now() - started);
  bool objects_unavailable = false;
  if (desired != nullptr) {
    for (const kube::ObjectRef& ref : desired->objects) {
      base::Result<cache::ObjectRevision> revision = objects_->GetRevision(ref);
      if (!revision.ok() || !revision->exists()) objects_unavailable = true;
    }
  }
  metrics_.CountFailure(operation, plugin, FailureReason(error, objects_unavailable));
}

}  // namespace volumemanager
