// The atomic writer's rules for payload paths (docs/kubelet-behavior.md §3), and
// the lexical cleaning applied to a valid path. These are the writer's last line of defence; the
// API-style rules for keys and item paths (stricter) live with the volume plugins.
#ifndef VOLUMEMANAGER_ATOMICWRITER_PATH_VALIDATION_H_
#define VOLUMEMANAGER_ATOMICWRITER_PATH_VALIDATION_H_

#include <string>

#include "base/status.h"

namespace atomicwriter {

// Checks a raw payload path, rule by rule in the spec's order, and fails with the first failing
// rule's text, e.g. `invalid path: must not contain '..': foo/../bar`. Lengths are in bytes.
// A NUL byte anywhere fails first (`invalid path: must not contain a NUL byte: a/..\x00x`, the
// path shown with each NUL as `\x00`): a system call would cut the name there.
base::Status ValidatePath(const std::string& path);

// Lexical cleaning exactly as Go's path.Clean, which the kubelet applies to payload paths:
// `foo////bar` -> `foo/bar`, `./bar` -> `bar`, `bar/` -> `bar`, `a/../b` -> `b`, `/a/..` -> `/`;
// a path that cleans to nothing is ".".
std::string CleanPath(const std::string& path);

}  // namespace atomicwriter

#endif  // VOLUMEMANAGER_ATOMICWRITER_PATH_VALIDATION_H_
