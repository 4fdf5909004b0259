#include "volumemanager/volume_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "base/catch_all.h"
#include "logging/structured_log.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/state/volume_paths.h"

namespace volumemanager {

struct VolumeManager::ScanWork {
  uv_work_t req;
  VolumeManager* self;
  atomicwriter::Env* env;
  std::string root_dir;
  OwnershipJournal* journal;
  std::set<std::string> plugin_dirs;
  ReconstructResult result;
};

struct VolumeManager::OrphanWork {
  uv_work_t req;
  VolumeManager* self;
  atomicwriter::Env* env;
  std::string root_dir;
  OwnershipJournal* journal;
  const WriteGate* gate;
  std::vector<std::string> pod_uids;
};

namespace {

// The body of a libuv callback: what it throws is logged, never passed to libuv.
template <typename F>
void FromLoop(const char* what, F&& body) {
  if (base::Status s = base::CatchAll(what, std::forward<F>(body)); !s.ok()) {
    spdlog::error("{}", s.message());
  }
}

// The options with their defaults filled in.
VolumeManagerOptions WithDefaults(VolumeManagerOptions o) {
  if (o.env == nullptr) o.env = atomicwriter::PosixEnv();
  return o;
}

ReconcilerOptions ToReconcilerOptions(const VolumeManagerOptions& o) {
  ReconcilerOptions r;
  r.env = o.env;
  r.root_dir = o.root_dir;
  r.durable = o.durable;
  r.tmpfs = o.tmpfs;
  r.node_allocatable = o.node_allocatable;
  r.journal = o.journal;
  r.tokens = o.tokens;
  r.unpublished_grace = o.unpublished_grace;
  r.kubelet_owns_volumes = o.kubelet_owns_volumes;
  r.on_mount_failure = o.on_mount_failure;
  r.on_subpath_failure = o.on_subpath_failure;
  r.writer_identity = o.writer_identity;
  r.observe = o.observe;
  r.disk = o.disk;
  return r;
}

}  // namespace

VolumeManager::VolumeManager(uv_loop_t* loop, VolumeManagerOptions options,
                             cache::ObjectManager* objects, const plugins::PluginRegistry* registry,
                             std::function<bool()> all_sources_seen)
    : loop_(loop),
      options_(WithDefaults(std::move(options))),
      registry_(registry),
      objects_(objects),
      all_sources_seen_(std::move(all_sources_seen)),
      removals_(options_.env),
      executor_(
          loop, [env = options_.env] { return env->SteadyNow(); }, options_.write_gate),
      populator_(registry, &dsw_, &asw_, objects, options_.kubelet_owns_volumes, options_.tokens,
                 options_.read_policy, options_.on_policy_refusal),
      reconciler_(
          [this] {
            ReconcilerOptions r = ToReconcilerOptions(options_);
            r.removals = &removals_;
            if (options_.kubelet_owns_volumes) {
              r.on_volume_verified = [this](const VolumeKey& key, const std::string& dir) {
                WatchVolumeDir(key, dir);
              };
              r.on_volume_released = [this](const VolumeKey& key) { dir_watcher_.Unwatch(key); };
            }
            r.on_content_swapped = [this](const VolumeKey& key, const ContentSwap& swap) {
              reload_->OnContentSwapped(::reload::VolumeSwap{
                  key.pod_uid, key.volume_name, swap.foreign, swap.version, swap.changed_at});
            };
            return r;
          }(),
          &dsw_, &asw_, &executor_, objects),
      reload_(std::make_unique<::reload::ReloadController>(
          loop,
          [this] {
            ::reload::ReloadControllerOptions r = options_.reload;
            r.observe = r.observe || options_.observe;
            return r;
          }(),
          static_cast<const ::reload::ReloadHost*>(this))) {
  reconciler_.SetOnOperationDone([this](const VolumeKey& key) {
    if (stopping_) {
      MaybeFinishStop();
      return;
    }
    reload_->OnVolumeActivity(key.pod_uid);
    // A change that arrived while the write ran is served right away, not at the next tick.
    const MountedVolume* m = asw_.Find(key);
    if (m != nullptr && m->remount_required) SchedulePassSoon();
  });
  // A volume can end its way to disk with no operation (a remount that found the inputs it last
  // wrote): a reload waiting for it is looked at then, not at the pod's next operation.
  reconciler_.SetOnSettled([this](const VolumeKey& key) {
    if (!stopping_) reload_->OnVolumeActivity(key.pod_uid);
  });
  reconciler_.SetOnReadyToStart([this] { SchedulePassSoon(); });
  reconciler_.SetOnWorkAdded([this] { WorkArrived(); });
  writes_allowed_ = options_.writes_allowed_at_start;
}

VolumeManager::~VolumeManager() {
  // Stop() must have completed: the timers are closed and freed by then.
}

void VolumeManager::Start() {
  if (options_.journal == nullptr) {
    // A programming error: without the journal nothing can be set up or told apart from the
    // kubelet's volumes.
    spdlog::critical("volume manager started without an ownership journal");
    std::abort();
  }
  if (options_.write_gate != nullptr) {
    // One writer per node: a version dir is removed only while the node's lock is held.
    const WriteGate* gate = options_.write_gate;
    removals_.SetPermission([gate] { return gate->Open(); });
  }
  removals_.Start();
  tick_ = new uv_timer_t;
  soon_ = new uv_timer_t;
  for (uv_timer_t* t : {tick_, soon_}) {
    uv_timer_init(loop_, t);
    t->data = this;
    ++open_handles_;
  }
  if (options_.kubelet_owns_volumes) {
    VolumeDirWatcherHandler handler;
    handler.swapped = [this](const VolumeKey& key) {
      reconciler_.RequestVerify(key);
      SchedulePassSoon();
    };
    handler.lost = [this](const VolumeKey& key) {
      // Torn down, unmounted or re-mounted: the check finds out which, and re-arms. Until it
      // has, the pod's resync is the net again.
      reconciler_.RequestVerify(key);
      ResyncDeferredPodsAgain(&key.pod_uid);
      SchedulePassSoon();
    };
    handler.overflow = [this] {
      spdlog::warn("inotify queue overflowed: re-verifying every volume");
      for (const auto& [key, mounted] : asw_.volumes()) {
        if (dir_watcher_.Rearm(key).ok()) reconciler_.RequestVerify(key);
      }
      ResyncDeferredPodsAgain(nullptr);
      SchedulePassSoon();
    };
    // A mount may have put a tmpfs over a watched dir (no event says so): every pod whose
    // resync waits for its disk check is looked at again within a sync period.
    handler.mount_table_changed = [this] { ResyncDeferredPodsAgain(nullptr); };
    VolumeDirWatcherOptions watcher_options;
    watcher_options.root_dir = options_.root_dir;
    watcher_options.env = options_.env;
    if (base::Status s = dir_watcher_.Start(loop_, std::move(handler), std::move(watcher_options));
        !s.ok()) {
      spdlog::warn(
          "{}: swaps of ..data by the kubelet are noticed at each pod's periodic resync only",
          s.message());
    }
  }
  StartTick(options_.reconcile_period);

  QueueScan();
}

void VolumeManager::QueueScan() {
  auto* work = new ScanWork;
  work->req.data = work;
  work->self = this;
  work->env = options_.env;
  work->root_dir = options_.root_dir;
  work->journal = options_.journal;
  for (const auto& plugin : registry_->plugins()) work->plugin_dirs.insert(plugin->EscapedName());
  scan_in_flight_ = true;
  uv_queue_work(
      loop_, &work->req,
      [](uv_work_t* req) {
        auto* w = static_cast<ScanWork*>(req->data);
        base::Status s = base::CatchAll("reconstruction", [w] {
          w->result = ReconstructOwnedVolumes(*w->env, w->root_dir, *w->journal, w->plugin_dirs);
        });
        if (!s.ok()) {  // a callback is a wall: start with nothing adopted
          w->result = ReconstructResult{};
          base::CatchAll("reconstruction", [&] {
            w->result.problems.push_back(s.message());
          }).IgnoreError();
        }
      },
      [](uv_work_t* req, int) {
        std::unique_ptr<ScanWork> w(static_cast<ScanWork*>(req->data));
        FromLoop("reconstruction", [&] { w->self->OnScanDone(std::move(w->result)); });
      });
}

void VolumeManager::OnScanDone(ReconstructResult result) {
  scan_in_flight_ = false;
  if (stopping_) {
    MaybeFinishStop();
    return;
  }
  if (!result.waiting_for_filesystem.empty()) {
    // Not the recorded filesystem (yet): no pass runs until a scan succeeds (the tick retries).
    for (const std::string& p : result.problems) spdlog::warn("reconstruction: {}", p);
    scan_retry_at_ = options_.env->SteadyNow() + scan_retry_delay_;
    spdlog::warn(
        "reconstruction: {}: waiting for that filesystem (not mounted yet?) before adopting, "
        "tearing down or setting up anything; checking again in {} s (if it is gone for good, "
        "stop the daemon and move {} aside: it then owns nothing)",
        result.waiting_for_filesystem, scan_retry_delay_.count(), options_.journal->file());
    scan_retry_delay_ = std::min(scan_retry_delay_ * 2, std::chrono::seconds(30));
    waiting_for_filesystem_ = std::move(result.waiting_for_filesystem);
    if (tick_ != nullptr)
      StartTick(
          std::chrono::ceil<std::chrono::milliseconds>(scan_retry_at_ - options_.env->SteadyNow()));
    return;
  }
  waiting_for_filesystem_.clear();
  for (const FoundVolume& v : result.volumes) {
    VolumeKey key{v.pod_uid, v.volume_name};
    if (asw_.Find(key) != nullptr) continue;
    asw_.AddUncertain(key, v.plugin_dir, v.tmpfs_bytes, v.tmpfs_version);
  }
  scanned_pod_uids_ = std::move(result.pod_uids);
  reconstructed_ = true;
  for (const std::string& p : result.problems) spdlog::warn("reconstruction: {}", p);
  spdlog::info(
      "reconstructed {} volume(s) this daemon set up under {} ({} pod dir(s) of its own; {} "
      "entr{} gone from disk released, {} of them since a reboot); volumes it did not set up are "
      "never removed",
      result.volumes.size(), options_.root_dir, scanned_pod_uids_.size(), result.released,
      result.released == 1 ? "y" : "ies", result.released_after_reboot);
  SchedulePassSoon();
}

void VolumeManager::OnPodUpdate(const podconfig::PodUpdate& update) {
  const SteadyTime now = options_.env->SteadyNow();
  populator_.Apply(update, now);
  for (const podconfig::PodPtr& pod : update.pods) {
    const std::string& uid = pod->metadata.uid;
    auto entry = resync_entry_.find(uid);
    std::shared_ptr<const kube::Pod> current = populator_.FindPod(uid);
    if (current == nullptr) {
      if (entry != resync_entry_.end()) {
        resync_queue_.erase(entry->second.at);
        resync_entry_.erase(entry);
      }
      reload_->OnPodRemoved(uid);
    } else {
      if (entry == resync_entry_.end()) {
        // The UID its volumes' keys hold (one string for all of them), or a new one.
        const std::vector<VolumeKey> keys = dsw_.VolumesOfPod(uid);
        entry =
            resync_entry_.emplace(keys.empty() ? PodUid(uid) : keys.front().pod_uid, ResyncEntry{})
                .first;
        entry->second.at = resync_queue_.emplace(NextResync(now), *entry);
      }
      reload_->OnPod(std::move(current));
    }
  }
  SchedulePassSoon();
}

bool VolumeManager::MarkInputChanged(const VolumeKey& key, SteadyTime now) {
  // What a failed attempt read has changed: the volume may try again at once rather than at the
  // end of its backoff (an object created after its pod mounts within a pass of its creation).
  executor_.RetryNow(key);
  if (asw_.MarkRemountRequired(key, now)) return true;
  if (asw_.Find(key) != nullptr) return false;
  reconciler_.Poke(key);  // not mounted yet: its first mount is looked at again
  return true;
}

void VolumeManager::OnObjectChanged(const kube::ObjectRef& object) {
  const SteadyTime now = options_.env->SteadyNow();
  int marked = 0;
  for (const VolumeKey& key : dsw_.VolumesReading(object)) {
    if (MarkInputChanged(key, now)) ++marked;
  }
  logging::Debug("Object changed: volumes marked for remount",
                 {{"object", logging::KRef(object)}, {"volumes", marked}});
  if (marked > 0) SchedulePassSoon();
}

void VolumeManager::OnTokenChanged(const kube::TokenRef& token) {
  const SteadyTime now = options_.env->SteadyNow();
  int marked = 0;
  for (const VolumeKey& key : dsw_.VolumesOfPod(token.pod_uid)) {
    const DesiredVolume* d = dsw_.Find(key);
    if (d == nullptr || std::find(d->tokens.begin(), d->tokens.end(), token) == d->tokens.end()) {
      continue;
    }
    if (MarkInputChanged(key, now)) ++marked;
  }
  logging::Debug("Service account token changed: volumes marked for remount",
                 {{"pod", logging::KObj(token.namespace_, token.pod_name)},
                  {"podUID", token.pod_uid},
                  {"serviceAccount", logging::KObj(token.namespace_, token.service_account)},
                  {"volumes", marked}});
  if (marked > 0) SchedulePassSoon();
}

void VolumeManager::SetWritesAllowed(bool allowed) {
  if (writes_allowed_ == allowed) return;
  writes_allowed_ = allowed;
  if (allowed) SchedulePassSoon();
}

void VolumeManager::SchedulePassSoon() {
  if (stopping_ || soon_ == nullptr || soon_pending_) return;
  soon_pending_ = true;
  uv_timer_start(
      soon_,
      [](uv_timer_t* t) {
        auto* self = static_cast<VolumeManager*>(t->data);
        self->soon_pending_ = false;
        FromLoop("reconciler pass", [self] { self->RunPass(); });
      },
      0, 0);
}

void VolumeManager::RunPass() {
  if (stopping_) return;
  const SteadyTime now = options_.env->SteadyNow();
  if (!reconstructed_) {
    // The scan's completion schedules a pass. While reconstruction waits for the root's recorded
    // filesystem, the tick is armed for the retry (OnScanDone) and the retry runs here.
    if (!scan_in_flight_ && !waiting_for_filesystem_.empty()) {
      if (now >= scan_retry_at_) {
        QueueScan();
      } else {
        StartTick(std::chrono::ceil<std::chrono::milliseconds>(scan_retry_at_ - now));
      }
    }
    return;
  }
  ResyncDuePods(now);
  if (writes_allowed_) {
    const bool ready = all_sources_seen_();
    reconciler_.Reconcile(now, ready,
                          [this](const std::string& uid) { return populator_.IsTerminating(uid); });
    if (ready && !orphans_cleaned_) {
      orphans_cleaned_ = true;
      CleanUpOrphanPodDirs();
    }
  }
  ArmTick(now);
}

void VolumeManager::StartTick(std::chrono::milliseconds delay) {
  uv_timer_start(
      tick_,
      [](uv_timer_t* t) {
        FromLoop("reconciler pass", [t] { static_cast<VolumeManager*>(t->data)->RunPass(); });
      },
      static_cast<uint64_t>(std::max<long>(delay.count(), 0)), 0);
}

void VolumeManager::ArmTick(SteadyTime now) {
  if (stopping_ || tick_ == nullptr) return;
  // Volumes due (waiting for writes to be allowed, or made due by this pass), or a condition
  // only a look can tell (every pod source seen, for the start-up cleanup or a teardown): the
  // next tick, as ever.
  if (reconciler_.pending_count() > 0 || !orphans_cleaned_ ||
      reconciler_.count_in(VolumePhase::kAwaitingSources) > 0) {
    StartTick(options_.reconcile_period);
    return;
  }
  const std::optional<SteadyTime> next = NextTimedWork();
  if (!next) {
    uv_timer_stop(tick_);  // nothing due until an event brings work (WorkArrived)
    return;
  }
  const auto until = std::chrono::ceil<std::chrono::milliseconds>(*next - now);
  StartTick(std::max(until, options_.reconcile_period));
}

void VolumeManager::WorkArrived() {
  // Due within a tick, as if the periodic pass still ran: a timer armed later (or none) is
  // brought forward.
  if (stopping_ || tick_ == nullptr) return;
  const uint64_t period = static_cast<uint64_t>(options_.reconcile_period.count());
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(tick_)) && uv_timer_get_due_in(tick_) <= period) {
    return;
  }
  StartTick(options_.reconcile_period);
}

