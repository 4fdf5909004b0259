// The daemon's version, reported by --version and in the User-Agent.
#ifndef VOLUMEMANAGER_BASE_VERSION_H_
#define VOLUMEMANAGER_BASE_VERSION_H_

namespace base {

// From project(VERSION) in the top-level CMakeLists.txt, through the `base` target.
inline constexpr char kVersion[] = VM_VERSION;

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_VERSION_H_
