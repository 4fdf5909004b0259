// Reconciler: one pass compares desired and actual state and starts the operations that close
// the gap (docs/kubelet-behavior.md §6.4): tear down volumes no pod wants (only once every pod
// source has delivered its first state and the start-up scan is done), mount desired volumes that
// are missing or uncertain, and remount those marked for it.
//
// Before a mount or remount, the object manager is asked to make the volume's objects current as
// its strategy promises (ObjectManager::Fetch: a GET under Get, a stale entry refreshed under
// Cache, nothing under a synced Watch), and the token manager the service account tokens the
// volume includes (TokenManager::Fetch: a TokenRequest for a token not received or due for its
// refresh); the operation starts when both complete, and counts as in progress meanwhile. A volume
// whose disk shows a swap the daemon did not make is fetched with a fresh read instead
// (RequestFreshRemount), so that the source decides which content is newer.
//
// The loop thread does no bulk work: it takes a snapshot of the objects a volume reads (shared
// immutable revisions with their content digests, cache/object_manager.h) and of its tokens
// (shared immutable strings with a serial, cache/token_manager.h) and compares the
// volume's inputs (volume_inputs.h) with those of the content on disk; equal inputs, verified on
// disk within `disk_verify_interval`, end the remount there, with no payload built, hashed or
// written. Otherwise the payload is built from the snapshot and written on the thread pool through
// the OperationExecutor (the writer publishes nothing when the bytes on disk already match).
//
// Failures are logged once per attempt as FailedMount with the pod, the volume, the unique
// volume name, the error text of docs/kubelet-behavior.md §7 and the backoff; a failed remount
// keeps the last good content, a failed first mount leaves no directory.
//
// Each volume the reconciler knows has one record (VolumeRecord) whose phase says where the
// volume is: due for a look, waiting for the kubelet, fetching its objects (a normal or a fresh
// read), fetched, writing, verifying, tearing down, backing off, waiting for the pod sources, or
// idle (current). Only the reconciler's transitions (Enter) change a phase, and entering one
// drops what belonged to the phase left (its fetch, its timer). A write starts only from
// kFetched, and only when the read it follows covers every fresh read requested before it (a
// fresh request drops a fetch in flight or done): a cached read can never decide against another
// writer's swap. An idle volume costs a pass nothing: a pass looks only at due records, those
// whose desired or actual state changed, and the front of one time-ordered queue of timers.
// An operation cancelled before its first filesystem call (IsCancelled, disk/write_gate.h:
// writes revoked) is no failure: no backoff, no FailedMount, no failure metric; the record is due
// again with whatever it still owes (a fresh read, a verify). The actual state keeps what is on
// disk (version, inputs, the remount requested); the record, what the reconciler does about it.
//
// Whoever waits for a volume's new content (reload actions) asks Progress whether newer content
// may still be on its way, and hears of every end of that way: an operation's completion
// (SetOnOperationDone) and the record coming to rest without one (SetOnSettled), as a remount
// that finds the inputs it last wrote does, on the loop.
//
// Loop-thread only.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONCILER_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONCILER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "cache/object_manager.h"
#include "cache/token_manager.h"
#include "kube/pod.h"
#include "logging/structured_log.h"
#include "plugins/plugin_registry.h"
#include "volumemanager/disk/subpath_update.h"
#include "volumemanager/disk/volume_disk.h"
#include "volumemanager/disk/volume_setup.h"
#include "volumemanager/journal/ownership_journal.h"
#include "volumemanager/reconciler/operation_executor.h"
#include "volumemanager/reconciler/operation_metrics.h"
#include "volumemanager/reconciler/reconciler_events.h"
#include "volumemanager/reconciler/subpath_report.h"
#include "volumemanager/reconciler/volume_record.h"
#include "volumemanager/reconciler/write_operation.h"
#include "volumemanager/state/actual_state_of_world.h"
#include "volumemanager/state/desired_state_of_world.h"

namespace volumemanager {

// Who owns a volume's life, in one place: the daemon (self-owned: it sets volumes up, mounts
// their tmpfs, records them in the journal and tears them down; the version a write replaces may
// go at once where the filesystem withholds freed inodes) or the kubelet (--volume-ownership
// kubelet: the daemon writes only into a volume the kubelet has set up, after the first read of
// each of its objects has landed, carries pod-derived files over from the live version, creates
// and tears down nothing, releases a volume its pod left, and every version it replaces waits
// out the grace period, since another writer may be at work).
struct OwnershipPolicy {
  bool kubelet_owned = false;