std::optional<VolumeManager::SteadyTime> VolumeManager::NextTimedWork() const {
  std::optional<SteadyTime> next = reconciler_.NextTimer();
  if (!resync_queue_.empty() && (!next || resync_queue_.begin()->first < *next)) {
    next = resync_queue_.begin()->first;
  }
  return next;
}

void VolumeManager::ResyncDuePods(SteadyTime now) {
  // Under a strategy that announces every change (Watch), a change of a volume's objects has
  // marked it already: a look now would find the inputs of the content on disk again. What no
  // announcement covers is the disk itself, verified once disk_verify_interval has passed; a pod
  // whose volumes are all current is next looked at when the first of them is due for that.
  // Beside the kubelet, its swaps of `..data` too, which the volume's inotify watch reports as
  // long as the dir's path leads to the watched inode: checked here at every sync period (instead
  // of a verification on the pool and a remount), since a tmpfs mounted over the dir or gone from
  // under it says nothing; a walk and an fstat on the loop when the mount table has changed since
  // the last check, nothing otherwise (VolumeDirWatcher::WatchHolds).
  const bool announced = objects_->AnnouncesEveryChange();
  const auto verify_interval = reconciler_.disk_verify_interval();
  while (!resync_queue_.empty() && resync_queue_.begin()->first <= now) {
    auto& [uid, entry] = resync_queue_.begin()->second.get();
    auto node = resync_queue_.extract(entry.at);  // moved to its next time below
    ++resync_stats_.pods;
    bool all_current = announced;
    std::optional<SteadyTime> verify_due;
    // One walk of the pod's volumes in the actual state; the few not current are marked after
    // it (marking changes the state walked).
    to_mark_.clear();
    asw_.ForEachVolumeOfPod(uid, [&](const VolumeKey& key, const MountedVolume& m) {
      if (dsw_.Find(key) == nullptr) return;
      if (announced && !m.uncertain && !m.remount_required &&
          now - m.verified_at < verify_interval &&
          (!options_.kubelet_owns_volumes || dir_watcher_.WatchHolds(key))) {
        ++resync_stats_.volumes_current;
        const SteadyTime due = m.verified_at + verify_interval;
        if (!verify_due || due < *verify_due) verify_due = due;
        return;
      }
      to_mark_.push_back(key);
    });
    for (const VolumeKey& key : to_mark_) {
      all_current = false;
      ++resync_stats_.volumes_marked;
      asw_.MarkRemountRequired(key, now);
      // The net under the watch: beyond the inotify watch limit, a watch left on a tmpfs the
      // kubelet has since replaced (no event says so), or no announcements, the resync is when a
      // swap is noticed.
      if (options_.kubelet_owns_volumes) reconciler_.RequestVerify(key);
    }
    to_mark_.clear();
    SteadyTime next = NextResync(now);
    if (all_current && verify_due && *verify_due > next &&
        (!options_.kubelet_owns_volumes || dir_watcher_.FollowsMountTable())) {
      // The regular resync that would first find a volume due for its disk check (still jittered,
      // so that pods mounted together are not all checked in one pass). Beside the kubelet, only
      // while the watcher follows the mount table: until a mount (mount_table_changed) or a
      // watch's trouble (lost, overflow, a failed re-arm) brings the pod back to the regular
      // schedule, each of its watches holds as the check just found (WatchHolds would answer
      // from the table's generation without a walk).
      next = NextResync(*verify_due - options_.sync_frequency);
      ++resync_stats_.pods_deferred;
    }
    node.key() = next;
    entry.at = resync_queue_.insert(std::move(node));
  }
}

