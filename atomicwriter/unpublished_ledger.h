// UnpublishedLedger: what one process has seen, over time, of the entries of a volume dir that
// `..data` does not point to: timestamp dirs of versions that are not (or no longer) live, and
// stale staging links. On a volume that another writer also writes (the kubelet's writer, or a
// second daemon during a rolling update) such an entry may be that writer's write in progress,
// about to be published, so it may be removed only after this process has seen it unpublished
// and unchanged for a grace period. The clock is this process's monotonic clock: a timestamp in
// an entry's name, or its mtime, is another writer's wall clock and proves nothing.
//
// "Unchanged" means the same inode and the same ctime and, where the caller gives one, the same
// TreeStamp (tree_stamp.h: nothing in its tree changed): a writer still creating files in the
// dir, even only in a nested subdir (or renaming it), restarts the period. With a RemovalQueue
// the writer gives none: the queue stamps the tree and judges it at the due time.
//
// Thread safety: none. One ledger per volume dir; the writes of one volume are serialized by the
// caller, so one write at a time uses it.
#ifndef VOLUMEMANAGER_ATOMICWRITER_UNPUBLISHED_LEDGER_H_
#define VOLUMEMANAGER_ATOMICWRITER_UNPUBLISHED_LEDGER_H_

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "atomicwriter/filesystem_probe.h"

namespace atomicwriter {

class UnpublishedLedger {
 public:
  using Clock = std::chrono::steady_clock;

  // Records that `name`, whose lstat is `st` and whose TreeStamp is `tree` (0: not judged here),
  // is unpublished at `now`. True when it has been seen unpublished, with the same inode, ctime
  // and tree, since `now - grace` or earlier (always true for a grace of zero).
  bool Observe(const std::string& name, const struct stat& st, Clock::time_point now,
               Clock::duration grace, uint64_t tree = 0);
  // Since when `name` has been seen unpublished and unchanged (Observe first); the epoch if never.
  Clock::time_point Since(const std::string& name) const {
    auto it = seen_.find(name);
    return it == seen_.end() ? Clock::time_point{} : it->second.since;
  }
  bool Contains(const std::string& name) const { return seen_.count(name) != 0; }
  // Forgets an entry (it was removed, or became live).
  void Forget(const std::string& name) { seen_.erase(name); }
  // Forgets every entry whose name is not in `present`.
  void ForgetAllBut(const std::set<std::string>& present);
  size_t size() const { return seen_.size(); }

  // What this process's last write of the volume left behind, so that the next write (with a
  // RemovalQueue) can skip reading the whole volume dir when nothing but that write changed it:
  // the volume dir's lstat is the same as when the write ended (same inode, mtime, ctime, link
  // count and size: no entry was added, removed or renamed since, by another writer or by the
  // queue), `..data` still names the version that write left live, the next write's payload has
  // the same top-level names (no link went stale), and the dir was read in full less than a
  // grace period ago. The last condition bounds what a timestamp too coarse to show a change
  // could hide: the next full read finds it. When the payload's paths and bytes differ from those
  // the live version was written with, the write needs no comparison with the live version
  // either: it publishes. When they are the same and a write found the live version to hold them
  // (reading every byte) less than a grace period ago, and the lstat of the live version's dir,
  // of each of its dirs and of each of its files is still what that write saw before it read
  // (`live_tree`: inode, mode, link count, size, mtime, ctime), nothing in the live version has
  // changed and the write neither opens nor reads it. A change within the clock tick of that
  // lstat (on kernels whose timestamps are that coarse) would show only at the next full read,
  // at most a grace period later. Hashes, 72 bytes a volume: a false match (odds 2^-64) could
  // only delay a cleanup or a repair to the next full read, or publish a version whose bytes
  // equal the live one's. The filesystem's traits ride along: the same dir is on the same
  // filesystem.
  struct LastWrite {
    uint64_t live;              // the name of the version ..data pointed to when the write ended
    uint64_t top_level_names;   // the payload's top-level names
    uint64_t content;           // the payload's paths and bytes
    uint64_t dir;               // the volume dir's lstat when the write ended (DirStateHash)
    Clock::time_point scanned;  // when the volume dir was last read in full
    std::optional<FilesystemTraits> traits;  // when the write probed them (ProbeFilesystem)
    uint64_t live_tree = 0;      // the live version's state when its bytes were read (0: unknown)
    Clock::time_point verified;  // when they were read
    // When a version of this volume was last placed as a top-level dir is (AtomicWriter, where
    // versions are spread); the epoch when none was.
    Clock::time_point placed{};
    // The permission bits (07777) the mkdir of the last new version's dir gave it, where
    // creates keep their mode (FilesystemTraits::creates_keep_mode): what the umask and the volume
    // dir's mode and default ACL make of 0755. A write that finds the dir as it was left (its
    // ctime, which any chmod or ACL change moves, included) takes them from here instead of an
    // fstat of its new dir; the umask is the process's and fixed.
    std::optional<mode_t> version_mode;
  };
  // The parts of a directory's lstat that any change of its entries moves, and its identity.
  static uint64_t DirStateHash(const struct stat& st);
  static uint64_t NameHash(const std::string& name);
  const std::optional<LastWrite>& last_write() const { return last_write_; }
  void set_last_write(std::optional<LastWrite> w) { last_write_ = std::move(w); }

 private:
  struct Seen {
    Clock::time_point since;
    dev_t dev;
    ino_t ino;
    struct timespec ctime;
    uint64_t tree;
  };
  std::map<std::string, Seen> seen_;
  std::optional<LastWrite> last_write_;
};

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_UNPUBLISHED_LEDGER_H_