  static OwnershipPolicy SelfOwned() { return {false}; }
  static OwnershipPolicy KubeletOwned() { return {true}; }

  // Before its first write, the volume waits until the kubelet has set it up.
  bool waits_for_set_up() const { return kubelet_owned; }
  // A write waits for the first read of each object instead of failing on it.
  bool waits_for_first_read() const { return kubelet_owned; }
  // Undesired volumes are torn down (else released: the kubelet tears them down).
  bool tears_down() const { return !kubelet_owned; }
  // Writes refresh content only (SetUpRequest::refresh_only: no mkdir, no tmpfs, no journal
  // record; every replaced version waits out the grace period).
  bool refresh_only() const { return kubelet_owned; }
  bool mounts_tmpfs(bool tmpfs_enabled, plugins::Medium medium) const {
    return !kubelet_owned && tmpfs_enabled && medium == plugins::Medium::kMemory;
  }
  // Pod-derived files come from the live version, as the kubelet wrote them.
  bool carries_pod_derived_over() const { return kubelet_owned; }
};

struct ReconcilerOptions {
  std::string root_dir;
  bool durable = false;  // fsync writes (off by default, like the kubelet)
  bool tmpfs = true;     // memory-medium volumes on tmpfs, as the kubelet
  // A remount whose inputs equal those of the content last written is served without touching
  // the disk, unless the disk was last read longer ago than this; then the writer verifies it
  // (and repairs links or debris). Keeps the periodic resync cheap.
  std::chrono::milliseconds disk_verify_interval = std::chrono::minutes(10);
  // At most this many first mounts queued or running on the thread pool at once (0: no limit).
  // The volumes to mount beyond it wait, due, for the pass that a first mount's completion asks
  // for (SetOnReadyToStart). A burst of first mounts (1,000 pods at start) then holds the
  // temporaries of this many writes at a time instead of all of them, so the state that stays
  // (records, actual state, ledgers), allocated meanwhile, is not scattered between them: the
  // holes that 3,000 queued writes left behind kept 2.5 MiB of heap resident that glibc could not
  // give back (BENCHMARKS.md, "Memory against pod count"). Remounts are not held back: they create
  // no lasting state, and a change reaches its last pod soonest with all of them queued at once
  // (the loop's reload calls between completions would leave the pool waiting for a pass).
  size_t max_first_mounts_in_flight = 64;
  kube::ResourceList node_allocatable;
  // What the daemon owns under the root dir; required (unless `disk` is a fake). Not owned.
  OwnershipJournal* journal = nullptr;
  // Service account tokens for projected serviceAccountToken sources (cluster mode); null: none,
  // and such a source fails naming itself. Not owned.
  cache::TokenManager* tokens = nullptr;
  // How long a version dir that ..data does not point to is left alone (it may be another
  // writer's write in progress); a volume that has such dirs is written again after it.
  std::chrono::milliseconds unpublished_grace = atomicwriter::kDefaultUnpublishedGrace;
  // Removes replaced versions and other unpublished entries once their grace period is over, off
  // the writes' path (null: the volume is written again after the grace period to remove them).
  // Not owned.
  atomicwriter::RemovalQueue* removals = nullptr;
  // Beside a kubelet that owns every volume's life (--volume-ownership kubelet): see
  // OwnershipPolicy. A volume not set up yet is looked at again every `kubelet_setup_recheck`.
  bool kubelet_owns_volumes = false;
  std::chrono::milliseconds kubelet_setup_recheck{1000};
  // Called for every failed mount or refresh of a desired volume, after it was logged: the pod,
  // the volume's name and the kubelet's error text (never object data). E.g. a FailedMount Event.
  std::function<void(const kube::Pod& pod, const std::string& volume, const std::string& error)>
      on_mount_failure;
  // Called for every subPath copy refused or failed after a write of a volume of a pod annotated
  // `volumemanager.io/update-subpaths` (and for an annotation value that is neither "true" nor
  // "false"), after it was logged: the pod, the volume and what went wrong (container, index,
  // subPath, reason; never file content). E.g. a FailedSubPathUpdate Event. Never for a copy
  // not bound yet (its container has not started: no failure).
  std::function<void(const kube::Pod& pod, const std::string& volume, const std::string& error)>
      on_subpath_failure;
  // Kubelet ownership: a volume's content was verified or written (`dir` is its volume dir), and
  // a volume is no longer refreshed (gone from disk, or no longer desired). E.g. to watch the
  // volume dir for swaps by the kubelet's writer, and to stop.
  std::function<void(const VolumeKey& key, const std::string& dir)> on_volume_verified;
  std::function<void(const VolumeKey& key)> on_volume_released;
  // A volume's content changed on disk after its first set-up (reload actions): a write of the
  // daemon's published a new version over earlier content (a remount, a volume found at start, or
  // beside the kubelet any write: the kubelet set it up), or a check of ..data found another
  // writer's swap (the fresh read and write that follow correct it if it brought older content).
  // Never for a write that changed nothing, nor for one whose inputs differ from those on disk in
  // their service account tokens only (a renewal: applications re-read the token file). A volume
  // found at start has no inputs on record: its first write, with a new token, counts.
  std::function<void(const VolumeKey& key, const ContentSwap& swap)> on_content_swapped;
  // Who writes (the node lock's holder identity), named in the log line of each write.
  std::string writer_identity;
  // Observe mode (--observe, `disk` an ObservingDisk): the disk reports what it would change, so
  // the reconciler's own lines of a set-up, an update and a teardown go to debug (they would
  // claim writes that never happen), and each request names its pod for the disk's log lines.
  bool observe = false;
  // The system calls and the clocks (null: atomicwriter::PosixEnv(); must outlive the
  // reconciler), the filesystem side (null: RealVolumeDisk(env)) and the clock of deadlines and
  // backoff (empty: the env's SteadyNow). Tests inject each.
  atomicwriter::Env* env = nullptr;
  std::shared_ptr<VolumeDisk> disk;
  std::function<std::chrono::steady_clock::time_point()> clock;
};

// Counters a reconciler keeps, for logs, tests and metrics.
struct ReconcilerStats {
  // A write of a volume this daemon set up (self ownership): its set-up or a later refresh.
  long mounts_ok = 0;
  // Kubelet ownership: a write into a volume the kubelet set up (written, or found current); the
  // daemon sets nothing up.
  long refreshes_ok = 0;
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

// What the passes cost and what was cancelled, for tests and benchmarks (kept apart from
// ReconcilerStats, whose counters /metrics exports one by one).
struct ReconcilerPassStats {
  long passes = 0;
  long idle_passes = 0;      // found nothing due: visited no volume
  long volumes_visited = 0;  // records evaluated, over all passes
  // Operations cancelled before their first filesystem call (writes revoked: the node lock was
  // lost): not failures; the volume is due again once writes are allowed.
  long operations_cancelled = 0;
  // Passes that left volumes to mount due because `max_first_mounts_in_flight` were in flight.
  long first_mount_window_full = 0;
};

class Reconciler {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // `runner`: the OperationExecutor (tests: a fake). Not owned, nor are the states and objects.
  Reconciler(ReconcilerOptions options, DesiredStateOfWorld* dsw, ActualStateOfWorld* asw,
             OperationRunner* runner, cache::ObjectManager* objects);
  ~Reconciler();