void VolumeManager::ResyncDeferredPodsAgain(const PodUid* pod_uid) {
  // Deferred resyncs lie beyond the latest regular one (NextResync: before now + 1.5 x
  // sync_frequency + one grid step); each moves back to a regular time, which a move never
  // passes again. One pod's by its entry; all by the schedule's tail, empty at once when the
  // table changes again before any pod is deferred anew.
  const SteadyTime now = options_.env->SteadyNow();
  const SteadyTime latest_regular = now + options_.sync_frequency + options_.sync_frequency / 2 +
                                    std::chrono::duration_cast<SteadyTime::duration>(ResyncGrid());
  long moved = 0;
  auto move = [&](ResyncQueue::iterator it) {
    ResyncEntry& entry = it->second.get().second;
    auto node = resync_queue_.extract(it);
    if (node.empty()) return;
    node.key() = NextResync(now);
    entry.at = resync_queue_.insert(std::move(node));
    ++moved;
  };
  if (pod_uid != nullptr) {
    auto entry = resync_entry_.find(*pod_uid);
    if (entry != resync_entry_.end() && entry->second.at->first > latest_regular) {
      move(entry->second.at);
    }
  } else {
    for (auto it = resync_queue_.upper_bound(latest_regular); it != resync_queue_.end();) {
      move(it++);
    }
  }
  if (moved == 0) return;
  resync_stats_.pods_brought_back += moved;
  WorkArrived();  // the tick may be armed for a deferred resync, later than these
}

