"""Runs a command in mount, network and PID namespaces of its own when it can (as root), so that
a tier whose last test compares the machine before and after (test_realkube_machine.py) sees
only what the tier itself started, and may run beside other tests.

    /usr/bin/python3 tests/realkube/isolated.py -- COMMAND [ARG...]

As root: `unshare --mount --net --pid --fork --mount-proc` (mounts private), loopback up, then
COMMAND, with its exit status. Listening sockets, mounts and processes seen from inside are the
tier's alone, and whatever the tier leaves behind goes with the namespaces: the machine's own
network namespace, mount table and process list are never touched. As another user (no
namespaces without root) COMMAND runs as it is: ctest then runs the tier alone (RUN_SERIAL,
tests/e2e/CMakeLists.txt), since other tests' servers would come and go in the same view.
"""
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from netns import tool  # noqa: E402

ENTERED = "VM_ISOLATED_TIER"


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: isolated.py -- COMMAND [ARG...]")
    command = argv[2:]
    if os.geteuid() != 0:
        print("isolated.py: not root, so no namespaces: the command runs in the machine's own",
              flush=True)
        return subprocess.run(command).returncode
    if os.environ.get(ENTERED) != str(os.getpid()):
        outer = os.stat("/proc/self/ns/net").st_ino
        # --fork: the new PID namespace's first process is this script again (pid 1 there);
        # every process in the namespace dies with it, and it with unshare (--kill-child).
        return subprocess.run(
            [tool("unshare"), "--mount", "--net", "--pid", "--fork", "--kill-child",
             "--mount-proc", "--propagation", "private", "--", "/bin/sh", "-c",
             f'{ENTERED}=$$ exec "$0" "$@"', sys.executable, *argv],
            env={**os.environ, "VM_ISOLATED_OUTER_NET": str(outer)}).returncode
    if str(os.stat("/proc/self/ns/net").st_ino) == os.environ.get("VM_ISOLATED_OUTER_NET"):
        raise SystemExit("isolated.py: still in the machine's network namespace")
    subprocess.run([tool("ip"), "link", "set", "lo", "up"], check=True)
    env = dict(os.environ)
    for key in (ENTERED, "VM_ISOLATED_OUTER_NET"):
        env.pop(key, None)
    child = subprocess.Popen(command, env=env)
    # As pid 1 this process inherits every orphan of the namespace: reap them all (a zombie
    # would count as a process left behind), until the command itself has ended.
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child.pid:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else \
                128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