  // One pass over the volumes that may need an operation: those whose desired or actual state
  // changed since the last pass, those due (an operation or fetch finished, a request), and
  // those whose timer (kubelet recheck, backoff, cleanup) expired; with `ready_to_unmount` newly
  // true, the undesired volumes waiting for it. A pass with nothing due visits no volume and
  // allocates nothing.
  // `ready_to_unmount`: every pod source seen and the start-up scan done.
  // `is_terminating(uid)`: the pod's volumes must not be refreshed.
  void Reconcile(SteadyTime now, bool ready_to_unmount,
                 const std::function<bool(const std::string&)>& is_terminating);
  // Whether a pass at `now` has anything to look at (false: it would return at once).
  bool HasWorkAt(SteadyTime now, bool ready_to_unmount) const;
  // When the earliest timer is due (nullopt: none); changed state and due records are due now.
  std::optional<SteadyTime> NextTimer() const { return records_.NextTimer(); }

  // Looks at `key` again in the next pass (e.g. a volume waiting out a failure backoff whose
  // object changed, or one waiting for an object's first read).
  void Poke(const VolumeKey& key);
  // The next write of `key` follows a fresh read of its objects from the source (not from a
  // cache) that started after this call, and the volume is marked for a remount. A fetch in
  // flight or done is dropped.
  void RequestFreshRemount(const VolumeKey& key, SteadyTime now);
  // Checks on the thread pool which version `key`'s ..data points to: another than the one the
  // daemon last wrote or verified means another writer (the kubelet) swapped it, and the volume
  // is remounted with a fresh read of its objects (the source decides which content is newer);
  // no ..data means the kubelet tore the volume down. No-op for a volume not mounted.
  void RequestVerify(const VolumeKey& key);

