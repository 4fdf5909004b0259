// ManifestDir: the manifest files of one directory as last read, and what changed at each scan.
//
// Promise: a scan reads a file again only when there is reason to: it is new, its last read
// failed, the caller named it, or its stamp (inode, size, mtime, ctime: stat follows symlinks, so a
// swapped "..data" link changes it) differs from the last scan's. It reports, in name order, every
// file it read (with the bytes when they differ from the last good read of that file), every file
// it could not stat other than because it is gone (as a failed read: a symlink loop, EIO), and
// every file that is gone (no longer there, or no longer a regular file). The owner decodes and
// logs; ManifestDir itself never logs, so no file content can reach a log from here.
//
// Files: the regular files directly in the directory (no recursion) whose name ends in .yaml,
// .yml or .json and does not start with '.' (the kubelet's file source rules), each at most
// 10 MiB (the kubelet's limit on a manifest). With `allow_single_file`, a path that names a
// regular file stands for a directory holding that one file (--pod-manifest-path may be a file).
//
// Thread model: none of its own; one thread at a time. Reads are synchronous: in this daemon a
// ManifestDirScanner (manifest_dir_scanner.h) runs them on the thread pool, one scan at a time.
#ifndef VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_H_
#define VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_H_

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace manifestdir {

// The kubelet's limit on one manifest file (maxConfigLength).
inline constexpr size_t kMaxManifestBytes = 10 << 20;

// A name the kubelet's file source reads: .yaml, .yml or .json, not a dotfile.
bool IsManifestFileName(std::string_view name);

// What identifies one version of a file without reading it.
struct FileStamp {
  uint64_t ino = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;

  static FileStamp Of(const struct stat& st);
};

// The whole file (through symlinks), failing beyond kMaxManifestBytes or when it is not a regular
// file (base::ReadRegularFile: never blocks on a FIFO). Errors name the operation and the path.
base::Result<std::string> ReadManifestFile(const std::string& path);

// The last path component ("/a/b/" -> "b").
std::string BaseName(const std::string& path);

// How much a scan looks at.
enum class ManifestScanScope {
  kNamed,    // only the named files (no listing), each read whatever its stamp
  kStatAll,  // list; read the files that are new, named, failed last time or whose stamp changed
  kReadAll,  // list and read every file
};

struct ManifestFileRead {
  std::string name;                  // the file's name in the directory
  base::Status status;               // not OK: the read failed (and the file's bytes are forgotten)
  std::optional<std::string> bytes;  // set when the bytes differ from the last good read's
};

struct ManifestDirScan {
  enum class Listing {
    kNotListed,  // a kNamed scan
    kListed,
    kMissing,  // the path does not exist: every file is gone
    kFailed,   // the path could not be listed (`error` says why); the files are kept as they were
  };
  Listing listing = Listing::kNotListed;
  std::string error;
  std::vector<std::string> removed;     // name order
  std::vector<ManifestFileRead> reads;  // name order
};

struct ManifestDirOptions {
  std::string path;
  bool allow_single_file = false;  // a regular file at `path` is a directory of that one file
};

class ManifestDir {
 public:
  explicit ManifestDir(ManifestDirOptions options);

  // Scans as `scope` says; `named` are file names (not paths) to read again whatever their stamp.
  ManifestDirScan Scan(ManifestScanScope scope, const std::set<std::string>& named = {});

  // The path of a file by its name (the path itself when it names a single file).
  std::string PathOf(const std::string& name) const;
  const std::string& path() const { return options_.path; }
  // Reads attempted so far (observability and tests).
  uint64_t reads() const { return reads_; }

 private:
  // What is kept of a file between scans: its stamp and a digest of its last good read, never
  // its bytes (a manifest may be 10 MiB, and the owner keeps what it decoded from it).
  struct File {
    FileStamp stamp;
    std::string digest;       // SHA-256 of the bytes of the last good read
    bool have_bytes = false;  // the last read succeeded
  };

  // Lists the path into `names`; sets the scan's listing outcome.
  void List(ManifestDirScan* scan, std::set<std::string>* names);
  // Stats `name`; nullopt with *gone when it no longer exists or is not a regular file, nullopt
  // with *error (errno) when stat failed otherwise (the file is then kept as it was, and the scan
  // reports a failed read).
  // `dir_fd`: the directory, open (names are looked up in it: one path component each, not the
  // whole path), or -1 (the path is built).
  std::optional<FileStamp> Stat(int dir_fd, const std::string& name, bool* gone, int* error) const;
  void Read(const std::string& name, const FileStamp& stamp, File* file, ManifestDirScan* scan);

  ManifestDirOptions options_;
  std::optional<std::string> single_file_;  // the file's name when the path named a regular file
  std::map<std::string, File> files_;       // by name
  uint64_t reads_ = 0;
};

}  // namespace manifestdir

#endif  // VOLUMEMANAGER_MANIFESTDIR_MANIFEST_DIR_H_
