#!/usr/bin/python3
"""Cluster-mode benchmark: the real daemon (build/bin/volumemanager --kubeconfig) against
tests/apiserver/kube-test-apiserver, beside a simulated kubelet.

The kubelet's part is played as in tests/e2e/test_cluster.py: before the daemon starts, every pod
volume is set up with the kubelet's writer algorithm (tests/e2e/kubelet_writer.py), so the daemon
(default --volume-ownership kubelet) refreshes them. Each ConfigMap has two keys, `value` (what
the benchmark changes) and `static.conf` (512 bytes).

Scenarios (each on a fresh test server, and a fresh daemon):
  latency   object replaced through the API (PUT) -> new bytes visible in the volume, for
            (a) 1 pod, (b) 1,000 pods sharing one ConfigMap (time to the last), (c) 1,000 pods
            with one ConfigMap each (one object changed at a time). Visible = inotify reports
            IN_MOVED_TO "..data" in the volume dir and the volume's `value` file then reads the
            new value; the clock starts when the PUT is sent (CLOCK_MONOTONIC). A separate
            process holds a plain watch on the same ConfigMaps and timestamps each event as it
            reads it: the test server's own delivery latency, for comparison.
  idle      CPU seconds of the daemon (its threads' time on CPU, /proc/<pid>/task/*/schedstat)
            over --idle-seconds with 1,000 pods (one ConfigMap each, 1,000 watches) and no
            changes, and its wake-ups (context switches of all its threads,
            /proc/<pid>/task/*/status) per second.
  scale     N pods with one ConfigMap each (one watch per object) through nghttpx (TLS +
            HTTP/2 front, HTTP/1.1 + TLS back to the test server): set-up time, the daemon's TCP
            connections, RSS and PSS per watched object, then every object changed once and every
            volume checked (no stream starved).

Usage: bench/cluster_bench.py [--daemon PATH] [--only latency,idle,scale] [--changes N]
                              [--pods N] [--scale N ...] [--idle-seconds S] [--qps Q --burst B]
                              [--default-qps-scale N ...] [--bookmark-period S] [--quick]
                              [--json FILE]
Prints one line per measurement; the numbers go to BENCHMARKS.md ("Cluster mode").
"""
import argparse
import ctypes
import ctypes.util
import http.client
import json
import os
import resource
import select
import shutil
import signal
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "apiserver"))
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from harness import TestApiServer  # noqa: E402
import kubelet_writer  # noqa: E402

NODE = "bench-node"
NS = "bench"
CM_PLUGIN = "kubernetes.io~configmap"
STATIC = "x" * 512
WRAPPER = []  # --wrapper
RESULTS = {"latency": []}  # every sample, for --json (bench/plots.py draws them)

# --- inotify (ctypes) ----------------------------------------------------------------------

IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class Inotify:
    """IN_MOVED_TO / IN_CREATE of `..data` in many dirs; yields (read time, wd) per event."""

    def __init__(self):
        self.fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")

    def add(self, path):
        wd = _libc.inotify_add_watch(self.fd, str(path).encode(), IN_MOVED_TO | IN_CREATE)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        return wd

    def read(self, timeout):
        """Waits up to `timeout` s; returns (time the events were read, [wd of each ..data])."""
        r, _, _ = select.select([self.fd], [], [], timeout)
        now = time.monotonic()
        if not r:
            return now, []
        out = []
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            i = 0
            while i < len(buf):
                wd, _mask, _cookie, length = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + length].rstrip(b"\0")
                i += 16 + length
                if name == b"..data":
                    out.append(wd)
        return now, out

    def close(self):
        os.close(self.fd)


# --- the API over one keep-alive connection ------------------------------------------------

class Api:
    def __init__(self, server):
        self.server = server
        self.conn = None

    def _connect(self):
        self.conn = http.client.HTTPSConnection(self.server.host, self.server.port,
                                                context=self.server.ssl_context, timeout=60)

    def request(self, method, path, body=None):
        for attempt in range(3):
            if self.conn is None:
                self._connect()
            try:
                data = json.dumps(body).encode() if body is not None else None
                headers = {"Authorization": f"Bearer {self.server.token}",
                           "Accept": "application/json"}
                if data is not None:
                    headers["Content-Type"] = "application/json"
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                payload = resp.read()
                return resp.status, json.loads(payload) if payload else None
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def ok(self, method, path, body=None):
        status, data = self.request(method, path, body)
        if status not in (200, 201):
            raise RuntimeError(f"{method} {path}: {status} {data}")
        return data


