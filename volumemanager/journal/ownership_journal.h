// OwnershipJournal: the durable record of what this daemon itself created under the root dir —
// the volume dirs it set up and the directories above them (pod dir, its volumes dir, a plugin
// dir) it made — so that it never removes anything else. A real node's /var/lib/kubelet holds the
// kubelet's volumes: a volume the journal does not list is never adopted at start, unmounted or
// removed, whatever the pod sources say.
//
// On disk: <state dir>/ownership.journal, outside the root dir, text, one line each:
//   volumemanager-ownership v3                      the header; v1 and v2 are read too (below)
//   <checksum> = root <magic>:<fsid> <boot id> <root dir>   what the entries describe
//   <checksum> + volume pods/<uid>/volumes/<plugin>/<name>
//   <checksum> @ volume <inode> pods/<uid>/volumes/<plugin>/<name>
//   <checksum> + dir pods/<uid>
//   <checksum> - volume pods/<uid>/volumes/<plugin>/<name>
// `+` records ownership, `-` its end; `@` the identity of an owned volume dir the daemon made: its
// inode number (decimal) on the root's filesystem, which the `= root` line identifies by statfs
// magic, f_fsid and boot id (an inode number, unlike a device or mount id, stays the same across
// reboots). Paths are relative to the root dir; the checksum is the FNV-1a 64 of the rest of the
// line, in 16 hex digits. Open rewrites the file with the live entries only (write, fsync,
// rename, fsync the dir); appends compact it again when released entries dominate.
//
// Volume identity (v3): set-up records `+ volume` before its mkdir, and `@ volume` right after
// it, before anything is written in or mounted on the dir. A volume entry without one (a v1 or v2
// journal's, or a stop between the two records) has an unknown identity: teardown and
// reconstruction then accept the dir only when it lies on the pod dir's mount and the root's
// filesystem, and reconstruction records the inode it finds (disk/volume_setup.h,
// CheckOwnedVolumeDir). A volume dir whose identity no longer matches is not the daemon's: it is
// released, left in place, and listed by ForeignVolumeDirs (memory only) for /debug/state.
//
// What the journal describes: the root dir it was kept for and the identity of that root's
// filesystem when its entries were checked last (RootIdentity: the statfs magic and f_fsid, "-"
// until reconstruction first probes them, and the boot id). A journal kept for another root dir
// (a changed --root-dir) is not trusted: the daemon owns nothing and so removes nothing, the file
// is kept beside as ownership.journal.<16 hex digits of a hash of its root dir>.rejected, and a
// new journal starts for the new root dir (to go back, stop the daemon and move the file back).
// Whether the root's filesystem is the recorded one is reconstruction's to judge
// (reconciler/reconstruct.h), once the root can be probed. A v1 journal (no identity) is trusted
// as before, for the root dir it is opened with, and written in this version (kVersion) at once,
// its identity recorded by the first reconstruction: an upgrade keeps its ownership; so is a v2
// journal (its volumes' identities unknown until reconstruction records them). Fixtures of each
// version as its releases wrote it: testdata/formats/ (ownership_journal_formats_test.cc).
//
// A rollback: a journal of a later version than kVersion (a newer release's) is not corrupt but
// unreadable here; Open refuses it with an error naming the file and the version, writing and
// renaming nothing, and the daemon does not start (exit 1): setting it aside would lose the newer
// release's ownership for good. Builds before this rule (v1 and v2 readers) set a later journal
// aside as rejected and owned nothing. A v3 journal can be turned back into v2 by hand
// (docs/upgrades.md: header v3 -> v2, the `@` lines deleted; every other line keeps its
// checksum). A change an older release could misread must raise kVersion.
//
// Ordering: Add returns only once its records are on disk (fsync), and callers Add before the
// first mkdir or mount; Remove comes after the removal. A crash in the middle of an append leaves
// an incomplete last line: it is ignored (what it would have covered was never created).
//
// Fail closed: a journal that is unreadable, has an unknown older or malformed version, or holds
// a line that does not check out is not trusted at all: the daemon owns nothing, the file is kept
// beside as ownership.journal.rejected for inspection, and a new journal starts empty.
//
// Thread safety: all methods may be called from any thread. Add and Remove block on file I/O
// (pool threads only); concurrent appends are committed together with one fsync.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_JOURNAL_OWNERSHIP_JOURNAL_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_JOURNAL_OWNERSHIP_JOURNAL_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "atomicwriter/env.h"
#include "base/status.h"
#include "volumemanager/journal/owned_paths.h"

