// Reconciler: one pass compares desired and actual state and starts the operations that close
// the gap (docs/kubelet-behavior.md §6.4): tear down volumes no pod wants (only once every pod
// source has delivered its first state and the start-up scan is done), mount desired volumes that
// are missing or uncertain, and remount those marked for it.
//
// Before a mount or remount, the object manager is asked to make the volume's objects current as
// its strategy promises (ObjectManager::Fetch: a GET under Get, a stale entry refreshed under
// Cache, nothing under a synced Watch); the operation starts when that completes, and counts as
// in progress meanwhile. A volume whose disk shows a swap the daemon did not make is fetched with
// a fresh read instead (RequestFreshRemount), so that the source decides which content is newer.
//
// The loop thread does no bulk work: it takes a snapshot of the objects a volume reads (shared
// immutable revisions with their content digests, cache/object_manager.h) and compares the
// volume's inputs (volume_inputs.h) with those of the content on disk; equal inputs, verified on
// disk within `disk_verify_interval`, end the remount there, with no payload built, hashed or
// written. Otherwise the payload is built from the snapshot and written on the thread pool through
// the OperationExecutor (the writer publishes nothing when the bytes on disk already match).
//
// Failures are logged once per attempt as FailedMount with the pod, the volume, the unique
// volume name, the error text of docs/kubelet-behavior.md §7 and the backoff; a failed remount
// keeps the last good content, a failed first mount leaves no directory.
//
// Loop-thread only.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "atomicwriter/atomic_writer.h"
#include "cache/object_manager.h"
#include "kube/pod.h"
#include "logging/structured_log.h"
#include "plugins/plugin_registry.h"
#include "volumemanager/actual_state_of_world.h"
#include "volumemanager/desired_state_of_world.h"
#include "volumemanager/operation_executor.h"
#include "volumemanager/operation_metrics.h"
#include "volumemanager/ownership_journal.h"

namespace volumemanager {

struct ReconcilerOptions {
  std::string root_dir;
  bool durable = false;  // fsync writes (off by default, like the kubelet)
  bool tmpfs = true;     // memory-medium volumes on tmpfs, as the kubelet
  // A remount whose inputs equal those of the content last written is served without touching
  // the disk, unless the disk was last read longer ago than this; then the writer verifies it
  // (and repairs links or debris). Keeps the periodic resync cheap.
  std::chrono::milliseconds disk_verify_interval = std::chrono::minutes(10);
  kube::ResourceList node_allocatable;
  // What the daemon owns under the root dir; required. Not owned.
  OwnershipJournal* journal = nullptr;
  // How long a version dir that ..data does not point to is left alone (it may be another
  // writer's write in progress); a volume that has such dirs is written again after it.
  std::chrono::milliseconds unpublished_grace = atomicwriter::kDefaultUnpublishedGrace;
  // Removes replaced versions and other unpublished entries once their grace period is over, off
  // the writes' path (null: the volume is written again after the grace period to remove them).
  // Not owned.
  atomicwriter::RemovalQueue* removals = nullptr;
  // Beside a kubelet that owns every volume's life (--volume-ownership kubelet): a volume is
  // written only once the kubelet has set it up (its ..data exists; until then it is looked at
  // again every `kubelet_setup_recheck`), nothing is created, mounted or torn down, and
  // pod-derived files are carried over from the live version (plugins::LiveContent).
  bool kubelet_owns_volumes = false;
  std::chrono::milliseconds kubelet_setup_recheck{1000};
  // Called for every failed mount or refresh of a desired volume, after it was logged: the pod,
  // the volume's name and the kubelet's error text (never object data). E.g. a FailedMount Event.
  std::function<void(const kube::Pod& pod, const std::string& volume, const std::string& error)>
      on_mount_failure;
  // Kubelet ownership: a volume's content was verified or written (`dir` is its volume dir), and
  // a volume is no longer refreshed (gone from disk, or no longer desired). E.g. to watch the
  // volume dir for swaps by the kubelet's writer, and to stop.
  std::function<void(const VolumeKey& key, const std::string& dir)> on_volume_verified;
  std::function<void(const VolumeKey& key)> on_volume_released;
  // Who writes (the node lock's holder identity), named in the log line of each write.
  std::string writer_identity;
};

// Counters a reconciler keeps, for logs, tests and metrics.
struct ReconcilerStats {
  long mounts_ok = 0;
  long mounts_failed = 0;
  long versions_published = 0;
  long remounts_unchanged = 0;  // same inputs as on disk: nothing built, no disk access
  long teardowns_ok = 0;
  long teardowns_failed = 0;
  long teardowns_not_owned = 0;   // left in place: the daemon did not set them up
  long cleanups_failed = 0;       // published, but removing old versions or links failed
  long kubelet_setup_checks = 0;  // a volume found not set up by the kubelet yet
  long released_to_kubelet = 0;   // no longer refreshed (pod gone); the kubelet tears it down
  long swaps_verified = 0;        // ..data checked after a swap report
  long foreign_swaps = 0;         // ..data found swapped by another writer: fetched fresh
  // Beside the kubelet: a refresh put off until an object's first read lands (not a failure: the
  // kubelet's content stays, and the read's change notification brings the volume back).
  long waits_for_first_read = 0;
};

class Reconciler {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  Reconciler(ReconcilerOptions options, DesiredStateOfWorld* dsw, ActualStateOfWorld* asw,
             OperationExecutor* executor, cache::ObjectManager* objects);
  ~Reconciler();

