// VolumeManager: the daemon's core, wiring pod updates and object changes to the desired state,
// the reconciler and the operations (docs/design.md, "The shape of the daemon").
//
//  * Start: reconstructs, on the thread pool, the volumes its ownership journal lists (the only
//    ones it ever adopts or removes), then runs reconciler passes: within 100 ms
//    (`reconcile_period`) of anything becoming due, as a periodic pass would, and at once after
//    an object change. Idle costs nothing: a pass with nothing due visits no volume and
//    allocates nothing, and with nothing due the tick is armed only for the next timed work
//    (a pod's resync, a volume's backoff, kubelet recheck or cleanup), or not at all.
//  * OnPodUpdate: the populator updates the desired state; new pods get their next periodic
//    resync at sync_frequency x (1 + U[0, 0.5)), rounded up to a grid of sync_frequency / 30
//    (between reconcile_period and 2 s): the pods due within one step are resynced in one pass,
//    so 1,000 pods at the default 1 min cost one wake-up every 2 s, not one per pod.
//    A resync marks each of the pod's volumes for a remount, except, under a strategy that
//    announces every change (ObjectManager::AnnouncesEveryChange: Watch), a volume whose objects
//    announced nothing and whose disk was verified within the reconciler's disk_verify_interval
//    (beside the kubelet: and whose dir's watch still covers it, VolumeDirWatcher::StillWatching):
//    its remount would find the same inputs, so it is not visited at all. A pod with every volume
//    so is next resynced when the first is due for its disk check (10 min by default) rather than
//    after sync_frequency. Beside the kubelet only while the dir watcher follows the mount table
//    (VolumeDirWatcher::FollowsMountTable), since the watch's check can then change its answer
//    only after a mount or a reported trouble: a change of the table brings every deferred pod
//    back to the regular schedule, a lost watch or one that cannot be re-armed its own pod, an
//    inotify overflow all (ResyncStats::pods_brought_back).
//  * OnObjectChanged: every mounted volume reading the object is marked for remount and a
//    reconciler pass is scheduled at once (not at the next pod sync as in the kubelet).
//    OnTokenChanged does the same for the volumes including a service account token that was
//    renewed (or expired), from the token manager (VolumeManagerOptions::tokens).
//  * Orphans: undesired volumes are torn down, and the empty pod dirs the daemon created removed,
//    only after every pod source has delivered its first state (`all_sources_seen`). Volumes the
//    daemon did not set up are never torn down.
//  * Kubelet ownership: every volume the daemon refreshes is watched (VolumeDirWatcher) for
//    `..data` swaps; a swap it did not make is re-verified at once and, when the content differs,
//    decided by a fresh read of the objects (Reconciler::RequestVerify). Volumes beyond the
//    inotify watch limit, or whose dir's path no longer leads to the watched inode (a tmpfs
//    mounted over it or gone from under it), are verified at the periodic resync instead.
//  * Stop: no new operations; `done` runs once in-flight writes have finished.
//
// Loop-thread only; the object manager and the registry must outlive it.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_VOLUME_MANAGER_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_VOLUME_MANAGER_H_

#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "atomicwriter/removal_queue.h"
#include "cache/object_manager.h"
#include "kube/object_ref.h"
#include "plugins/plugin_registry.h"
#include "podconfig/pod_update.h"
#include "reload/reload_controller.h"
#include "volumemanager/disk/volume_dir_watcher.h"
#include "volumemanager/disk/write_gate.h"
#include "volumemanager/populator/desired_state_of_world_populator.h"
#include "volumemanager/reconciler/operation_executor.h"
#include "volumemanager/reconciler/reconciler.h"
#include "volumemanager/reconciler/reconstruct.h"
#include "volumemanager/state/actual_state_of_world.h"
#include "volumemanager/state/desired_state_of_world.h"