  // Whether newer content of `key` may still be on its way to disk, for whoever waits for it
  // (reload actions): kWriting while a write, object read, ..data check or kubelet set-up check of
  // it runs, or while the next pass starts one (its record is due, or its state changed since the
  // last pass, and a first mount, a remount, a check or a fresh read is owed); kFailing while it
  // waits out the backoff of a failed attempt (or rests with one: its pod terminating); kSettled
  // otherwise: current, waiting for the kubelet's set-up or an object's first read, its pod
  // terminating, not desired. Every way out of kWriting is reported: SetOnOperationDone or
  // SetOnSettled.
  VolumeProgress Progress(const VolumeKey& key) const;

  // Called (loop thread) after an operation on `key` finished and state was updated.
  void SetOnOperationDone(std::function<void(const VolumeKey&)> cb) { on_done_ = std::move(cb); }
  // Called (loop thread) whenever `key`'s record comes to rest (enters idle, backing off, awaiting
  // the kubelet or awaiting the pod sources from another phase), state updated, also where no
  // operation ends: a remount that finds the inputs it last wrote, or a pass that finds nothing to
  // do, ends on the loop. Called from inside a pass too; it must not change the reconciler.
  void SetOnSettled(std::function<void(const VolumeKey&)> cb) { on_settled_ = std::move(cb); }
  // Called (loop thread) when an operation can start in the next pass: an asynchronous step
  // before it (an object fetch, the check that the kubelet has set a volume up) completed, or a
  // first mount ended while volumes waited for a place among `max_first_mounts_in_flight`.
  void SetOnReadyToStart(std::function<void()> cb) { on_ready_to_start_ = std::move(cb); }
  // Called (loop thread) when, outside a pass, a volume became due or got a timer (a completion,
  // a request, a change seen by Poke): the caller runs a pass in time (a pass itself reports
  // nothing: its caller looks at pending_count() and NextTimer() after it).
  void SetOnWorkAdded(std::function<void()> cb) { on_work_added_ = std::move(cb); }

  std::chrono::milliseconds disk_verify_interval() const { return options_.disk_verify_interval; }
  const ReconcilerStats& stats() const { return stats_; }
  const ReconcilerPassStats& pass_stats() const { return pass_stats_; }
  const SubPathCopyStats& subpath_stats() const { return subpaths_.stats(); }
  // Durations, propagation and failures of its operations (/metrics).
  const OperationMetrics& metrics() const { return metrics_; }
  // The record of `key` (null: the reconciler keeps nothing for it).
  const VolumeRecord* Find(const VolumeKey& key) const { return records_.Find(key); }
  // Records (bounded memory, tests), and those in a phase.
  size_t record_count() const { return records_.size(); }
  size_t count_in(VolumePhase phase) const { return records_.count_in(phase); }
  // Volumes to look at in the next pass (bounded memory, tests).
  size_t pending_count() const { return records_.due_count(); }
  // First mounts queued or running on the pool (at most `max_first_mounts_in_flight`).
  size_t first_mounts_in_flight() const { return first_mounts_in_flight_; }
  size_t ledger_count() const { return records_.ledger_count(); }
  size_t cleanup_due_count() const { return records_.cleanup_due_count(); }
  // Volumes waiting for the kubelet to set them up (kubelet ownership).
  size_t waiting_for_kubelet_count() const { return count_in(VolumePhase::kAwaitingKubelet); }
  // Volumes with a fetch in flight or done, a verify or a kubelet set-up check pending.
  size_t fetch_state_count() const { return records_.fetch_state_count(); }

 private:
  // The one way to change a record's phase: leaves the old phase (its timer, its fetch) and
  // enters `phase`; `due` for kAwaitingKubelet and kBackingOff.
  void Enter(const VolumeKey& key, VolumeRecord& record, VolumePhase phase,
             SteadyTime due = SteadyTime{});
  VolumeRecord& Record(const VolumeKey& key);
  // The record's state changed outside an operation (desired, actual, a request): a waiting
  // record becomes due; one in flight is looked at when its operation completes.
  void MarkDue(const VolumeKey& key);
  // Tells the caller about work added outside a pass.
  void WorkAdded() {
    if (!in_pass_ && on_work_added_) on_work_added_();
  }
  // Drops the record (neither desired nor mounted, or released).
  void Erase(const VolumeKey& key);

