"""What a test tier must leave on the machine as it found it, and the check that it did.

`machine_state()` reads, from the calling process's namespaces: the listening sockets (TCP LISTEN,
bound UDP; address and port), the mount table (source, mount point, type), the processes running
(pid and program), the kernel settings the real kubelet changes when it may (kubelet.py binds
files over them in its namespace), the packet filter rules (`iptables-save`, `ip6tables-save`)
and the network interfaces, and whether the paths a kubelet writes outside its --root-dir exist.
`differences(before, after, programs)` says what changed, in words; empty when nothing did.
"""
import shutil
import subprocess
from pathlib import Path

# What the 1.20 kubelet's container manager sets (setupKernelTunables) when they differ.
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": 1,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 1,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
}

# Where a kubelet writes by default outside its --root-dir (its container logs, its flexvolume
# plugin dir, its default root and certificate dir, static pods), and where `ip netns` keeps names.
KUBELET_PATHS = ("/var/log/pods", "/var/log/containers", "/var/lib/kubelet",
                 "/usr/libexec/kubernetes", "/etc/kubernetes", "/run/netns", "/var/run/netns")


def _listening():
    listening = set()
    for name in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            if name.startswith("tcp") and state != "0A":
                continue
            if name.startswith("udp") and state != "07":
                continue
            listening.add((name, local))
    return listening


def _mounts():
    mounts = set()
    with open("/proc/self/mounts") as f:
        for line in f:
            source, target, fstype = line.split()[:3]
            mounts.add((source, target, fstype))
    return mounts


def _processes():
    processes = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                processes[int(entry.name)] = (entry / "comm").read_text().strip()
            except OSError:
                pass
    return processes


def _sysctls():
    out = {}
    for key in KUBELET_SYSCTLS:
        try:
            out[key] = Path("/proc/sys", key).read_text().strip()
        except OSError as e:
            out[key] = f"unreadable: {e.strerror}"
    return out


def _packet_filter():
    """The rules of every table, counters left out (they change as packets pass)."""
    rules = {}
    for tool in ("iptables-save", "ip6tables-save"):
        path = shutil.which(tool) or next(
            (p for p in (f"/usr/sbin/{tool}", f"/sbin/{tool}") if Path(p).exists()), None)
        if path is None:
            rules[tool] = "not installed"
            continue
        done = subprocess.run([path], capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines()
                 if not line.startswith("#") and not line.startswith(":")]
        chains = [line.split()[0] for line in done.stdout.splitlines() if line.startswith(":")]
        rules[tool] = (done.returncode, tuple(lines), tuple(chains))
    return rules


def _interfaces():
    return tuple(sorted(p.name for p in Path("/sys/class/net").iterdir()))


def machine_state():
    return {"listening": _listening(), "mounts": _mounts(), "processes": _processes(),
            "sysctls": _sysctls(), "packet_filter": _packet_filter(),
            "interfaces": _interfaces(),
            "paths": {p: Path(p).exists() or Path(p).is_symlink() for p in KUBELET_PATHS}}


def differences(before, after, programs):
    """What the tier changed, one line each: sockets left listening, mounts left or removed,
    processes of `programs` (comm names) still running, and, where `before` has them, kernel
    settings, packet filter rules, interfaces and paths changed."""
    out = []
    if after["listening"] - before["listening"]:
        out.append("sockets left listening (/proc/net: protocol, local address:port in hex): "
                   f"{sorted(after['listening'] - before['listening'])}")
    if after["mounts"] - before["mounts"]:
        out.append(f"mounts left behind: {sorted(after['mounts'] - before['mounts'])}")
    if before["mounts"] - after["mounts"]:
        out.append(f"mounts removed: {sorted(before['mounts'] - after['mounts'])}")
    left = {pid: comm for pid, comm in after["processes"].items()
            if pid not in before["processes"] and comm in programs}
    if left:
        out.append(f"processes of the tier still running: {left}")
    for key, what in (("sysctls", "kernel settings"), ("packet_filter", "packet filter rules"),
                      ("interfaces", "network interfaces"), ("paths", "paths")):
        if key in before and before[key] != after[key]:
            out.append(f"{what} changed: before {before[key]}, after {after[key]}")
    return out
