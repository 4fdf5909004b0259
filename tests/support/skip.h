// Skips that say why. Every GTEST_SKIP carries a reason; a test that cannot run without root, or
// without what only root may do here (mount, a loop device, a bind mount), skips with a reason
// that starts with "needs root", which `make test`'s skip report (tests/skip_report.py) counts
// as a root skip: under CI (CI=true, run as root) one fails the run, naming the test.
#ifndef VOLUMEMANAGER_TESTS_SUPPORT_SKIP_H_
#define VOLUMEMANAGER_TESTS_SUPPORT_SKIP_H_

#include <gtest/gtest.h>
#include <unistd.h>

// Skips the test, saying "needs root: <what>", unless the process runs as root. `what` names what
// the test does with it, e.g. VM_SKIP_UNLESS_ROOT("mounts a tmpfs"). Usable as one statement,
// also as the body of an if (the switch keeps an outer else from binding to the inner if).
#define VM_SKIP_UNLESS_ROOT(what) \
  switch (0)                      \
  case 0:                         \
  default:                        \
    if (::geteuid() == 0) {       \
    } else                        \
      GTEST_SKIP() << "needs root: " << (what)

// Skips the test as a root skip whatever the uid: for a privilege root lacks here (a sandbox
// without CAP_SYS_ADMIN, no loop device). `what` says what failed, e.g. the errno of mount(2).
#define VM_SKIP_NEEDS_ROOT(what) GTEST_SKIP() << "needs root: " << (what)

#endif  // VOLUMEMANAGER_TESTS_SUPPORT_SKIP_H_