void VolumeManager::CleanUpOrphanPodDirs() {
  // Pods with a directory the daemon created but no volume of its own left (a stop between a
  // teardown and the removal of its dirs): their owned, empty dirs go, in one pool job.
  auto work = std::make_unique<OrphanWork>();
  for (const std::string& uid : scanned_pod_uids_) {
    if (populator_.FindPod(uid) != nullptr || asw_.HasPod(uid)) continue;
    work->pod_uids.push_back(uid);
  }
  scanned_pod_uids_.clear();
  if (work->pod_uids.empty()) return;
  if (options_.observe) {
    spdlog::info("Observe: would remove the empty dirs this daemon created for {} pods gone",
                 work->pod_uids.size());
    return;
  }
  work->req.data = work.get();
  work->self = this;
  work->env = options_.env;
  work->root_dir = options_.root_dir;
  work->journal = options_.journal;
  work->gate = options_.write_gate;
  orphan_work_in_flight_ = true;
  uv_queue_work(
      loop_, &work.release()->req,
      [](uv_work_t* req) {
        auto* w = static_cast<OrphanWork*>(req->data);
        if (w->gate != nullptr && !w->gate->Open()) return;  // the next start's, then
        base::Status s = base::CatchAll("removing the empty dirs of gone pods", [w] {
          for (const std::string& uid : w->pod_uids) {
            // Best effort: what stays is tried again at the next start.
            base::Status removed = RemoveOwnedEmptyPodDirs(*w->env, w->root_dir, uid, *w->journal);
            if (!removed.ok()) spdlog::warn("{}", removed.message());
          }
        });
        if (!s.ok()) spdlog::warn("{}", s.message());  // best effort; retried at the next start
      },
      [](uv_work_t* req, int) {
        std::unique_ptr<OrphanWork> w(static_cast<OrphanWork*>(req->data));
        w->self->orphan_work_in_flight_ = false;
        if (w->self->stopping_) FromLoop("stop", [&] { w->self->MaybeFinishStop(); });
      });
}