namespace volumemanager {

struct VolumeManagerOptions {
  std::string root_dir = "/var/lib/kubelet";
  std::chrono::milliseconds sync_frequency{60000};
  std::chrono::milliseconds reconcile_period{100};
  bool durable = false;
  bool tmpfs = true;  // secret, downwardAPI and projected volumes on tmpfs
  kube::ResourceList node_allocatable;
  // What the daemon owns under root_dir; required. Not owned.
  OwnershipJournal* journal = nullptr;
  // Service account tokens (cluster mode: cache/api_token_manager.h); null: none, and a
  // serviceAccountToken source fails naming itself. Not owned; its change handler is the
  // caller's to route to OnTokenChanged.
  cache::TokenManager* tokens = nullptr;
  std::chrono::milliseconds unpublished_grace = atomicwriter::kDefaultUnpublishedGrace;
  // --volume-ownership kubelet: the kubelet sets up and tears down every volume; the daemon
  // refreshes the content of those it has set up and leaves the volumes only it can produce
  // (plugins::VolumePlugin::KubeletOnly) alone.
  bool kubelet_owns_volumes = false;
  // With kubelet_owns_volumes: the objects the daemon is configured not to read (--no-secrets,
  // --object-namespaces; null: every object is read), whose volumes are then left to the kubelet,
  // each pod told once through `on_policy_refusal` (cluster mode: a Normal Event). Not owned.
  const cache::ReadPolicy* read_policy = nullptr;
  DesiredStateOfWorldPopulator::PolicyReport on_policy_refusal;
  // Whether operations may start before SetWritesAllowed(true) (the program creates the manager
  // once the node's lock is held, so true there; false waits for the call), and who writes, for
  // the log lines of each write.
  bool writes_allowed_at_start = true;
  std::string writer_identity;
  // One writer per node, checked on the pool threads (write_gate.h): an operation (or the orphan
  // dirs' removal) that a pool thread takes up while the gate is closed does not start. Null:
  // always open. Not owned.
  const WriteGate* write_gate = nullptr;
  // See ReconcilerOptions::on_mount_failure.
  std::function<void(const kube::Pod&, const std::string&, const std::string&)> on_mount_failure;
  // Reload actions (reload/reload_controller.h): the mode, limits and reports.
  ::reload::ReloadControllerOptions reload;
  // Observe mode (--observe): `disk` is an ObservingDisk (observing_disk.h), the reconciler's
  // lines of writes go to debug, reload actions are reported and never run
  // (ReloadControllerOptions::observe), and the orphan pod dirs are left. The journal may then be
  // OwnershipJournal::ReadOnly's.
  bool observe = false;
  // Every system call of the volume manager and its parts, and their clocks (null:
  // atomicwriter::PosixEnv(); must outlive the manager): set-up, teardown, subPath copies,
  // reconstruction, the volume dir watcher, the removal queue, deadlines and backoff.
  atomicwriter::Env* env = nullptr;
  // The reconciler's filesystem side (null: RealVolumeDisk(env)).
  std::shared_ptr<VolumeDisk> disk;
  // See ReconcilerOptions::on_subpath_failure.
  std::function<void(const kube::Pod&, const std::string&, const std::string&)> on_subpath_failure;
};

class VolumeManager : private ::reload::ReloadHost {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  VolumeManager(uv_loop_t* loop, VolumeManagerOptions options, cache::ObjectManager* objects,
                const plugins::PluginRegistry* registry, std::function<bool()> all_sources_seen);
  ~VolumeManager() override;
  VolumeManager(const VolumeManager&) = delete;
  VolumeManager& operator=(const VolumeManager&) = delete;

  void Start();
  void OnPodUpdate(const podconfig::PodUpdate& update);
  void OnObjectChanged(const kube::ObjectRef& object);
  void OnTokenChanged(const kube::TokenRef& token);
  // The token manager (null: none), for /debug/state.
  const cache::TokenManager* tokens() const { return options_.tokens; }
  // One writer per node: while false no operation starts (those in flight finish); the desired
  // state keeps following pods and objects, so the first pass after `true` catches up.
  void SetWritesAllowed(bool allowed);
  bool writes_allowed() const { return writes_allowed_; }
  // A new --sync-frequency (dynamic config): each pod's next resync after the one already
  // scheduled uses it.
  void SetSyncFrequency(std::chrono::milliseconds period) { options_.sync_frequency = period; }
  // The step resync times are rounded up to (see above).
  std::chrono::milliseconds ResyncGrid() const;
  static constexpr std::chrono::milliseconds kMaxResyncGrid{2000};
  // The distinct times of the pods' next resyncs, in order (tests, the idle benchmark).
  std::vector<SteadyTime> resync_times() const;
  // Stops timers and new work; `done` runs on the loop thread once nothing is in flight and the
  // manager's handles are closed.
  void Stop(std::function<void()> done);

  const DesiredStateOfWorld& desired() const { return dsw_; }
  const ActualStateOfWorld& actual() const { return asw_; }
  // The root dir its volumes live under (--root-dir).
  const std::string& root_dir() const { return options_.root_dir; }
  const ReconcilerStats& stats() const { return reconciler_.stats(); }
  // The rest of the manager's per-pod and per-volume state, for memory-bound checks.
  const OperationExecutor& executor() const { return executor_; }
  const DesiredStateOfWorldPopulator& populator() const { return populator_; }
  const Reconciler& reconciler() const { return reconciler_; }
  // The pod's next periodic resync; nullopt for a pod not known.
  std::optional<SteadyTime> next_resync(const std::string& pod_uid) const {
    auto it = resync_entry_.find(pod_uid);
    if (it == resync_entry_.end()) return std::nullopt;
    return it->second.at->first;
  }
  size_t resync_schedule_size() const { return resync_entry_.size() + resync_queue_.size(); }
  // The periodic resyncs so far: pods resynced, and their volumes marked for a remount or left
  // alone (announced objects, disk verified within disk_verify_interval: current by construction).
  struct ResyncStats {
    long pods = 0;
    long volumes_marked = 0;
    long volumes_current = 0;
    // Resyncs that put the pod's next one at its first disk check (every volume current), and
    // deferred resyncs brought back to the regular schedule (beside the kubelet: a mount, or a
    // watch's trouble).
    long pods_deferred = 0;
    long pods_brought_back = 0;
  };
  const ResyncStats& resync_stats() const { return resync_stats_; }
  bool reconstructed() const { return reconstructed_; }
  // The ownership journal (self ownership), else null.
  const OwnershipJournal* journal() const { return options_.journal; }
  // Not empty while reconstruction waits for the root's recorded filesystem (ReconstructResult):
  // expected and found. Retried with a backoff of 1 s doubling to 30 s.
  const std::string& waiting_for_filesystem() const { return waiting_for_filesystem_; }
  // The earliest time at which a pass has something to do by time alone (a pod's resync, a
  // volume's backoff, kubelet recheck or cleanup); nullopt: none. Work that events bring
  // (changes, completions) schedules a pass itself or is due at the next tick.
  std::optional<SteadyTime> NextTimedWork() const;
  const VolumeDirWatcher& dir_watcher() const { return dir_watcher_; }
  const ::reload::ReloadController& reload() const { return *reload_; }

