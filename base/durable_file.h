// Small files kept across crashes: read whole, and replaced atomically and durably (a temporary
// file beside the target, written and fsync'd, renamed over it, then the directory fsync'd), so a
// reader finds the old content or the new, never a mix, and the new survives a power cut once the
// call returned OK. Blocking system calls: not for the event loop's hot paths. No symlink is
// followed at the target. Safe on any thread for distinct paths.
#ifndef VOLUMEMANAGER_BASE_DURABLE_FILE_H_
#define VOLUMEMANAGER_BASE_DURABLE_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace base {

// The limit ReadWholeFile puts on a file: far above any file it reads (the ownership journal is
// compacted to about 100 bytes a volume; checkpoints are a few KiB).
inline constexpr size_t kMaxWholeFileBytes = 64 << 20;

// The whole content of the regular file `path`: the one way this daemon reads a file that a user,
// a flag or a hostile neighbour may have put in its way. It never blocks and never reads without
// bound: the file is opened O_NONBLOCK (a FIFO cannot hold up the open) and refused, before any
// read, unless fstat says it is a regular file (a FIFO, socket, device or directory is an error
// naming what it is); more than `max_bytes` is an error naming the limit. Without
// `follow_symlinks`, a symlink at `path` is refused (sys_errno ELOOP). Errors read
// "<path>: <why>" (so a caller may prefix "cannot read "); a missing file has sys_errno() ENOENT.
Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes,
                                    bool follow_symlinks);

// ReadRegularFile(path, kMaxWholeFileBytes, /*follow_symlinks=*/false).
Result<std::string> ReadWholeFile(const std::string& path);

// Replaces `dir`/`name` with `data` (mode 0600) as described above. The temporary file is
// DurableTempName(name), created O_EXCL, and is removed again on failure, so two processes (or
// threads) replacing one file never write into, or rename, each other's temporary file: the
// last rename wins, whole. A temporary file left by a crash mid-write stays (a few KiB, one per
// such crash): no process removes another's, since it cannot tell whether that writer, perhaps
// in another PID namespace, still runs.
Status WriteFileDurably(const std::string& dir, const std::string& name, std::string_view data);

// "<name>.tmp.<pid>.<random of this process, 16 hex digits>.<counter>": unique to one call.
std::string DurableTempName(const std::string& name);

// Writes all of `data` to `fd` (retrying short writes and EINTR); errors name `path`.
Status WriteAll(int fd, std::string_view data, const std::string& path);

// "<dev>:<ino>:<size>:<mtime s>.<ns>" of the file at `path` (stat: a symlink is followed), or ""
// when it cannot be stat'ed: two stamps differ when the file was replaced or rewritten.
std::string FileStamp(const std::string& path);

// fsync of a directory, so that renames and removals in it are durable.
Status SyncDir(const std::string& dir);

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_DURABLE_FILE_H_
