// Opening a path beneath a directory descriptor without following any symlink: the one
// beneath-walk of the process, through an Env (env.h), so fault tests reach every step of it.
//
// Why: under the root dir everything but the last component of a volume's path (pods/, the pod
// dir, volumes/, the plugin dir) can be replaced by whoever can write there (a container with a
// hostPath of the pods dir, a careless admin script). A path string handed whole to the kernel
// follows a symlink planted at any of them and sends the writes, a tmpfs mount or a recursive
// removal to where the link points. OpenBeneath resolves every component itself: a symlink
// anywhere on the way is an error (ELOOP), never followed; so is a component that is not a
// directory (ENOTDIR).
//
// Env::OpenAt2Beneath (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
// where the kernel has it (Linux 5.6); elsewhere a walk that opens one component at a time with
// O_NOFOLLOW | O_DIRECTORY from the previous one's descriptor. Both cross mount points on the way
// down (a pods dir on its own filesystem is common), and both refuse "..", "." and empty components
// and a NUL byte before any system call (EINVAL), so the same path gives the same answer on every
// kernel.
//
// Thread safety: every function is safe to call from any thread.
#ifndef VOLUMEMANAGER_ATOMICWRITER_OPEN_BENEATH_H_
#define VOLUMEMANAGER_ATOMICWRITER_OPEN_BENEATH_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "atomicwriter/env.h"
#include "base/status.h"

namespace atomicwriter {

// Opens `rel` (a relative path of plain names separated by single '/') beneath the directory
// `dirfd`. `flags` are open(2) flags for the last component; O_NOFOLLOW and O_CLOEXEC are always
// added, so a symlink there is refused too (unless `flags` holds O_PATH without O_DIRECTORY, which
// opens a symlink itself, as O_PATH | O_NOFOLLOW does). Returns the descriptor, or -1 with errno:
// ELOOP (a symlink on the way), ENOTDIR, ENOENT, EINVAL (an empty, absolute, "." or ".."
// component, or a NUL), or what openat says.
int OpenBeneath(Env& env, int dirfd, std::string_view rel, int flags, mode_t mode = 0);

// The directory holding `rel` beneath `dirfd` (a new descriptor of `dirfd` itself for a one-name
// path), opened as OpenBeneath does, and the last name of `rel` in `*name`: for the calls that
// act on a name in its parent (fstatat, unlinkat, mkdirat). -1 with errno as OpenBeneath.
int OpenParentBeneath(Env& env, int dirfd, std::string_view rel, std::string* name);

// The same, as a Result naming `shown` (what the user reads, e.g. the full path) and saying, for
// ELOOP and ENOTDIR, that a symlink or a file stands where a directory should be and was not
// followed.
base::Result<int> OpenDirBeneath(Env& env, int dirfd, std::string_view rel,
                                 const std::string& shown, int flags = 0);

// A user-facing reason for a failed OpenBeneath of `shown` with `err`.
base::Status OpenBeneathError(const std::string& shown, int err);

// Opens the root of a walk: `path` itself, a directory, following links in it (the root dir is
// the administrator's choice, a flag, and may be a link on some distributions).
base::Result<int> OpenRootDir(Env& env, const std::string& path);

// For tests: make OpenBeneath take the walk even where openat2 exists (true), or let it choose
// again (false).
void ForceOpenBeneathWalkForTesting(bool walk);

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_OPEN_BENEATH_H_
