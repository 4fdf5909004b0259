// AtomicWriter: replaces the whole content of a pod volume directory in one atomic step, in the
// kubelet's on-disk format (docs/kubelet-behavior.md §1.2 and §2):
//
//   <volume dir>/..data            -> ..YYYY_MM_DD_HH_MM_SS.<digits>   (UTC; the live version)
//   <volume dir>/..<timestamp>/... the payload's files, each with its exact mode
//   <volume dir>/<first component> -> ..data/<first component>   (one link per top-level name)
//
// Guarantees beyond the kubelet's writer:
//  * A write is all-or-nothing: at every instant (and after a crash at any point) the volume shows
//    either the previous payload or the new one in full. A failed write never removes or changes
//    the published version.
//  * The volume can be shared with another writer that follows the kubelet's algorithm (the
//    kubelet itself, or a second daemon): the new version is staged under a link name unique to
//    this write (never the kubelet's `..data_tmp`, which is never touched), and a timestamp dir
//    that ..data does not point to, which may be the other writer's write in progress, is
//    removed only after this process has seen it unpublished and unchanged for
//    Options::unpublished_grace (UnpublishedLedger).
//  * Once ..data is swapped the write has succeeded: a failure after that point (the volume
//    dir's fsync, removing old versions or stale links) is reported in WriteResult::cleanup_error
//    and retried by the next write, never as a failed write.
//  * Debris from an earlier crash (unpublished ..<timestamp> dirs and staging links once their
//    grace period is over, top-level links that no longer resolve) is removed by a later write,
//    even one that changes nothing.
//  * Every call is relative to an open descriptor of the volume dir and refuses to follow any
//    symlink the writer did not create: nothing outside the volume dir is read, written or
//    deleted, even when ..data, ..data_tmp or a timestamp dir was replaced by a hostile symlink.
//  * Optional durability (Options::durable): files and the new dir are fsynced before publish,
//    the volume dir after it.
//
// Thread safety: an AtomicWriter is not thread-safe; the caller serializes this process's writes
// per volume (the volume manager runs at most one operation per volume). Writers of different
// volume dirs are independent, and a writer of another process may write the same volume dir.
#ifndef VOLUMEMANAGER_ATOMICWRITER_ATOMIC_WRITER_H_
#define VOLUMEMANAGER_ATOMICWRITER_ATOMIC_WRITER_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "atomicwriter/env.h"
#include "atomicwriter/filesystem_probe.h"
#include "atomicwriter/path_validation.h"
#include "atomicwriter/removal_queue.h"
#include "atomicwriter/unpublished_ledger.h"
#include "base/status.h"

namespace atomicwriter {

// Far longer than any write of the kubelet's writer takes between creating its version dir and
// publishing it (milliseconds; seconds on a stalled disk), short enough that an old version does
// not hold a tmpfs's memory for long.
inline constexpr std::chrono::milliseconds kDefaultUnpublishedGrace{30000};

// One file of a payload.
struct FileProjection {
  std::string data;              // the bytes, verbatim
  mode_t mode = 0644;            // applied exactly, whatever the umask or a default ACL
  std::optional<uid_t> fs_user;  // when set, the file's owner uid (group unchanged)