def configmap(name, value):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS},
            "data": {"value": value, "static.conf": STATIC}}


def create_configmap(api, name, value):
    return api.ok("POST", f"/api/v1/namespaces/{NS}/configmaps", configmap(name, value))


def replace_configmap(api, name, value, rv):
    """PUT with the last resourceVersion; returns (send time, return time, new rv)."""
    obj = configmap(name, value)
    obj["metadata"]["resourceVersion"] = rv
    sent = time.monotonic()
    out = api.ok("PUT", f"/api/v1/namespaces/{NS}/configmaps/{name}", obj)
    return sent, time.monotonic(), out["metadata"]["resourceVersion"]


def create_node(api):
    """The Node the pods are bound to, as its kubelet registers it: without it the daemon warns
    that it serves nothing and asks for the node every 5 s, which a real node does not cost."""
    status, data = api.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                         "metadata": {"name": NODE}})
    if status not in (201, 409):
        raise RuntimeError(f"POST /api/v1/nodes: {status} {data}")


def create_pod(api, name, cm):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
           "spec": {"nodeName": NODE,
                    "containers": [{"name": "app", "image": "busybox",
                                    "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}],
                    "volumes": [{"name": "cfg", "configMap": {"name": cm}}]}}
    return api.ok("POST", f"/api/v1/namespaces/{NS}/pods", pod)["metadata"]["uid"]


# --- processes -----------------------------------------------------------------------------

def proc_run_seconds(pid):
    """Time on CPU of every thread of `pid` (/proc/PID/task/*/schedstat, ns): at idle a minute
    holds a few clock ticks, which utime + stime would round to."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except OSError:
            pass  # the thread ended
    return total / 1e9


def proc_switches(pid):
    """Context switches (voluntary + involuntary) of every thread of `pid`: its wake-ups."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
        except OSError:
            pass  # the thread ended
    return total


def proc_memory_kib(pid):
    """(RSS, PSS, anonymous) in KiB from smaps_rollup."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        fields[key.strip()] = int(rest.split()[0])
    return fields["Rss"], fields["Pss"], fields.get("Anonymous", 0)


def proc_tcp_connections(pid, remote_port):
    """Established TCP connections of `pid` to 127.0.0.1:remote_port (sockets it holds, matched
    by inode against /proc/<pid>/net/tcp{,6})."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "01" and f[9] in inodes and int(f[2].rsplit(":", 1)[1], 16) == remote_port:
                count += 1
    return count


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Nghttpx:
    """nghttpx as the TLS + HTTP/2 front of the test server (backend: HTTP/1.1 over TLS)."""

    def __init__(self, server, workdir):
        self.port = free_port()
        pki = Path(server.pki)
        self.log = open(workdir / "nghttpx.log", "wb")
        # Watches are long idle streams: the default read timeouts (1 m backend, 3 m frontend)
        # would cut them, which a real kube-apiserver does not do.
        self.proc = subprocess.Popen(
            ["nghttpx", "--conf=/dev/null", f"--errorlog-file={workdir / 'nghttpx.log'}",
             f"--frontend=127.0.0.1,{self.port}",
             f"--backend=127.0.0.1,{server.port};;tls", "--insecure", "--workers=1",
             "--frontend-http2-max-concurrent-streams=100", "--backend-read-timeout=1h",
             "--frontend-http2-read-timeout=1h", "--backend-write-timeout=1h",
             "--backend-connect-timeout=1m",
             f"--rlimit-nofile={resource.getrlimit(resource.RLIMIT_NOFILE)[1]}", "--log-level=WARN", "--no-ocsp",
             str(pki / "server.key"), str(pki / "server.crt")],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        import socket
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nghttpx did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


class Daemon:
    def __init__(self, binary, server, workdir, extra=(), via_port=None):
        self.workdir = workdir
        self.root = workdir / "root"
        self.root.mkdir(exist_ok=True)
        text = Path(server.kubeconfig).read_text()
        if via_port is not None:
            text = text.replace(f"127.0.0.1:{server.port}", f"127.0.0.1:{via_port}")
        self.kubeconfig = workdir / "daemon.kubeconfig"
        self.kubeconfig.write_text(text)
        self.binary = binary
        self.extra = list(extra)
        self.proc = None

    def start(self, extra=()):
        self.log = open(self.workdir / "daemon.log", "ab")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [*WRAPPER, self.binary, "--kubeconfig", str(self.kubeconfig), "--root-dir", str(self.root),
             "--state-dir", str(self.workdir / "state"), "--node-name", NODE,
             *self.extra, *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        return self.proc.pid

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        self.proc = None

    def volume(self, uid):
        return self.root / "pods" / uid / "volumes" / CM_PLUGIN / "cfg"

    def alive(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"daemon exited with {self.proc.returncode}; log: "
                               f"{self.workdir / 'daemon.log'}")


def wait_watches(server, want, timeout, daemon=None):
    """Waits until the test server holds `want` open watches; returns the time it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if daemon is not None:
            daemon.alive()
        try:
            if server.admin("GET", "state")["watches"] >= want:
                return time.monotonic() - start
        except OSError:
            pass  # a busy server (10,000 connections being set up) may not answer in time
        time.sleep(0.2)
    raise RuntimeError(f"{server.admin('GET', 'state')['watches']} watches open after "
                       f"{timeout} s, want {want}")


def read_value(vol):
    try:
        return (vol / "value").read_text()
    except OSError:
        return None


def percentile(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


def load():
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# --- the test server's own delivery, seen by a separate plain watch client -----------------

WATCHER_CODE = r"""
import json, socket, ssl, sys, time
host, port, token, ca, path, out = sys.argv[1:7]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)
s.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
f = open(out, "w", buffering=1)
buf = b""
head = True
while True:
    piece = s.recv(65536)
    now = time.monotonic()
    if not piece:
        break
    buf += piece
    if head:
        if b"\r\n\r\n" not in buf:
            continue
        buf = buf.split(b"\r\n\r\n", 1)[1]
        head = False
    # chunked: <hex>\r\n<event line>\r\n ; events are one JSON object per line
    while True:
        line, sep, rest = buf.partition(b"\r\n")
        if not sep:
            break
        size = int(line.split(b";")[0], 16)
        if len(rest) < size + 2:
            break
        chunk, buf = rest[:size], rest[size + 2:]
        for ev in chunk.split(b"\n"):
            if ev.strip():
                o = json.loads(ev)["object"]
                f.write(f"{now} {o['metadata']['name']} {o.get('data', {}).get('value')}\n")
"""


class ServerWatcher:
    def __init__(self, server, workdir):
        self.out = workdir / "server-watch.txt"
        path = (f"/api/v1/namespaces/{NS}/configmaps?watch=1&allowWatchBookmarks=false"
                f"&timeoutSeconds=3600")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", "-c", WATCHER_CODE, server.host, str(server.port),
             server.token, server.ca_file, path, str(self.out)])

    def times(self):
        """value -> first time the watch client read an event carrying it."""
        out = {}
        if self.out.exists():
            for line in self.out.read_text().splitlines():
                t, _name, value = line.split(" ", 2)
                out.setdefault(value, float(t))
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


# --- scenarios -----------------------------------------------------------------------------

def set_up_pods(api, daemon, pods, cm_of):
    """Creates `pods` pods (the i-th mounting ConfigMap cm_of(i)) and sets each volume up as the
    kubelet would; returns their volume dirs."""
    vols = []
    for i in range(pods):
        uid = create_pod(api, f"pod-{i}", cm_of(i))
        vol = daemon.volume(uid)
        kubelet_writer.set_up(vol, {"value": "v0", "static.conf": STATIC})
        vols.append(vol)
    return vols


def run_changes(api, server_watcher, targets, changes, gap, timeout=30.0):
    """`targets`: list of (ConfigMap name, [volume dirs]). Change i replaces targets[i % len]
    with a new value; returns per-change rows (to first, to last, put rtt, server delivery) in
    ms from the PUT being sent."""
    ino = Inotify()
    wd_to_vol = {}
    rvs = {}
    for name, vols in targets:
        for v in vols:
            wd_to_vol[ino.add(v)] = v
        rvs[name] = api.ok("GET", f"/api/v1/namespaces/{NS}/configmaps/{name}")[
            "metadata"]["resourceVersion"]
    rows = []
    for i in range(changes):
        name, vols = targets[i % len(targets)]
        value = f"change-{i}-{time.monotonic_ns()}"
        pending = set(vols)
        # Drain events of earlier changes (e.g. delayed cleanup writes) first.
        ino.read(0)
        sent, returned, rvs[name] = replace_configmap(api, name, value, rvs[name])
        first = last = None
        deadline = sent + timeout
        while pending:
            now, wds = ino.read(max(0.0, deadline - time.monotonic()))
            if not wds and time.monotonic() >= deadline:
                raise RuntimeError(f"change {i} of {name}: {len(pending)} of {len(vols)} volumes "
                                   f"not updated after {timeout} s")
            for wd in set(wds):
                v = wd_to_vol.get(wd)
                if v in pending and read_value(v) == value:
                    pending.discard(v)
                    if first is None:
                        first = now
                    last = now
        rows.append({"value": value, "first": (first - sent) * 1e3, "last": (last - sent) * 1e3,
                     "rtt": (returned - sent) * 1e3, "sent": sent})
        time.sleep(gap)
    ino.close()
    time.sleep(0.2)
    seen = server_watcher.times()
    for r in rows:
        t = seen.get(r["value"])
        r["server"] = (t - r["sent"]) * 1e3 if t is not None else float("nan")
    return rows


def summarize(label, rows, load_before):
    def pp(key):
        vals = [r[key] for r in rows]
        return f"{percentile(vals, 50):.1f} / {percentile(vals, 99):.1f} / {max(vals):.1f}"
    print(f"| {label} | {len(rows)} | {pp('first')} | {pp('last')} | {pp('server')} | "
          f"{pp('rtt')} | {load_before} -> {load()} |", flush=True)
    RESULTS["latency"].append({"scenario": label, "load": [load_before, load()],
                               **{key: [r[key] for r in rows]
                                  for key in ("first", "last", "server", "rtt")}})


def set_bookmark_period(server, args):
    """The server's period between bookmarks (each watch takes it when it opens)."""
    if args.bookmark_period:
        server.admin("POST", "settings", {"bookmark_period": args.bookmark_period})


def scenario_latency(args, kind, pods, workroot, idle_seconds=0):
    """kind: 'one' (1 pod), 'shared' (`pods` pods, one ConfigMap), 'each' (one ConfigMap per pod)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"latency-{kind}-", dir=workroot))
    with TestApiServer() as server:
        set_bookmark_period(server, args)
        api = Api(server)
        create_node(api)
        n_cm = pods if kind == "each" else 1
        for i in range(n_cm):
            create_configmap(api, f"cm-{i}", "v0")
        daemon = Daemon(args.daemon, server, workdir, args.daemon_args)
        vols = set_up_pods(api, daemon, pods, (lambda i: f"cm-{i}") if kind == "each"
                           else (lambda i: "cm-0"))
        watcher = ServerWatcher(server, workdir)
        wait_watches(server, 1, 10)
        pid = daemon.start()
        try:
            setup = wait_watches(server, 1 + 1 + n_cm, 120, daemon)
            if kind == "each":
                targets = [(f"cm-{i}", [vols[i]]) for i in range(pods)]
            else:
                targets = [("cm-0", vols)]
            # One change to every target first: every volume is known to the daemon and live.
            run_changes(api, watcher, targets, len(targets) if kind == "each" else 1, 0.0, 120)
            time.sleep(1)
            load_before = load()
            rows = run_changes(api, watcher, targets, args.changes, args.gap)
            label = {"one": "1 pod, 1 ConfigMap",
                     "shared": f"{pods} pods sharing 1 ConfigMap",
                     "each": f"{pods} pods, 1 ConfigMap each (one changed at a time)"}[kind]
            print(f"# {label}: watches open {setup:.1f} s after start", flush=True)
            summarize(label, rows, load_before)
            if idle_seconds:
                idle(pid, daemon, idle_seconds, f"{pods} pods, {n_cm} ConfigMap(s)")
        finally:
            daemon.stop()
            watcher.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def server_traffic(server):
    """The server's request and watch-event counts, summed over its clients."""
    total = {}
    for c in server.admin("GET", "clients")["clients"].values():
        for group in ("requests", "watch_events"):
            for k, v in c[group].items():
                total[k] = total.get(k, 0) + v
    return total


def idle(pid, daemon, seconds, label, server=None):
    # Let delayed work settle: cleanup writes come --unpublished-grace (30 s) after a change.
    time.sleep(35)
    load_before = load()
    traffic0 = server_traffic(server) if server else {}
    cpu0, t0, sw0 = proc_run_seconds(pid), time.monotonic(), proc_switches(pid)
    time.sleep(seconds)
    daemon.alive()
    cpu1, t1, sw1 = proc_run_seconds(pid), time.monotonic(), proc_switches(pid)
    if server:
        # What the window held (object watches last 30-60 min, the pod watch 5-10 min: a long
        # window holds re-watches).
        traffic1 = server_traffic(server)
        delta = {k: v - traffic0.get(k, 0) for k, v in traffic1.items()
                 if v - traffic0.get(k, 0)}
        print(f"#   in the window, at the server: "
              f"{', '.join(f'{k} {v}' for k, v in sorted(delta.items()))}", flush=True)
    rss, pss, anon = proc_memory_kib(pid)
    print(f"| idle, {label} | {t1 - t0:.0f} s | {cpu1 - cpu0:.3f} CPU s (schedstat) | "
          f"{100 * (cpu1 - cpu0) / (t1 - t0):.4f} % of a core | "
          f"{(sw1 - sw0) / (t1 - t0):.1f} wake-ups/s | RSS {rss / 1024:.1f} MiB, "
          f"PSS {pss / 1024:.1f} MiB, anon {anon / 1024:.1f} MiB | load {load_before} -> "
          f"{load()} |", flush=True)


def scenario_scale(args, n, workroot, qps, burst):
    workdir = Path(tempfile.mkdtemp(prefix=f"scale-{n}-", dir=workroot))
    with TestApiServer() as server:
        set_bookmark_period(server, args)
        front = Nghttpx(server, workdir)
        api = Api(server)
        create_node(api)
        try:
            # Baseline: the daemon with no pods, through the same front.
            base = Daemon(args.daemon, server, workdir / "base" if False else workdir,
                          args.daemon_args, via_port=front.port)
            pid = base.start(["--kube-api-qps", str(qps), "--kube-api-burst", str(burst)])
            wait_watches(server, 1, 30, base)
            time.sleep(3)
            rss0, pss0, anon0 = proc_memory_kib(pid)
            conns0 = proc_tcp_connections(pid, front.port)
            base.stop()
            shutil.rmtree(workdir / "state", ignore_errors=True)

            t = time.monotonic()
            for i in range(n):
                create_configmap(api, f"cm-{i}", "v0")
            daemon = Daemon(args.daemon, server, workdir, args.daemon_args, via_port=front.port)
            vols = set_up_pods(api, daemon, n, lambda i: f"cm-{i}")
            print(f"# N={n}: {n} ConfigMaps, pods and kubelet volumes created in "
                  f"{time.monotonic() - t:.0f} s", flush=True)
            watches_before = server.admin("GET", "state")["watches"]
            load_before = load()
            pid = daemon.start(["--kube-api-qps", str(qps), "--kube-api-burst", str(burst)])
            try:
                setup = wait_watches(server, watches_before + 1 + n, args.setup_timeout, daemon)
                time.sleep(5)
                rss, pss, anon = proc_memory_kib(pid)
                conns = proc_tcp_connections(pid, front.port)
                state = server.admin("GET", "state")
                print(f"# N={n} qps={qps} burst={burst}: set-up {setup:.1f} s (daemon start -> "
                      f"{n} object watches + the pod watch open at the server), load "
                      f"{load_before} -> {load()}", flush=True)
                print(f"#   daemon TCP connections to nghttpx: {conns} (baseline {conns0}); "
                      f"server: {state['watches']} watches, {state['connections_open']} "
                      f"connections open (nghttpx backend, HTTP/1.1)", flush=True)
                print(f"#   RSS {rss / 1024:.1f} MiB (baseline {rss0 / 1024:.1f}), PSS "
                      f"{pss / 1024:.1f} MiB (baseline {pss0 / 1024:.1f}), anon "
                      f"{anon / 1024:.1f} MiB (baseline {anon0 / 1024:.1f}); per watched object: "
                      f"RSS {(rss - rss0) / n:.1f} KiB, PSS {(pss - pss0) / n:.1f} KiB", flush=True)
                if not args.no_starvation:
                    starvation(api, daemon, vols, n)
                if args.scale_idle:
                    idle(pid, daemon, args.idle_seconds, f"N={n} via nghttpx", server)
            finally:
                daemon.stop()
        finally:
            front.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def starvation(api, daemon, vols, n):
    """Every object changed once (PUTs back to back); then every volume must show it."""
    t0 = time.monotonic()
    for i in range(n):
        rv = api.ok("GET", f"/api/v1/namespaces/{NS}/configmaps/cm-{i}")["metadata"][
            "resourceVersion"]
        replace_configmap(api, f"cm-{i}", f"once-{i}", rv)
    t_put = time.monotonic() - t0
    pending = set(range(n))
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        pending = {i for i in pending if read_value(vols[i]) != f"once-{i}"}
        if pending:
            time.sleep(0.5)
    print(f"#   every object changed once ({n} PUTs in {t_put:.1f} s): "
          f"{n - len(pending)} of {n} volumes current "
          f"{time.monotonic() - t0:.1f} s after the first PUT"
          + (f"; NOT updated: {sorted(pending)[:10]}" if pending else ""), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--daemon", default=str(REPO / "build" / "bin" / "volumemanager"))
    p.add_argument("--only", default="latency,idle,scale",
                   help="comma list of latency (= one,shared,each), idle, scale")
    p.add_argument("--changes", type=int, default=100)
    p.add_argument("--gap", type=float, default=0.05, help="seconds between changes")
    p.add_argument("--pods", type=int, default=1000)
    p.add_argument("--scale", type=int, nargs="*", default=[2000, 10000])
    p.add_argument("--default-qps-scale", type=int, nargs="*", default=[],
                   help="also run these N at the daemon's default --kube-api-qps/burst")
    p.add_argument("--qps", type=int, default=2000)
    p.add_argument("--burst", type=int, default=4000)
    p.add_argument("--setup-timeout", type=float, default=900)
    p.add_argument("--idle-seconds", type=float, default=60)
    p.add_argument("--scale-idle", action="store_true")
    p.add_argument("--no-starvation", action="store_true")
    p.add_argument("--bookmark-period", type=float, default=0,
                   help="seconds between the test server's bookmarks on each watch (0: its "
                        "default, 60 s); idle CPU at two periods gives the CPU per bookmark")
    p.add_argument("--workdir", default="/tmp")
    p.add_argument("--daemon-arg", dest="daemon_args", action="append", default=[])
    p.add_argument("--wrapper", default="",
                   help="run the daemon under this command (e.g. 'heaptrack -o FILE'); the "
                        "memory and CPU figures are then the wrapper's")
    p.add_argument("--json", default="",
                   help="also write every latency sample to this file (bench/plots.py reads it)")
    p.add_argument("--quick", action="store_true",
                   help="20 changes, 100 pods, N=200 through nghttpx, 10 s idle")
    args = p.parse_args()
    WRAPPER[:] = args.wrapper.split()
    if args.quick:
        args.changes, args.pods, args.scale, args.idle_seconds = 20, 100, [200], 10
    # 10,000 watches need 10,000+ descriptors in the test server (each watch comes through
    # its own backend connection from nghttpx).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (65536, max(hard, 65536)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    only = set(args.only.split(","))
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load {load()}, daemon {args.daemon} {' '.join(args.daemon_args)}", flush=True)
    if only & {"latency", "one", "shared", "each", "idle"}:
        print("| scenario | changes | to first volume p50 / p99 / max ms | to last volume p50 / "
              "p99 / max ms | server watch delivery p50 / p99 / max ms | PUT round trip p50 / "
              "p99 / max ms | load |", flush=True)
    if only & {"latency", "one"}:
        scenario_latency(args, "one", 1, args.workdir)
    if only & {"latency", "shared"}:
        scenario_latency(args, "shared", args.pods, args.workdir)
    if only & {"latency", "each", "idle"}:
        scenario_latency(args, "each", args.pods, args.workdir,
                         idle_seconds=args.idle_seconds if "idle" in only else 0)
    if "scale" in only:
        for n in args.scale:
            scenario_scale(args, n, args.workdir, args.qps, args.burst)
        for n in args.default_qps_scale:
            scenario_scale(args, n, args.workdir, 50, 100)
    if args.json:
        RESULTS["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(RESULTS, indent=1))


if __name__ == "__main__":
    main()
