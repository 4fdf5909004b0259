"""Runs a command inside a node of the test's own: a mount and a network namespace where the real
kubelet may do what it does to a machine without doing it to this one.

    /usr/bin/python3 tests/realkube/node_namespace.py WORKDIR -- COMMAND [ARG...]

It enters new mount and network namespaces itself (`unshare --mount --net`, mounts private), then
sets the node up there and runs COMMAND in it, with the command's exit status as its own:
- loopback up, and the node's address NODE_IP on one end of a veth pair whose both ends stay in
  the namespace (the kubelet refuses a loopback --node-ip);
- a tmpfs over /var/log: the kubelet writes /var/log/pods and /var/log/containers;
- /var/lib an overlay of the machine's, its writes kept in a tmpfs: the kubelet makes its
  device-plugin socket in /var/lib/kubelet/device-plugins whatever its --root-dir;
- files holding the values the 1.20 kubelet wants bound over the kernel settings it would
  otherwise change (machine.KUBELET_SYSCTLS; the files live in WORKDIR/sysctls).
The command sees VM_NODE_NAMESPACE (the namespace's inode, which tests compare with their own to
refuse to run elsewhere) and VM_NODE_IP. Everything goes when the last process in the namespaces
ends: nothing is added to the machine's own network namespace or mount table.
"""
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import KUBELET_SYSCTLS  # noqa: E402
from netns import NODE_IP, set_up_node_link, tool  # noqa: E402


def run(*args):
    subprocess.run(args, check=True)


def net_namespace_inode():
    return os.stat("/proc/self/ns/net").st_ino


def set_up(workdir):
    mount = tool("mount")
    set_up_node_link()
    run(mount, "-t", "tmpfs", "-o", "mode=0755", "node-var-log", "/var/log")
    # The 1.20 kubelet makes its device-plugin socket at a fixed path whatever its --root-dir
    # (/var/lib/kubelet/device-plugins/kubelet.sock): on a machine without a kubelet that would
    # create /var/lib/kubelet, on one with a kubelet replace its socket. In the node, /var/lib is
    # an overlay of the machine's, whatever is written there kept in a tmpfs that goes with it.
    layers = Path(workdir) / "var-lib"
    layers.mkdir(parents=True, exist_ok=True)
    run(mount, "-t", "tmpfs", "-o", "mode=0700", "node-var-lib", str(layers))
    (layers / "upper").mkdir()
    (layers / "work").mkdir()
    run(mount, "-t", "overlay", "-o",
        f"lowerdir=/var/lib,upperdir={layers / 'upper'},workdir={layers / 'work'}",
        "node-var-lib", "/var/lib")
    values = Path(workdir) / "sysctls"
    values.mkdir(parents=True, exist_ok=True)
    for key, value in KUBELET_SYSCTLS.items():
        held = values / key.replace("/", "_")
        held.write_text(f"{value}\n")
        run(mount, "--bind", str(held), f"/proc/sys/{key}")


def main(argv):
    if "--" not in argv or argv.index("--") != 2:
        raise SystemExit("usage: node_namespace.py WORKDIR -- COMMAND [ARG...]")
    workdir, command = argv[1], argv[3:]
    if os.environ.get("VM_NODE_NAMESPACE_ENTERED") != str(os.getpid()):
        # Not inside yet: the same script again under unshare (whose exec keeps our pid).
        os.execve(tool("unshare"), ["unshare", "--mount", "--net", "--propagation", "private",
                                    "--", sys.executable, *argv],
                  {**os.environ, "VM_NODE_NAMESPACE_ENTERED": str(os.getpid()),
                   "VM_NODE_OUTER_NET": str(net_namespace_inode())})
    if str(net_namespace_inode()) == os.environ.get("VM_NODE_OUTER_NET"):
        raise SystemExit("node namespace: still in the machine's network namespace")
    set_up(workdir)
    env = {**os.environ, "VM_NODE_NAMESPACE": str(net_namespace_inode()), "VM_NODE_IP": NODE_IP}
    env.pop("VM_NODE_NAMESPACE_ENTERED")
    env.pop("VM_NODE_OUTER_NET")
    return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