  bool operator==(const FileProjection&) const = default;
};

// Relative path (raw, as the volume spec names it) -> file. Paths are validated (ValidatePath)
// and cleaned (CleanPath) by Write.
using Payload = std::map<std::string, FileProjection>;

// Run after the new version's files are written and before it is published, e.g. the fsGroup
// ownership pass. It gets the filesystem interface, an open descriptor of the volume dir and the
// new timestamp dir's name. A failure aborts the write (the published version stays).
using PermissionCallback =
    std::function<base::Status(Env& fs, int volume_dir_fd, const std::string& ts_dir)>;

// What becomes of the version a write replaces.
enum class ReplacedVersion {
  // It waits out Options::unpublished_grace like every unpublished entry, then goes (through
  // Options::removals, or a later write): another writer that read ..data a moment before the
  // swap (the kubelet's compares its payload with the live version) may still be reading it.
  kAfterGrace,
  // It goes at once: handed to Options::removals due now (its thread removes it while the next
  // writes run), or, without a queue, removed by the write itself right after the swap, as the
  // kubelet's writer does. Only for a volume dir no other writer touches: the replaced version is
  // then nobody's work in progress.
  kAtOnce,
  // kAtOnce on a filesystem that withholds freed inodes from reuse
  // (FilesystemTraits::freed_inodes_wait: ext4 without a journal), where a removal long after the
  // write makes every create slower for minutes (the next writes then reuse the inodes it frees);
  // kAfterGrace elsewhere. Sole writer only.
  //
  // With kAtOnce or kAtOnceWhereFreedInodesWait, on such a filesystem, the writer also keeps its
  // creates away from the inodes other writers freed beside the volume dir: the volume's first
  // write (and one after new top-level links, or 30 s after the last) makes its version's dir
  // with the volume dir marked as the top of a directory hierarchy (FS_TOPDIR_FL, `chattr +T`,
  // for that mkdir only), so that ext4 places it, and the version's files, in a group with few
  // dirs; later versions follow it, and the staging link is made inside the new version's dir
  // (atomicwriter/README.md).
  kAtOnceWhereFreedInodesWait,
};

struct Options {
  // fsync files and the new dir before publish and the volume dir after it.
  bool durable = false;
  // The filesystem to use; nullptr means PosixEnv(). Not owned.
  Env* fs = nullptr;
  // Wall clock for timestamp dir names; nullptr means std::chrono::system_clock::now.
  std::function<std::chrono::system_clock::time_point()> now;
  // How long an unpublished timestamp dir or staging link must have been seen, unpublished and
  // unchanged, before a write removes it (it may be another writer's write in progress). Zero
  // removes it at first sight: only for a volume no other writer touches.
  std::chrono::milliseconds unpublished_grace = kDefaultUnpublishedGrace;
  // Remembers unpublished entries across writes of this volume dir. nullptr: the AtomicWriter
  // object's own ledger (so only writes through one object add up). Not owned.
  UnpublishedLedger* ledger = nullptr;
  // Monotonic clock for the grace period; nullptr means std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> steady_now;
  // When set, the write removes no tree itself: every unpublished entry it sees (the version it
  // replaced first of all) goes to this queue, due when its grace period runs out, and the write
  // returns without waiting for any removal. nullptr: entries past their grace period are
  // removed by the write, the others by a later write. Not owned; it uses the same clock as
  // `steady_now`.
  RemovalQueue* removals = nullptr;
  // The version this write replaced (see ReplacedVersion). Other unpublished entries (crash
  // debris, another writer's) always wait out the grace period.
  ReplacedVersion replaced_version = ReplacedVersion::kAfterGrace;
  // What the writer learns of the volume dir's filesystem; empty means ProbeFilesystem. Tests use
  // it to take one filesystem's ways on another.
  std::function<FilesystemTraits(int fd)> probe;
  // Asked right before `..data` is renamed onto the new version (the only step that publishes):
  // an error aborts the write as any failure before publishing does (the published version
  // stays, the new one is removed) and is the write's error. E.g. the daemon's node lock
  // (volumemanager/disk/write_gate.h): nothing is published by a writer that no longer holds it.
  // Empty: always allowed.
  std::function<base::Status()> may_publish;
};

struct WriteResult {
  // True when a new version was published; false when the content already matched (the write
  // then only repaired top-level links and removed crash debris).
  bool published = false;
  // The live timestamp dir's name after the write, e.g. "..2024_05_02_10_15_07.2349871102".
  std::string ts_dir;
  // Not empty when work after the point of no return failed: the volume dir's fsync after the
  // swap, or removing old versions or stale links (a replaced version that the write failed to
  // remove itself is then left to the grace period). The volume shows the payload in full; a later
  // write retries the cleanup.
  std::string cleanup_error;
  // Unpublished timestamp dirs and staging links left in place because their grace period has
  // not run out; a write after `unpublished_grace` removes them. Always 0 with
  // Options::removals: the queue removes them.
  int awaiting_grace = 0;
  // Entries handed to Options::removals by this write.
  int queued_removals = 0;
  // True when the write removed the version it replaced itself (ReplacedVersion::kAtOnce
  // without Options::removals).
  bool removed_replaced = false;
  // The volume dir is on a tmpfs (FilesystemTraits::tmpfs): the live version's pages are memory.
  bool on_tmpfs = false;
};

// The memory a payload's files take on a tmpfs: each file's size rounded up to whole pages (an
// empty file takes none). Directories and inodes are not counted.
uint64_t TmpfsPageBytes(const Payload& payload);

class AtomicWriter {
 public:
  // Opens `target_dir`, which must exist and be a directory (not a symlink). Nothing is created.
  // Every component of `target_dir` but the last is followed as the kernel resolves it: for a
  // path the caller trusts (tests, tools).
  static base::Result<std::unique_ptr<AtomicWriter>> Open(const std::string& target_dir,
                                                          Options options = {});
  // Opens `rel_dir` beneath the open directory `root_fd` (the root dir `root_dir`, opened as
  // OpenRootDir does) without following any symlink on the way (atomicwriter::OpenBeneath): what
  // the daemon uses under its root dir. `shown` names the dir in messages (the full path). A
  // symlink or a file where a directory should be is an error saying so. Options::removals opens
  // the dir again the same way, beneath `root_dir` (RemovalQueue::VolumeDir).
  static base::Result<std::unique_ptr<AtomicWriter>> OpenBeneath(int root_fd,
                                                                 const std::string& root_dir,
                                                                 const std::string& rel_dir,
                                                                 const std::string& shown,
                                                                 Options options = {});
  ~AtomicWriter();
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  // Makes the volume show exactly `payload`. Mode-only or owner-only changes do not rewrite.
  base::Result<WriteResult> Write(const Payload& payload,
                                  const PermissionCallback& set_permissions = nullptr);

