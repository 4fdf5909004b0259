// OwnershipJournal: the durable record of what this daemon itself created under the root dir —
// the volume dirs it set up and the directories above them (pod dir, its volumes dir, a plugin
// dir) it made — so that it never removes anything else. A real node's /var/lib/kubelet holds the
// kubelet's volumes: a volume the journal does not list is never adopted at start, unmounted or
// removed, whatever the pod sources say.
//
// On disk: <state dir>/ownership.journal, outside the root dir, text, one line each:
//   volumemanager-ownership v1                      the header; any other version is not read
//   <checksum> + volume pods/<uid>/volumes/<plugin>/<name>
//   <checksum> + dir pods/<uid>
//   <checksum> - volume pods/<uid>/volumes/<plugin>/<name>
// `+` records ownership, `-` its end; paths are relative to the root dir; the checksum is the
// FNV-1a 64 of the rest of the line, in 16 hex digits. Open rewrites the file with the live
// entries only (write, fsync, rename, fsync the dir); appends compact it again when released
// entries dominate.
//
// Ordering: Add returns only once its records are on disk (fsync), and callers Add before the
// first mkdir or mount; Remove comes after the removal. A crash in the middle of an append leaves
// an incomplete last line: it is ignored (what it would have covered was never created).
//
// Fail closed: a journal that is unreadable, has another version, or holds a line that does not
// check out is not trusted at all: the daemon owns nothing, the file is kept beside as
// ownership.journal.rejected for inspection, and a new journal starts empty.
//
// Thread safety: all methods may be called from any thread. Add and Remove block on file I/O
// (pool threads only); concurrent appends are committed together with one fsync.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_OWNERSHIP_JOURNAL_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_OWNERSHIP_JOURNAL_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace volumemanager {

enum class OwnedKind { kDir, kVolume };

struct OwnedPath {
  OwnedKind kind;
  std::string path;  // relative to the root dir, e.g. "pods/<uid>/volumes/<plugin>/<name>"

  bool operator==(const OwnedPath&) const = default;
};

class OwnershipJournal {
 public:
  // How Open found the journal.
  enum class Loaded {
    kNew,       // there was none: the daemon owns nothing yet
    kTrusted,   // read in full (an incomplete last line, a crash mid-append, is ignored)
    kRejected,  // unreadable, another version, or corrupt: the daemon owns nothing
  };
  struct OpenResult {
    std::unique_ptr<OwnershipJournal> journal;
    Loaded loaded = Loaded::kNew;
    std::string detail;  // for the log: what was found and what it means
  };

  static constexpr char kFileName[] = "ownership.journal";
  static constexpr char kRejectedSuffix[] = ".rejected";
  static constexpr int kVersion = 1;

  // Opens the journal in `state_dir` (created 0700 when missing). Fails only when no journal can
  // be written there: the daemon must then not create anything.
  static base::Result<OpenResult> Open(const std::string& state_dir);

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
  // Every owned path, sorted by path.
  std::vector<OwnedPath> Entries() const;
  // The owned paths of one pod: its pod dir and everything below it.
  std::vector<OwnedPath> EntriesOfPod(const std::string& pod_uid) const;
  const std::string& file() const { return file_; }

  // The relative paths the daemon uses.
  static std::string PodPath(const std::string& pod_uid);
  static std::string PodVolumesPath(const std::string& pod_uid);
  static std::string PluginPath(const std::string& pod_uid, const std::string& plugin_dir);
  static std::string VolumePath(const std::string& pod_uid, const std::string& plugin_dir,
                                const std::string& volume_name);

 private:
  OwnershipJournal(std::string state_dir, int fd, std::map<std::string, OwnedKind> owned,
                   size_t records);

  // Appends `lines` (encoded records) and syncs, together with other threads' pending lines.
  base::Status Commit(std::string lines, size_t count);
  // Rewrites the file with the live entries. Called with mu_ held and no flush in progress.
  base::Status CompactLocked();

  const std::string state_dir_;
  const std::string file_;
  mutable std::mutex mu_;
  std::condition_variable flushed_;
  int fd_;
  std::map<std::string, OwnedKind> owned_;  // path -> kind
  size_t records_;                          // records in the file (for compaction)
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
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_OWNERSHIP_JOURNAL_H_