  // Starts what a due (or fetched) volume needs, and moves it to its next phase.
  void Evaluate(const VolumeKey& key, VolumeRecord& record, SteadyTime now, bool ready_to_unmount,
                const std::function<bool(const std::string&)>& is_terminating);
  // The operation could not start: in flight (its completion puts the key back) or backing off.
  void Blocked(const VolumeKey& key, VolumeRecord& record, SteadyTime now);
  void StartFetch(VolumeKey key, const DesiredVolume& desired, VolumeRecord& record);
  void FetchDone(const VolumeKey& key, uint64_t fetch_id);
  void StartWrite(VolumeKey key, const DesiredVolume& desired, const MountedVolume* mounted,
                  VolumeRecord& record, SteadyTime now);
  // What the loop knew as a write started, for its completion.
  struct WriteStart {
    bool first_mount = false;
    bool fresh = false;  // it follows a fresh read, which covers `covers` fresh requests
    uint64_t covers = 0;
    bool tokens_only = false;  // only the tokens differ from the inputs on disk (a renewal)
    SteadyTime changed_at{};   // when the change it serves was asked for
    SteadyTime started_at{};
    std::string versions;  // the objects' versions read, for the log line
    VolumeInputs inputs;
  };
  // A write's completion (loop thread): records its outcome in the actual state, the record, the
  // counters and metrics, and says it once.
  void WriteDone(const VolumeKey& key, WriteOperation& op, WriteStart start, const base::Status& s);
  void StartTearDown(VolumeKey key, const MountedVolume& mounted, VolumeRecord& record);
  void StartVerify(VolumeKey key, const MountedVolume& mounted, VolumeRecord& record);
  // Kubelet ownership, before a first mount: whether the kubelet has set the volume up, checked
  // on the pool, so that a volume still waiting for it costs no object fetch.
  void StartSetUpCheck(VolumeKey key, const DesiredVolume& desired, VolumeRecord& record);
  // Kubelet ownership: the volume is not (or no longer) set up; look again later.
  void AwaitKubeletSetUp(const VolumeKey& key, bool was_mounted);
  // The executor's Run, the volume's record told at the completion that an operation ended
  // (VolumeRecord::operation_ended) before `done` runs.
  bool RunOperation(const VolumeKey& key, std::function<base::Status()> work,
                    std::function<void(const base::Status&)> done);
  // An operation's completion: cancelled (no failure), failed (backoff) or done (due again).
  void AfterOperation(const VolumeKey& key, const base::Status& s);
  // After a successful write: counts, keeps, logs and reports what became of the pod's subPath
  // mounts of the volume (`plan` as the write started, `copies` as it left them).
  void RecordSubPathCopies(const VolumeKey& key, const SubPathPlan& plan,
                           std::vector<SubPathCopy> copies);
  // The volume's pod for log lines: namespace/name from the desired state, else as last mounted
  // ("" for a volume reconstructed at start whose pod has not been seen).
  logging::Value PodName(const VolumeKey& key) const;
  // Metrics of a finished operation that started at `started`. RecordMount runs before the
  // actual state is updated (it reads the remount request the operation served).
  void RecordMount(const VolumeKey& key, const std::string& plugin_dir, bool published,
                   SteadyTime started);
  void RecordFailure(const char* operation, const DesiredVolume* desired,
                     const std::string& plugin_dir, const base::Status& error, SteadyTime started);
  SteadyTime Now() const { return options_.clock(); }

  ReconcilerOptions options_;
  OwnershipPolicy policy_;
  // options_.node_allocatable, shared by every payload build instead of copied into each.
  std::shared_ptr<const kube::ResourceList> node_allocatable_;
  ObjectsDigestMemo digests_;
  DesiredStateOfWorld* dsw_;
  ActualStateOfWorld* asw_;
  OperationRunner* executor_;
  cache::ObjectManager* objects_;
  std::function<void(const VolumeKey&)> on_done_;
  std::function<void(const VolumeKey&)> on_settled_;
  std::function<void()> on_ready_to_start_;
  std::function<void()> on_work_added_;
  bool in_pass_ = false;
  bool FirstMountWindowFull() const {
    return options_.max_first_mounts_in_flight != 0 &&
           first_mounts_in_flight_ >= options_.max_first_mounts_in_flight;
  }
  size_t first_mounts_in_flight_ = 0;
  bool first_mount_place_wanted_ = false;  // a pass left volumes due with the window full
  ReconcilerStats stats_;
  ReconcilerPassStats pass_stats_;
  SubPathReporter subpaths_;
  OperationMetrics metrics_;
  VolumeRecords records_;
  uint64_t next_fetch_id_ = 0;
  bool was_ready_to_unmount_ = false;
  // Fetch completions check it: the object manager may outlive the reconciler.
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_RECONCILER_H_