  // One pass over the volumes that may need an operation: those whose desired or actual state
  // changed since the last pass, those waiting out a backoff, those whose operation finished,
  // and undesired volumes waiting for `ready_to_unmount`. An idle pass does nothing.
  // `ready_to_unmount`: every pod source seen and the start-up scan done.
  // `is_terminating(uid)`: the pod's volumes must not be refreshed.
  void Reconcile(SteadyTime now, bool ready_to_unmount,
                 const std::function<bool(const std::string&)>& is_terminating);

  // Looks at `key` again in the next pass (e.g. a volume waiting out a failure backoff whose
  // object changed).
  void Poke(const VolumeKey& key) { pending_.insert(key); }
  // The next mount or remount of `key` reads its objects fresh from the source (not from a
  // cache), and marks the volume for a remount.
  void RequestFreshRemount(const VolumeKey& key, SteadyTime now);
  // Checks on the thread pool which version `key`'s ..data points to: another than the one the
  // daemon last wrote or verified means another writer (the kubelet) swapped it, and the volume
  // is remounted with a fresh read of its objects (the source decides which content is newer);
  // no ..data means the kubelet tore the volume down. No-op for a volume not mounted.
  void RequestVerify(const VolumeKey& key);

  // Called (loop thread) after an operation on `key` finished and state was updated.
  void SetOnOperationDone(std::function<void(const VolumeKey&)> cb) { on_done_ = std::move(cb); }
  // Called (loop thread) when an asynchronous step before an operation (an object fetch, the
  // check that the kubelet has set a volume up) completed: the operation can start in the next
  // pass.
  void SetOnFetched(std::function<void()> cb) { on_fetched_ = std::move(cb); }

  const ReconcilerStats& stats() const { return stats_; }
  // Durations, propagation and failures of its operations (/metrics).
  const OperationMetrics& metrics() const { return metrics_; }
  // Volumes to look at again in a later pass (bounded memory, tests).
  size_t pending_count() const { return pending_.size(); }
  size_t ledger_count() const { return ledgers_.size(); }
  size_t cleanup_due_count() const { return cleanup_due_.size(); }
  // Volumes waiting for the kubelet to set them up (kubelet ownership).
  size_t waiting_for_kubelet_count() const { return kubelet_wait_.size(); }
  size_t fetch_state_count() const {
    return fetching_.size() + fetched_.size() + fresh_.size() + verify_.size() +
           set_up_seen_.size();
  }

