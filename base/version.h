// The daemon's version, reported by --version and in the User-Agent.
#ifndef VOLUMEMANAGER_BASE_VERSION_H_
#define VOLUMEMANAGER_BASE_VERSION_H_

namespace base {

// From the file VERSION (the top-level CMakeLists.txt's project()), compiled into version.cc
// alone: a new version recompiles one file, not every file that includes a base header.
extern const char kVersion[];

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_VERSION_H_