std::vector<VolumeManager::SteadyTime> VolumeManager::resync_times() const {
  std::vector<SteadyTime> times;
  for (const auto& [when, entry] : resync_queue_) {
    if (times.empty() || times.back() != when) times.push_back(when);
  }
  return times;
}

std::chrono::milliseconds VolumeManager::ResyncGrid() const {
  return std::clamp(options_.sync_frequency / 30, options_.reconcile_period, kMaxResyncGrid);
}

VolumeManager::SteadyTime VolumeManager::NextResync(SteadyTime now) {
  std::uniform_real_distribution<double> jitter(1.0, 1.5);
  const auto due = now + std::chrono::milliseconds(static_cast<long>(
                             static_cast<double>(options_.sync_frequency.count()) * jitter(rng_)));
  // Up to the grid's next line: the pods due within one grid step share one pass (one wake-up)
  // instead of one each.
  const auto grid = std::chrono::duration_cast<SteadyTime::duration>(ResyncGrid());
  const auto since_epoch = due.time_since_epoch();
  const auto steps = (since_epoch + grid - SteadyTime::duration(1)) / grid;
  return SteadyTime(steps * grid);
}

void VolumeManager::WatchVolumeDir(const VolumeKey& key, const std::string& dir) {
  const auto state = dir_watcher_.state(key);
  // Re-arming an armed watch is one syscall; it moves a watch left on a replaced mount to the
  // dir as it is now.
  auto armed = state == VolumeDirWatcher::State::kUnknown ? dir_watcher_.Watch(key, dir)
                                                          : dir_watcher_.Rearm(key);
  if (!armed.ok() || *armed != VolumeDirWatcher::Arming::kArmed) {
    ResyncDeferredPodsAgain(&key.pod_uid);  // the resync checks the volume from now on
  }
  if (!armed.ok()) {
    const MountedVolume* m = asw_.Find(key);
    logging::Warn("Cannot watch the volume dir; swaps by the kubelet are noticed at its resync",
                  {{"pod", m != nullptr ? logging::KObjOf(m->pod()) : logging::Value::Absent()},
                   {"podUID", key.pod_uid.str()},
                   {"volume", key.volume_name},
                   {"err", armed.status()}});
    return;
  }
  // A swap between the write just done and the watch being first armed went unreported: look
  // once.
  if (state != VolumeDirWatcher::State::kArmed && *armed == VolumeDirWatcher::Arming::kArmed) {
    reconciler_.RequestVerify(key);
  }
}