 private:
  // Starts what `key` needs; false when it must be looked at again in a later pass.
  bool Evaluate(const VolumeKey& key, SteadyTime now, bool ready_to_unmount,
                const std::function<bool(const std::string&)>& is_terminating);
  // Both return true when the operation was queued (its completion puts the key back), false
  // when the key must be looked at again in a later pass.
  bool StartMount(const DesiredVolume& desired, const MountedVolume* mounted, SteadyTime now);
  // Asks the object manager for the volume's objects (mode per fresh_); true when they are ready
  // now, false when the fetch completes later (its completion puts the key back).
  bool FetchObjects(const DesiredVolume& desired);
  bool StartTearDown(const MountedVolume& mounted);
  bool StartVerify(const MountedVolume& mounted);
  // Kubelet ownership, before a first mount: whether the kubelet has set the volume up, checked
  // on the pool, so that a volume still waiting for it costs no object fetch.
  bool StartSetUpCheck(const DesiredVolume& desired);
  // Kubelet ownership: the volume is not (or no longer) set up; look again later.
  void AwaitKubeletSetUp(const VolumeKey& key, bool was_mounted);
  void LogFailure(const DesiredVolume& desired, const std::string& error);
  // The volume's pod for log lines: namespace/name from the desired state, else as last mounted
  // ("" for a volume reconstructed at start whose pod has not been seen).
  logging::Value PodName(const VolumeKey& key) const;
  // ", writer " when a writer identity is set, for the log line of a write.
  // Metrics of a finished operation that started at `started`. RecordMount runs before the
  // actual state is updated (it reads the remount request the operation served).
  void RecordMount(const VolumeKey& key, const std::string& plugin_dir, bool published,
                   SteadyTime started);
  void RecordFailure(const char* operation, const DesiredVolume* desired,
                     const std::string& plugin_dir, const base::Status& error, SteadyTime started);

  ReconcilerOptions options_;
  // options_.node_allocatable, shared by every payload build instead of copied into each.
  std::shared_ptr<const kube::ResourceList> node_allocatable_;
  ObjectsDigestMemo digests_;
  DesiredStateOfWorld* dsw_;
  ActualStateOfWorld* asw_;
  OperationExecutor* executor_;
  cache::ObjectManager* objects_;
  std::function<void(const VolumeKey&)> on_done_;
  std::function<void()> on_fetched_;
  ReconcilerStats stats_;
  OperationMetrics metrics_;
  std::set<VolumeKey> pending_;
  // Each volume's record of unpublished version dirs, kept across its writes.
  std::map<VolumeKey, std::shared_ptr<atomicwriter::UnpublishedLedger>> ledgers_;
  // Volumes to write again (to the disk, not from the digest) once leftovers are past their
  // grace period or a failed cleanup is due for a retry.
  std::multimap<SteadyTime, VolumeKey> cleanup_due_;
  // Volumes the kubelet has not set up yet, by when to look again; and each one's entry.
  std::multimap<SteadyTime, VolumeKey> kubelet_wait_;
  std::map<VolumeKey, std::multimap<SteadyTime, VolumeKey>::iterator> kubelet_wait_entry_;
  // Object fetches before an operation: in progress, completed (the operation may start), and
  // volumes whose next fetch must be fresh.
  std::set<VolumeKey> fetching_;
  std::set<VolumeKey> fetched_;
  std::set<VolumeKey> fresh_;
  // Volumes whose ..data must be checked (a swap was reported).
  std::set<VolumeKey> verify_;
  // Kubelet ownership: volumes not mounted yet that the kubelet was seen to have set up.
  std::set<VolumeKey> set_up_seen_;
  // Fetch completions check it: the object manager may outlive the reconciler.
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_H_