namespace volumemanager {

struct OwnedPath {
  OwnedKind kind;
  std::string path;  // relative to the root dir, e.g. "pods/<uid>/volumes/<plugin>/<name>"

  bool operator==(const OwnedPath&) const = default;
};

// The identity of the filesystem a root dir is on, and of the boot it was seen in.
//
// statfs's f_fsid identifies ext4, xfs and btrfs across reboots (derived from the superblock's
// UUID) and a tmpfs for as long as it is mounted (each mount gets its own); some filesystems
// report 0 (then only the magic tells filesystems apart) or derive it from st_dev (stable only as
// long as device numbers are). The magic tells a volatile filesystem (tmpfs, ramfs), whose content
// legitimately vanishes at a reboot, from one that keeps it.
struct RootIdentity {
  uint64_t fs_magic = 0;  // statfs f_type; 0: not probed yet
  uint64_t fs_id = 0;     // statfs f_fsid, both 32-bit words
  std::string boot_id;    // /proc/sys/kernel/random/boot_id; empty when unknown

  bool known() const { return fs_magic != 0; }
  bool SameFilesystem(const RootIdentity& o) const {
    return fs_magic == o.fs_magic && fs_id == o.fs_id;
  }
  // tmpfs or ramfs: nothing on it survives a reboot.
  bool Volatile() const;
  // "ext4 38e86185:77f245cb, boot 465cdd80-..." for logs.
  std::string ToString() const;
  bool operator==(const RootIdentity&) const = default;

  static constexpr char kBootIdFile[] = "/proc/sys/kernel/random/boot_id";
  // statfs of `root_dir` (through `env`), and the boot id read from `boot_id_file`.
  static base::Result<RootIdentity> Probe(atomicwriter::Env& env, const std::string& root_dir,
                                          const std::string& boot_id_file = kBootIdFile);
};

class OwnershipJournal {
 public:
  // How Open found the journal.
  enum class Loaded {
    kNew,        // there was none: the daemon owns nothing yet
    kTrusted,    // read in full (an incomplete last line, a crash mid-append, is ignored)
    kRejected,   // unreadable, another version, or corrupt: the daemon owns nothing
    kOtherRoot,  // kept for another root dir: the daemon owns nothing
  };
  struct OpenResult {
    std::unique_ptr<OwnershipJournal> journal;
    Loaded loaded = Loaded::kNew;
    std::string detail;  // for the log: what was found and what it means
  };

  static constexpr char kFileName[] = "ownership.journal";
  static constexpr char kRejectedSuffix[] = ".rejected";
  static constexpr int kVersion = 3;

  // Opens the journal in `state_dir` (created 0700 when missing), kept for `root_dir` (empty: the
  // recorded root dir is not checked, tests). Fails when no journal can be written there (or
  // `root_dir` cannot be recorded), and when the journal is of a later version (left as it is):
  // the daemon must then not create anything. Its system calls (but the reading and rewriting of
  // the whole file, base/durable_file.h) go through `env` (null: atomicwriter::PosixEnv()), which
  // must outlive the journal.
  static base::Result<OpenResult> Open(const std::string& state_dir,
                                       const std::string& root_dir = {},
                                       atomicwriter::Env* env = nullptr);
  // Observe mode: the journal in `state_dir` read, never written: nothing is created, renamed or
  // rewritten (a missing state dir or file is a new, empty journal; a rejected one, one of a later
  // version or one of another root dir owns nothing and stays where it is). Add, Remove and
  // SetIdentity then change only the memory of this process.
  static OpenResult ReadOnly(const std::string& state_dir, const std::string& root_dir = {});
  // The name a journal kept for `root_dir` is kept aside under when opened for another one.
  static std::string OtherRootFileName(const std::string& root_dir);

  ~OwnershipJournal();
  OwnershipJournal(const OwnershipJournal&) = delete;
  OwnershipJournal& operator=(const OwnershipJournal&) = delete;

