// The daemon's version, reported by --version and in the User-Agent.
#ifndef VOLUMEMANAGER_BASE_VERSION_H_
#define VOLUMEMANAGER_BASE_VERSION_H_

namespace base {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_VERSION_H_