void VolumeManager::Stop(std::function<void()> done) {
  stopping_ = true;
  dir_watcher_.Stop();
  stop_done_ = std::move(done);
  if (tick_ != nullptr) uv_timer_stop(tick_);
  if (soon_ != nullptr) uv_timer_stop(soon_);
  reload_->Close([this] {
    reload_closed_ = true;
    MaybeFinishStop();
  });
}

void VolumeManager::MaybeFinishStop() {
  if (!stopping_ || executor_.in_flight() > 0 || scan_in_flight_ || orphan_work_in_flight_ ||
      !reload_closed_) {
    return;
  }
  // Removals not yet due stay on disk: the next start's writes find and queue them again.
  removals_.Stop();
  if (tick_ == nullptr) {
    if (stop_done_) std::exchange(stop_done_, nullptr)();
    return;
  }
  for (uv_timer_t* t : {tick_, soon_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(t), [](uv_handle_t* h) {
      auto* self = static_cast<VolumeManager*>(h->data);
      delete reinterpret_cast<uv_timer_t*>(h);
      if (--self->open_handles_ == 0 && self->stop_done_) {
        std::exchange(self->stop_done_, nullptr)();
      }
    });
  }
  tick_ = soon_ = nullptr;
}

std::vector<std::string> VolumeManager::RefreshedVolumes(const std::string& pod_uid) const {
  std::vector<std::string> names;
  for (const VolumeKey& key : dsw_.VolumesOfPod(pod_uid)) names.push_back(key.volume_name);
  return names;
}

::reload::VolumeProgress VolumeManager::Progress(const std::string& pod_uid,
                                                 const std::string& volume) const {
  switch (reconciler_.Progress(VolumeKey{pod_uid, volume})) {
    case VolumeProgress::kWriting:
      return ::reload::VolumeProgress::kWriting;
    case VolumeProgress::kFailing:
      return ::reload::VolumeProgress::kFailing;
    case VolumeProgress::kSettled:
      break;
  }
  return ::reload::VolumeProgress::kSettled;
}

std::vector<std::string> VolumeManager::ObjectVersions(
    const std::string& pod_uid, const std::vector<std::string>& volumes) const {
  std::vector<std::string> out;
  for (const std::string& volume : volumes) {
    const DesiredVolume* d = dsw_.Find(VolumeKey{pod_uid, volume});
    if (d == nullptr) continue;
    for (const kube::ObjectRef& ref : d->objects) {
      std::string text = ObjectVersion(ref, objects_->GetRevision(ref));
      if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(std::move(text));
    }
  }
  return out;
}

}  // namespace volumemanager