 private:
  // An input of the volume changed (an object, a token): retry a failing one at once, and mark
  // it for remount (or look at its first mount again). Whether anything was marked.
  bool MarkInputChanged(const VolumeKey& key, SteadyTime now);
  struct ScanWork;
  struct OrphanWork;

  void QueueScan();
  void OnScanDone(ReconstructResult result);
  void RunPass();
  void SchedulePassSoon();
  // The tick, one-shot: after a pass, armed for the next tick while volumes are due (or the pod
  // sources not all seen), else for the next timed work, else stopped.
  void StartTick(std::chrono::milliseconds delay);
  void ArmTick(SteadyTime now);
  // The reconciler has new work (a volume due, a timer): a pass within a tick.
  void WorkArrived();
  void ResyncDuePods(SteadyTime now);
  // Moves the deferred resync (beyond any regular one) of `pod_uid`, or of every pod when null,
  // back to the regular schedule (NextResync from now).
  void ResyncDeferredPodsAgain(const PodUid* pod_uid);
  void CleanUpOrphanPodDirs();
  // A pod's next resync: sync_frequency x (1 + U[0, 0.5)) from `now`, rounded up to the resync
  // grid (ResyncGrid).
  SteadyTime NextResync(SteadyTime now);
  void MaybeFinishStop();
  void WatchVolumeDir(const VolumeKey& key, const std::string& dir);
  // ReloadHost.
  std::vector<std::string> RefreshedVolumes(const std::string& pod_uid) const override;
  ::reload::VolumeProgress Progress(const std::string& pod_uid,
                                    const std::string& volume) const override;
  std::vector<std::string> ObjectVersions(const std::string& pod_uid,
                                          const std::vector<std::string>& volumes) const override;

  uv_loop_t* loop_;
  VolumeManagerOptions options_;
  const plugins::PluginRegistry* registry_;
  cache::ObjectManager* objects_;  // not owned
  std::function<bool()> all_sources_seen_;
  DesiredStateOfWorld dsw_;
  ActualStateOfWorld asw_;
  // The writes' version dir removals, on a thread of its own; outlives every write (stopped
  // once none is in flight).
  atomicwriter::RemovalQueue removals_;
  OperationExecutor executor_;
  DesiredStateOfWorldPopulator populator_;
  Reconciler reconciler_;
  VolumeDirWatcher dir_watcher_;
  std::unique_ptr<::reload::ReloadController> reload_;
  bool reload_closed_ = false;

  uv_timer_t* tick_ = nullptr;  // the next pass with work due (see ArmTick)
  uv_timer_t* soon_ = nullptr;  // an extra pass right away, coalesced
  bool soon_pending_ = false;
  bool reconstructed_ = false;
  std::string waiting_for_filesystem_;
  SteadyTime scan_retry_at_{};
  std::chrono::seconds scan_retry_delay_{1};
  bool orphans_cleaned_ = false;
  std::vector<std::string> scanned_pod_uids_;
  // Periodic resync schedule: due time -> the pod's entry, and each pod's entry (its UID, shared
  // with its volumes' keys when it has any) with its place in the schedule. A pass looks only at
  // the front, so an idle tick costs one comparison whatever the number of pods; a pod resynced
  // moves its node to its next time, allocating nothing.
  struct ResyncEntry;
  using ResyncQueue =
      std::multimap<SteadyTime, std::reference_wrapper<std::pair<const PodUid, ResyncEntry>>>;
  struct ResyncEntry {
    ResyncQueue::iterator at;
  };
  ResyncQueue resync_queue_;
  std::map<PodUid, ResyncEntry, std::less<>> resync_entry_;
  std::mt19937 rng_{std::random_device{}()};
  ResyncStats resync_stats_;
  std::vector<VolumeKey> to_mark_;  // ResyncDuePods' volumes to mark, kept for its capacity

  bool writes_allowed_ = true;
  bool scan_in_flight_ = false;
  bool orphan_work_in_flight_ = false;
  bool stopping_ = false;
  int open_handles_ = 0;
  std::function<void()> stop_done_;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_VOLUME_MANAGER_H_
