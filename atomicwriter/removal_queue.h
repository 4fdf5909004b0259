// RemovalQueue: removes the version dirs and staging links that writes leave behind (the version
// a write replaced, another writer's abandoned dir, crash debris) later and elsewhere, so that no
// write waits for a tree removal: publishing needs the old version gone no sooner than its grace
// period allows, and on a disk mounted with `discard` removing a tree blocks for milliseconds.
//
// A write (Options::removals) hands every unpublished entry it sees to the queue with a due time:
// the moment its grace period runs out. Soon after (on the worker, or the next RunDue) the queue
// takes the entry's TreeStamp (tree_stamp.h: the inode and ctime of everything in its tree). At
// the due time the queue removes the entry only if it is still what it saw: the volume dir is the
// same directory (device and inode), `..data` does not point to the entry, the entry has the same
// inode and ctime, and nothing in its tree changed (one still being written, even only in a nested
// subdir, or replaced, restarts its grace period; a tree too big to stamp is never removed). An
// entry due when added (a version replaced in a volume no other writer touches, or a grace period
// of zero) has no grace period to protect: it is judged by its own inode and ctime only. The
// removal renames the entry to `kRemovingPrefix` + 16 hex digits first (one rename: from then on no
// writer can publish it, and a write or a second queue that finds the name gone skips it), checks
// `..data` once more (and renames it back in the unlikely case it became live), then removes the
// tree. A crash leaves at worst such a `..volumemanager_removing.*` entry or the unpublished dir
// itself, which the next write of the volume finds and queues again like any other unpublished
// entry.
//
// Due entries are taken in batches, sorted by volume dir and name, and each tree is removed
// children first in inode order, which keeps the filesystem's inode table updates together. The
// worker waits a short batch window after the first entry falls due; an entry that is due when it
// is added (a version replaced in a volume no other writer touches, ReplacedVersion::kAtOnce)
// wakes it at once.
//
// Thread safety: every method may be called from any thread. Start() runs a worker thread that
// removes entries as they fall due, at a nice value 10 above the caller's (it yields to the writes
// when the cores are busy); without it, RunDue() does the work on the caller's thread.
#ifndef VOLUMEMANAGER_ATOMICWRITER_REMOVAL_QUEUE_H_
#define VOLUMEMANAGER_ATOMICWRITER_REMOVAL_QUEUE_H_

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "atomicwriter/env.h"

namespace atomicwriter {

// The name an entry gets while the queue removes it.
inline constexpr char kRemovingPrefix[] = "..volumemanager_removing.";

class RemovalQueue {
 public:
  using Clock = std::chrono::steady_clock;

  struct Stats {
    uint64_t added = 0;      // entries queued (re-queueing a known entry counts once)
    uint64_t removed = 0;    // entries removed
    uint64_t kept = 0;       // dropped at due time: live, gone, or the volume dir replaced
    uint64_t restarted = 0;  // changed since queued: queued again for a full grace period
    // Removals that failed (queued again for a full grace period), and entries refused because
    // a link or a file stands on their volume dir's path beneath the root (dropped).
    uint64_t failed = 0;
    // Times an entry was due but held back because removing was not permitted (SetPermission).
    uint64_t held = 0;
    std::string last_error;  // the last failure, naming the volume dir and entry
  };

  // `fs` nullptr means PosixEnv(); `now` empty means the Env's SteadyNow.
  explicit RemovalQueue(Env* fs = nullptr, std::function<Clock::time_point()> now = {});
  ~RemovalQueue();  // stops the worker; entries not yet removed stay on disk
  RemovalQueue(const RemovalQueue&) = delete;
  RemovalQueue& operator=(const RemovalQueue&) = delete;

  // What says whether removing is permitted now (one writer per node: the write gate of the
  // node's lock), asked on the removing thread right before each entry is claimed. While it says
  // no, nothing is removed: the entries stay queued and are looked at again a retry interval
  // later (Stats::held). Unset: always permitted. Set before Start.
  void SetPermission(std::function<bool()> permitted) { permitted_ = std::move(permitted); }

  // Starts the worker thread. Idempotent.
  void Start();
  // Stops the worker once the entry being removed is done; queued entries are dropped (a later
  // write of their volume queues them again). RunDue after Stop does nothing until Start.
  void Stop();

  // Where the queue opens a volume dir again. With `root` set: `rel` beneath the directory `root`
  // (opened as OpenRootDir does: the administrator's choice), one component at a time following
  // no link (OpenBeneath); a link or a file on the way refuses the entry (Stats::failed and
  // last_error, naming it), which is dropped: nothing is removed through it. With `root` empty:
  // `shown` itself, a path the caller trusts (AtomicWriter::Open: tests, tools), every component
  // but the last followed. `shown` names the dir in messages and identifies it in the queue.
  struct VolumeDir {
    std::string shown;
    std::string root;
    std::string rel;
  };

  // Queues `name` in `volume_dir` (whose lstat is `dir_st`), seen as `st`, for removal at `due`
  // if still unpublished and unchanged then; `grace` is the period to start again when it has
  // changed. An entry already queued with the same identity keeps the earlier due time.
  // `complete`: the caller knows the entry's tree to be complete and written by no one since (a
  // version this process published and has just replaced: no writer writes into a published
  // version); it is then judged by its own inode and ctime only, like an entry due when added, and
  // its tree is not stamped (read) at all, unless the entry changes.
  void Add(const VolumeDir& volume_dir, const struct stat& dir_st, const std::string& name,
           const struct stat& st, Clock::time_point due, Clock::duration grace,
           bool complete = false);
  // The same for a trusted path (VolumeDir with `root` empty).
  void Add(const std::string& volume_dir, const struct stat& dir_st, const std::string& name,
           const struct stat& st, Clock::time_point due, Clock::duration grace,
           bool complete = false) {
    Add(VolumeDir{volume_dir, {}, {}}, dir_st, name, st, due, grace, complete);
  }

