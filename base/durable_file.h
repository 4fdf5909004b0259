// Small files kept across crashes: read whole, and replaced atomically and durably (a temporary
// file beside the target, written and fsync'd, renamed over it, then the directory fsync'd), so a
// reader finds the old content or the new, never a mix, and the new survives a power cut once the
// call returned OK. Blocking system calls: not for the event loop's hot paths. No symlink is
// followed at the target. Safe on any thread for distinct paths.
#ifndef VOLUMEMANAGER_BASE_DURABLE_FILE_H_
#define VOLUMEMANAGER_BASE_DURABLE_FILE_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace base {

// The whole content of `path`. A missing file is an error with sys_errno() ENOENT.
Result<std::string> ReadWholeFile(const std::string& path);

// Replaces `dir`/`name` with `data` (mode 0600) as described above; the temporary file is
// `name`.tmp and is removed again on failure.
Status WriteFileDurably(const std::string& dir, const std::string& name, std::string_view data);

// Writes all of `data` to `fd` (retrying short writes and EINTR); errors name `path`.
Status WriteAll(int fd, std::string_view data, const std::string& path);

// fsync of a directory, so that renames and removals in it are durable.
Status SyncDir(const std::string& dir);

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_DURABLE_FILE_H_
