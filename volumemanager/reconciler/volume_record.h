// The reconciler's record of each volume it knows (VolumeRecord), and the table that holds them
// (VolumeRecords) with its indexes: the records due now, those waiting for the pod sources, and one
// time-ordered queue of timers (a kubelet recheck or a backoff per phase, and a write's cleanup).
// A record's phase changes only by VolumeRecords::Enter, which leaves the old phase (its index
// entry, its timer, its fetch) and enters the new one; the indexes are kept by Enter alone, so a
// pass finds what is due without visiting an idle volume.
//
// Loop-thread only (the reconciler's).
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_VOLUME_RECORD_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_VOLUME_RECORD_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "atomicwriter/atomic_writer.h"
#include "cache/object_manager.h"
#include "volumemanager/disk/subpath_update.h"
#include "volumemanager/state/volume_key.h"

namespace volumemanager {

// Where one volume is in its life with the reconciler. The phase names what the reconciler waits
// for; the only way out of one is a transition (VolumeRecords::Enter, through Reconciler::Enter),
// which drops what belonged to the phase left.
enum class VolumePhase {
  kDue,              // to be looked at by the next pass
  kIdle,             // current (or waiting for an event: an object's first read): nothing due
  kAwaitingSources,  // undesired, to be torn down once every pod source was seen
  kAwaitingKubelet,  // kubelet ownership: not set up by the kubelet yet; looked at again at `due`
  kCheckingSetUp,    // kubelet ownership: whether the kubelet has set it up, checked on the pool
  kFetching,         // the object manager reads its objects (`fetch_mode`: normal or fresh)
  kFetched,          // its objects are read: the next pass writes (or finds nothing to write)
  kWriting,          // a mount or remount runs on the pool
  kVerifying,        // its ..data link is checked on the pool (a swap was reported)
  kTearingDown,      // its teardown runs on the pool
  kBackingOff,       // its last operation failed; looked at again at `due`
};
inline constexpr size_t kVolumePhaseCount = static_cast<size_t>(VolumePhase::kBackingOff) + 1;
const char* VolumePhaseName(VolumePhase phase);

// One volume's state in the reconciler; changed only by the reconciler's transitions.
struct VolumeRecord {
  using SteadyTime = std::chrono::steady_clock::time_point;
  using TimerQueue = std::multimap<SteadyTime, VolumeKey>;

  VolumePhase phase = VolumePhase::kDue;
  // kFetching, kFetched: which read, its number (a completion of an earlier, dropped fetch is
  // ignored), and the fresh requests it covers (fresh_requested when a fresh one started).
  cache::ObjectManager::FetchMode fetch_mode = cache::ObjectManager::FetchMode::kStrategy;
  uint64_t fetch_id = 0;
  uint64_t fetch_covers = 0;
  // Fresh reads requested (another writer's swap seen) and the number a successful write built
  // from a fresh read has served: while served < requested, the next write follows a fresh read.
  uint64_t fresh_requested = 0;
  uint64_t fresh_served = 0;
  // A swap was reported: ..data is checked before anything else is done.
  bool verify_requested = false;
  // Kubelet ownership: seen set up by the kubelet, not written yet (no second check needed).
  bool kubelet_set_up_seen = false;
  // "Waiting for the kubelet to set up the volume" was logged: once per volume.
  bool kubelet_wait_logged = false;
  // An operation for the volume has completed since the record was made (whatever its outcome):
  // the volumes-synced readiness counts the volume as looked at.
  bool operation_ended = false;
  // kAwaitingKubelet, kBackingOff: when the volume is looked at again, and its timer.
  std::optional<TimerQueue::iterator> timer;
  // Leftovers of a write (unpublished versions, a failed cleanup): when the volume is written
  // again (to the disk), kept whatever the phase.
  std::optional<TimerQueue::iterator> cleanup_timer;
  // The volume's record of unpublished version dirs, kept across its writes.
  std::shared_ptr<atomicwriter::UnpublishedLedger> ledger;
  // What the last write did about the pod's subPath mounts of the volume (empty without the
  // annotation): /debug/state.
  std::vector<SubPathCopy> subpath_copies;

  bool fresh_read_owed() const { return fresh_served < fresh_requested; }
};

// Phases in which a record waits for no operation and no pass of its own (a timer or an event
// brings it back): what was under way for the volume has ended.
bool Rests(VolumePhase phase);

// What a transition did, for the reconciler to pass on.
struct Transition {
  // The record became due, waits for the pod sources, or got a timer: a pass has work.
  bool work_added = false;
  // It came to rest (Rests) from a phase that did not.
  bool came_to_rest = false;
};

class VolumeRecords {
 public:
  using SteadyTime = VolumeRecord::SteadyTime;

  // The record of `key` (null: none).
  VolumeRecord* Find(const VolumeKey& key);
  const VolumeRecord* Find(const VolumeKey& key) const;
  // The record of `key`, made in kDue (and due now) when there was none: `*made` says so.
  VolumeRecord& Get(const VolumeKey& key, bool* made);
  // The one way to change a record's phase: leaves the old phase (its index entry, its timer, and
  // its fetch unless kFetching goes to kFetched) and enters `phase`; `due` is the timer of
  // kAwaitingKubelet and kBackingOff.
  Transition Enter(const VolumeKey& key, VolumeRecord& record, VolumePhase phase,
                   SteadyTime due = SteadyTime{});
  // Drops `key`'s record, its index entries and its timers (its phase left as Enter leaves it).
  void Erase(const VolumeKey& key);

  // `record` is looked at again at `at` to clear a write's leftovers, whatever its phase (one
  // cleanup timer per record: the latest).
  void SetCleanupTimer(const VolumeKey& key, VolumeRecord& record, SteadyTime at);
  // The earliest timer, when it is due at `now`: a cleanup timer is removed here; a phase timer
  // (a kubelet recheck, a backoff) stays until the caller moves the record on (Enter kDue).
  struct Expired {
    VolumeKey key;
    bool cleanup = false;
  };
  std::optional<Expired> NextExpired(SteadyTime now);
  // When the earliest timer is due (nullopt: none).
  std::optional<SteadyTime> NextTimer() const;

  // The keys in kDue or kFetched, taken out of the index for a pass; the pass puts back each it
  // looks at (KeepDue) until Enter moves it on, and what becomes due meanwhile waits for the next.
  std::set<VolumeKey> TakeDue();
  void KeepDue(const VolumeKey& key) { due_now_.insert(key); }
  // What is left of the set TakeDue returned stays due, with the keys made due since (no node
  // of `rest` is copied).
  void ReturnDue(std::set<VolumeKey> rest) {
    rest.merge(due_now_);
    due_now_.swap(rest);
  }
  // The records waiting for every pod source to be seen (kAwaitingSources).
  const std::set<VolumeKey>& awaiting_sources() const { return awaiting_sources_; }

  size_t size() const { return records_.size(); }
  size_t count_in(VolumePhase phase) const { return phase_counts_[static_cast<size_t>(phase)]; }
  size_t due_count() const { return due_now_.size(); }
  size_t ledger_count() const;
  size_t cleanup_due_count() const;
  // Records with a fetch in flight or done, a verify or a kubelet set-up check pending.
  size_t fetch_state_count() const;

 private:
  std::map<VolumeKey, VolumeRecord> records_;
  std::set<VolumeKey> due_now_;
  std::set<VolumeKey> awaiting_sources_;
  VolumeRecord::TimerQueue timers_;
  std::array<size_t, kVolumePhaseCount> phase_counts_{};
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_RECONCILER_VOLUME_RECORD_H_