  // Processes every entry due at `now` on the calling thread; returns how many were removed.
  size_t RunDue(Clock::time_point now);
  // Processes every entry now, due or not (tests and benches; the checks still apply).
  size_t RunAll() { return RunDue(Clock::time_point::max()); }

  size_t pending() const;
  // Volume dirs whose removals are noted for their next write (TookDirFromTo) (tests).
  size_t noted_dirs() const;
  Stats stats() const;

  // Whether the queue's own removals are what took the volume dir `shown` from the state
  // `from` to the state `to` (UnpublishedLedger::DirStateHash): the dir's lstat right before the
  // first of them was `from`, right after each the next one began from there, and after the last
  // it was `to`. A write that finds the dir as its last write left it but for the queue's removals
  // (which never touch a live version nor a top-level name) may take its shortcut all the same.
  // Consumes what the queue noted of `shown`.
  bool TookDirFromTo(const std::string& shown, uint64_t from, uint64_t to);

 private:
  struct Key {
    std::string volume_dir;
    std::string name;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    std::string root;  // VolumeDir::root and rel: how the volume dir is opened again
    std::string rel;
    dev_t dir_dev;
    ino_t dir_ino;
    dev_t dev;
    ino_t ino;
    struct timespec ctime;
    Clock::time_point due;
    Clock::duration grace;
    bool at_once;  // due when added: removed without waiting for a batch window
    Clock::time_point added;
    // The tree's stamp (TreeStamp) since the grace period began; `stamped` false until the queue
    // has taken it (never for an at_once entry), `tree` nullopt when the tree cannot be judged.
    bool stamped = false;
    std::optional<uint64_t> tree;
    // Added as complete (Add): never stamped; cleared once the entry is seen changed.
    bool complete = false;
  };
  enum class Outcome { kRemoved, kKept, kRestarted, kFailed, kRefused };

  // Opens the volume dir of `key` as `entry` says (VolumeDir); -1 with errno.
  int OpenVolumeDir(const Key& key, const Entry& entry);

  // Removes one due entry of the volume dir open as `dir_fd` (already checked to be the entry's);
  // on kFailed `key` names what is left (it may have been renamed).
  Outcome RemoveOne(int dir_fd, Key& key, Entry& entry, std::string* error);
  // Stamps every queued entry that is not yet stamped nor due (they stay queued meanwhile).
  void StampNew(Clock::time_point now);
  // Takes the stamp of a queued entry not yet due; true when its grace period started again (the
  // entry is no longer what the write saw). Never removes anything.
  bool Stamp(int dir_fd, const Key& key, Entry& entry);
  void WorkerLoop();
  // When the worker should take `e`: at once (its stamp, plus the batch window) when not stamped,
  // else its due time, plus the batch window unless it is at_once.
  static Clock::time_point WakeTime(const Entry& e);
  // Whether StampNew is to take `e`'s stamp (once it is not yet due).
  static bool NeedsStamp(const Entry& e) { return !e.at_once && !e.complete && !e.stamped; }
  // Keep `wakes_` and `to_stamp_` in step with `entries_` (mu_ held): Unindex before an entry
  // changes or goes, Index once it is in place.
  void Index(const Key& key, const Entry& e);
  void Unindex(const Key& key, const Entry& e);

  // How long a held-back entry waits before it is looked at again.
  static constexpr Clock::duration kHeldRetry = std::chrono::seconds(1);

  Env* fs_;
  std::function<Clock::time_point()> now_;
  std::function<bool()> permitted_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Entry> entries_;
  // Every entry by its WakeTime, and the entries to stamp (in key order): a wake looks at the
  // entries it takes, not at every pending one (thousands, on a tmpfs node during a fan-out).
  // Both point at the keys in `entries_` (a map's keys stay where they are until erased), so an
  // Add copies no key into them.
  struct KeyPtrLess {
    bool operator()(const Key* a, const Key* b) const { return *a < *b; }
  };
  std::set<std::pair<Clock::time_point, const Key*>> wakes_;
  std::set<const Key*, KeyPtrLess> to_stamp_;
  // By volume dir: the dir state before the queue's first removal there since a write last asked
  // (TookDirFromTo), and after its last; and until when a write may still ask (the removal's
  // time plus the entry's grace period: a write takes its shortcut only within a grace period of
  // its last full read, which came before the removal). One note per volume dir, however many
  // removals: the expired ones are dropped by a walk of the map once the earliest has expired,
  // at most every kDirChangeSweep, so a note of a volume no write asks about again (its pod
  // deleted) does not stay, and a burst of removals keeps no line per removal.
  struct DirChange {
    uint64_t from;
    uint64_t to;
    Clock::time_point expires;
  };
  void DropExpiredDirChanges(Clock::time_point now);  // mu_ held
  std::map<std::string, DirChange> dir_changes_;
  // No note expires before this (a lower bound: a note taken since may have been the earliest).
  Clock::time_point dir_changes_expire_ = Clock::time_point::max();
  std::optional<Clock::time_point> dir_changes_swept_;  // the last walk
  std::set<Key> in_progress_;                           // renamed and being removed by RunDue
  Stats stats_;
  bool stopping_ = false;
  // Stop() was called: a batch in progress ends after the entry being removed.
  std::atomic<bool> stop_requested_{false};
  // When the worker wakes next (max: not waiting for a due time): an Add that falls due earlier
  // wakes it, any other Add does not.
  Clock::time_point worker_wakes_at_ = Clock::time_point::max();
  std::thread worker_;
};

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_REMOVAL_QUEUE_H_
