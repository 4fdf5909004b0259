"""The real-kubelet tier (ctest `realkubelet`): the tests beside the real kubelet, run in a node
namespace of their own (node_namespace.py), and the check that the machine is as before.

    /usr/bin/python3 tests/realkube/kubelet_tier.py WORKDIR -- PYTEST_ARG...

Reads the machine's state (machine.py: listening sockets, mounts, kernel settings, packet filter
rules, interfaces, the kubelet's default paths, processes and their network namespaces), runs
pytest with PYTEST_ARG... inside the node namespace (VM_API_SERVERS=kubelet selects the tests
marked `real_kubelet`), reads the state again. Fails when pytest failed, ran nothing or skipped
anything (the tier's tests never skip: a missing binary fails them), or when the machine changed.
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from machine import differences, machine_state  # noqa: E402

TIER_PROGRAMS = {"kube-apiserver", "etcd", "kubelet", "volumemanager", "reload_listener"}


def net_namespaces():
    """pid -> the inode of its network namespace, for every process whose namespace is
    readable."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = os.stat(entry / "ns" / "net").st_ino
            except OSError:
                pass
    return out


def main(argv):
    if len(argv) < 3 or argv[2] != "--":
        raise SystemExit("usage: kubelet_tier.py WORKDIR -- PYTEST_ARG...")
    workdir = Path(argv[1]).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    junit = workdir / "junit.xml"
    junit.unlink(missing_ok=True)
    before = machine_state()
    namespaces_before = set(net_namespaces().values())
    env = {**os.environ, "VM_API_SERVERS": "kubelet"}
    rc = subprocess.run(
        [sys.executable, str(HERE / "node_namespace.py"), str(workdir / "node"), "--",
         sys.executable, "-m", "pytest", f"--junitxml={junit}", *argv[3:]], env=env).returncode
    problems = []
    if rc != 0:
        problems.append(f"the tests beside the real kubelet failed (pytest exit {rc})")
    if junit.exists():
        suites = ET.parse(junit).getroot()
        suites = [suites] if suites.tag == "testsuite" else list(suites)
        ran = sum(int(s.get("tests", 0)) for s in suites)
        skipped = sum(int(s.get("skipped", 0)) for s in suites)
        if ran == 0:
            problems.append("no test ran beside the real kubelet")
        if skipped:
            problems.append(f"{skipped} test(s) skipped beside the real kubelet: none may")
    else:
        problems.append("pytest wrote no report")
    after = machine_state()
    problems += differences(before, after, TIER_PROGRAMS)
    stray = {pid: ns for pid, ns in net_namespaces().items()
             if ns not in namespaces_before and pid not in before["processes"]}
    if stray:
        problems.append(f"processes left in network namespaces the tier made: {stray}")
    if problems:
        print("kubelet tier: FAILED\n  " + "\n  ".join(problems))
        return 1
    print("kubelet tier: passed; the machine is as before (sockets, mounts, kernel settings, "
          "packet filter rules, interfaces, paths, processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