  const std::string& target_dir() const { return target_dir_; }
  // The volume dir's descriptor, owned by the writer: for the caller's own checks of the dir the
  // write goes to (fstatat and the like), never to be closed.
  int dir_fd() const { return dir_fd_; }
  // The volume dir's lstat (through the Env), for the caller's own checks of the dir right before
  // a Write (its identity): the next Write takes it as the dir's state when it begins instead of
  // an lstat of its own, so the caller must not change the dir in between. 0, or -1 with errno.
  int StatDir(struct stat* st);

 private:
  AtomicWriter(std::string target_dir, int dir_fd, Options options);

  std::string target_dir_;
  // With OpenBeneath: the root dir and the path beneath it (for Options::removals), else empty.
  std::string root_dir_;
  std::string rel_dir_;
  int dir_fd_;
  Options options_;
  Env* fs_;
  UnpublishedLedger own_ledger_;
  std::optional<struct stat> dir_stat_;  // StatDir's, until the next Write
};

// The names in a volume dir. `..data` is the live version; `..data_tmp` is where the kubelet's
// writer stages, and this writer never creates, replaces or removes it; this writer stages under
// kStagingPrefix followed by a random hex number, unique to the write.
inline constexpr char kDataDirName[] = "..data";
inline constexpr char kDataDirTmpName[] = "..data_tmp";
inline constexpr char kStagingPrefix[] = "..volumemanager_tmp.";

// `..YYYY_MM_DD_HH_MM_SS.<digits>`: the only names the writer ever gives a version dir (and the
// only ones it adopts as the live version or removes as debris).
bool IsTimestampDirName(std::string_view name);

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_ATOMIC_WRITER_H_
