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
//  * Debris from an earlier crash (a stale ..data_tmp, unpublished ..<timestamp> dirs, top-level
//    links that no longer resolve) is removed by the next write, even one that changes nothing.
//  * Every call is relative to an open descriptor of the volume dir and refuses to follow any
//    symlink the writer did not create: nothing outside the volume dir is read, written or
//    deleted, even when ..data, ..data_tmp or a timestamp dir was replaced by a hostile symlink.
//  * Optional durability (Options::durable): files and the new dir are fsynced before publish,
//    the volume dir after it.
//
// Thread safety: an AtomicWriter is not thread-safe, and two writers must never write the same
// volume dir at once; the caller serializes writes per volume (the volume manager runs at most
// one operation per volume). Writers of different volume dirs are independent.
#ifndef VOLUMEMANAGER_ATOMICWRITER_ATOMIC_WRITER_H_
#define VOLUMEMANAGER_ATOMICWRITER_ATOMIC_WRITER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "atomicwriter/filesystem.h"
#include "atomicwriter/path_validation.h"
#include "base/status.h"

namespace atomicwriter {

// One file of a payload.
struct FileProjection {
  std::string data;              // the bytes, verbatim
  mode_t mode = 0644;            // applied exactly (chmod after create; umask is irrelevant)
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
    std::function<base::Status(Filesystem& fs, int volume_dir_fd, const std::string& ts_dir)>;

struct Options {
  // fsync files and the new dir before publish and the volume dir after it.
  bool durable = false;
  // The filesystem to use; nullptr means PosixFilesystem(). Not owned.
  Filesystem* fs = nullptr;
  // Wall clock for timestamp dir names; nullptr means std::chrono::system_clock::now.
  std::function<std::chrono::system_clock::time_point()> now;
};

struct WriteResult {
  // True when a new version was published; false when the content already matched (the write
  // then only repaired top-level links and removed crash debris).
  bool published = false;
  // The live timestamp dir's name after the write, e.g. "..2024_05_02_10_15_07.2349871102".
  std::string ts_dir;
};

class AtomicWriter {
 public:
  // Opens `target_dir`, which must exist and be a directory (not a symlink). Nothing is created.
  static base::Result<std::unique_ptr<AtomicWriter>> Open(const std::string& target_dir,
                                                          Options options = {});
  ~AtomicWriter();
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  // Makes the volume show exactly `payload`. Mode-only or owner-only changes do not rewrite.
  base::Result<WriteResult> Write(const Payload& payload,
                                  const PermissionCallback& set_permissions = nullptr);

  const std::string& target_dir() const { return target_dir_; }

 private:
  AtomicWriter(std::string target_dir, int dir_fd, Options options);

  std::string target_dir_;
  int dir_fd_;
  Options options_;
  Filesystem* fs_;
};

// The names the writer reserves in a volume dir.
inline constexpr char kDataDirName[] = "..data";
inline constexpr char kDataDirTmpName[] = "..data_tmp";

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_ATOMIC_WRITER_H_