  // Records that the daemon owns `paths`; durable when it returns OK.
  base::Status Add(const std::vector<OwnedPath>& paths);
  // Records that the daemon no longer owns `paths` (removed, or never created after all). When
  // the record cannot be written, they stay owned (as the file says), so the caller's retry
  // releases them again.
  base::Status Remove(const std::vector<OwnedPath>& paths);

  bool Owns(OwnedKind kind, const std::string& path) const;

  // Records the identity of the owned volume dir `path` (its inode on the root's filesystem);
  // durable when it returns OK. An error for a path that is not an owned volume.
  base::Status SetVolumeInode(const std::string& path, uint64_t inode);
  // The recorded identity of the owned volume dir `path`; 0 when unknown (an entry of a v1 or v2
  // journal, or a set-up stopped between its two records) or not owned.
  uint64_t VolumeInode(const std::string& path) const;

  // Volume dirs found to be no longer the ones the daemon made (another inode, mount or
  // filesystem) and left alone: path relative to the root dir, and why. In memory only, for
  // /debug/state; the newest 256.
  struct ForeignVolumeDir {
    std::string path;
    std::string reason;
  };
  void NoteForeignVolumeDir(const std::string& path, const std::string& reason);
  std::vector<ForeignVolumeDir> ForeignVolumeDirs() const;
  // Every owned path, sorted by path.
  std::vector<OwnedPath> Entries() const;
  // The owned paths of one pod: its pod dir and everything below it.
  std::vector<OwnedPath> EntriesOfPod(const std::string& pod_uid) const;
  const std::string& file() const { return file_; }
  const std::string& root_dir() const { return root_dir_; }
  bool read_only() const { return read_only_; }

  // The identity recorded with the entries (not known() for a new or v1 journal).
  RootIdentity identity() const;
  // Records `identity` (rewrites the file). Called by reconstruction once it has judged the
  // entries against the root's filesystem, before anything is added.
  base::Status SetIdentity(const RootIdentity& identity);

  // The relative paths the daemon uses.
  static std::string PodPath(const std::string& pod_uid);
  static std::string PodVolumesPath(const std::string& pod_uid);
  static std::string PluginPath(const std::string& pod_uid, const std::string& plugin_dir);
  static std::string VolumePath(const std::string& pod_uid, const std::string& plugin_dir,
                                const std::string& volume_name);

 private:
  OwnershipJournal(atomicwriter::Env& env, std::string state_dir, std::string root_dir,
                   RootIdentity identity, int fd, std::map<std::string, OwnedKind> owned,
                   std::map<std::string, uint64_t> inodes, size_t records);

  // Appends `lines` (encoded records) and syncs, together with other threads' pending lines.
  base::Status Commit(std::string lines, size_t count);
  // Rewrites the file with the live entries. Called with mu_ held and no flush in progress.
  base::Status CompactLocked();

  const std::string state_dir_;
  const std::string file_;
  const std::string root_dir_;
  mutable std::mutex mu_;
  RootIdentity identity_;
  std::condition_variable flushed_;
  atomicwriter::Env& env_;
  int fd_;
  // Path -> kind and, for an owned volume, its dir's inode when known (0: not known). One
  // structure, not one per field, holding each pod's UID once: the paths are the bulk of the
  // journal's memory.
  using Owned = OwnedPaths::Owned;
  OwnedPaths owned_;
  size_t inodes_ = 0;  // entries of owned_ with an inode (records in a compacted file)
  std::vector<ForeignVolumeDir> foreign_;
  size_t records_;  // records in the file (for compaction)
  // Group commit: lines waiting for the next flush, and sequence numbers of what was queued and
  // what is durable.
  std::string pending_;
  size_t pending_records_ = 0;
  uint64_t queued_seq_ = 0;
  uint64_t durable_seq_ = 0;
  bool flushing_ = false;
  int adds_in_flight_ = 0;
  struct FailedBatch {
    uint64_t end;
    base::Status status;
  };
  std::map<uint64_t, FailedBatch> failed_;  // first seq of a failed batch -> its end and error
  bool read_only_ = false;                  // ReadOnly: no file written, ever
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_JOURNAL_OWNERSHIP_JOURNAL_H_
