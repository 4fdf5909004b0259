// Process hardening for a daemon that holds Secret bytes in memory: it is not dumpable, so a
// crash never hands its memory to the host's core handler (core_pattern, systemd-coredump), and
// unprivileged processes of the same user cannot ptrace it or read its /proc/<pid>/mem.
#ifndef VOLUMEMANAGER_CMD_VOLUMEMANAGER_PROCESS_HARDENING_H_
#define VOLUMEMANAGER_CMD_VOLUMEMANAGER_PROCESS_HARDENING_H_

#include <sys/prctl.h>

#include <cerrno>

#include "base/errno_error.h"
#include "base/status.h"

namespace volumemanager {

// PR_SET_DUMPABLE 0 for the whole process (inherited by threads started later).
inline base::Status MakeNotDumpable() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return base::ErrnoError("prctl", "PR_SET_DUMPABLE", errno);
  }
  return base::Status::OK();
}

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_CMD_VOLUMEMANAGER_PROCESS_HARDENING_H_
