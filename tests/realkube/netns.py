"""Network namespaces for tests: pods with addresses of their own, never loopback, and nothing
added to the machine's own network namespace.

`PodNetworks` (in whatever network namespace the caller is in, the "node's"): each pod gets a
network namespace of its own, held by a sleeping process and joined to the node's by a veth pair:
pod k has 10.78.k.2/30, the node's end 10.78.k.1. `listen(ip)` opens a listening socket inside a
pod's namespace (the process stays where it is: the socket is made with the calling thread moved
there for the moment); `enter(ip)` is the command prefix that runs a program there.

`NodeNetwork` moves the calling thread (a test's main thread: every process and thread it starts
from then on inherits it) into a new network namespace for a while: loopback up, the node's
address 10.77.0.1 on a veth pair, and PodNetworks in it; at exit the pods' namespaces go and the
thread is moved back. A test that runs the daemon and its API server inside one calls pods at
their own addresses, as on a node. Needs root (CAP_SYS_ADMIN).
"""
import ctypes
import os
import shutil
import socket
import subprocess
import threading
import time

CLONE_NEWNET = 0x40000000
NODE_IP = "10.77.0.1"

_libc = ctypes.CDLL(None, use_errno=True)


def tool(name):
    for path in (shutil.which(name), f"/usr/sbin/{name}", f"/sbin/{name}", f"/usr/bin/{name}"):
        if path and os.access(path, os.X_OK):
            return path
    raise RuntimeError(f"{name} is missing (the Makefile's test packages install it)")


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


def _unshare_net():
    if _libc.unshare(CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"unshare(CLONE_NEWNET): {os.strerror(e)}")


def net_namespace_inode(path="/proc/thread-self/ns/net"):
    return os.stat(path).st_ino


def relay(client, upstream):
    """Copies bytes both ways between two connected sockets, each way on a thread of its own,
    passing each end-of-stream on (a TCP relay: the demo's ports, the tests' HTTP/2 front)."""
    def pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    for a, b in ((client, upstream), (upstream, client)):
        threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def set_up_node_link():
    """In the caller's (new) network namespace: loopback up, and NODE_IP/24 on one end of a veth
    pair whose both ends stay there (a node's address that is not loopback)."""
    ip = tool("ip")
    for args in (("link", "set", "lo", "up"),
                 ("link", "add", "vmk-node", "type", "veth", "peer", "name", "vmk-node-peer"),
                 ("addr", "add", f"{NODE_IP}/24", "dev", "vmk-node"),
                 ("link", "set", "vmk-node-peer", "up"),
                 ("link", "set", "vmk-node", "up")):
        subprocess.run([ip, *args], check=True)


class PodNetworks:
    """Pod network namespaces joined to the caller's by veth pairs."""

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 1
        self._pods = {}  # key -> (holder process, ip)
        self.ip = tool("ip")
        self.nsenter = tool("nsenter")
        self.unshare = tool("unshare")

    def set_up(self, key, metadata=None):
        """A network namespace for `key` (a sandbox id, a pod name); returns its address."""
        with self._lock:
            if key in self._pods:
                return self._pods[key][1]
            k = self._next
            self._next += 1
        if k > 250:
            raise RuntimeError("more than 250 pod networks at once")
        holder = subprocess.Popen([self.unshare, "--net", "--", "sleep", "infinity"])
        own = net_namespace_inode()
        deadline = time.monotonic() + 10
        while net_namespace_inode(f"/proc/{holder.pid}/ns/net") == own:
            if time.monotonic() > deadline or holder.poll() is not None:
                holder.kill()
                raise RuntimeError("the pod's network namespace did not come up")
            time.sleep(0.005)
        link, pod_ip = f"vmk-pod{k}", f"10.78.{k}.2"

        def inside(*args):
            subprocess.run([self.nsenter, "-t", str(holder.pid), "-n", self.ip, *args],
                           check=True)
        try:
            subprocess.run([self.ip, "link", "add", link, "type", "veth", "peer", "name", "eth0",
                            "netns", str(holder.pid)], check=True)
            subprocess.run([self.ip, "addr", "add", f"10.78.{k}.1/30", "dev", link], check=True)
            subprocess.run([self.ip, "link", "set", link, "up"], check=True)
            inside("link", "set", "lo", "up")
            inside("addr", "add", f"{pod_ip}/30", "dev", "eth0")
            inside("link", "set", "eth0", "up")
            inside("route", "add", "default", "via", f"10.78.{k}.1")
        except BaseException:
            holder.kill()
            holder.wait()
            raise
        with self._lock:
            self._pods[key] = (holder, pod_ip)
        return pod_ip

    def tear_down(self, key):
        """The namespace goes with its holder, and the veth pair with it."""
        with self._lock:
            entry = self._pods.pop(key, None)
        if entry:
            entry[0].kill()
            entry[0].wait()

    def _holder(self, pod_ip):
        with self._lock:
            for holder, ip in self._pods.values():
                if ip == pod_ip:
                    return holder
        raise KeyError(f"no pod network has the address {pod_ip}")

    def enter(self, pod_ip):
        """The command prefix that runs a program in the pod network with this address."""
        return [self.nsenter, "-t", str(self._holder(pod_ip).pid), "-n"]

    def listen(self, pod_ip, port=0, backlog=128):
        """A TCP socket listening on pod_ip:port inside that pod's network namespace."""
        target = os.open(f"/proc/{self._holder(pod_ip).pid}/ns/net", os.O_RDONLY)
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(target)
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((pod_ip, port))
                sock.listen(backlog)
            finally:
                _setns(back)
        finally:
            os.close(target)
            os.close(back)
        return sock

    def close(self):
        for key in list(self._pods):
            self.tear_down(key)


class NodeNetwork:
    """The calling thread in a network namespace of its own while inside `with`; `pods` are
    PodNetworks there."""

    def __init__(self):
        self.pods = None
        self._back = None

    def __enter__(self):
        self._back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        _unshare_net()
        try:
            set_up_node_link()
            self.pods = PodNetworks()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.pods is not None:
            self.pods.close()
        if self._back is not None:
            _setns(self._back)
            os.close(self._back)
            self._back = None
