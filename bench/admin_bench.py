#!/usr/bin/python3
"""The admin server's cost: a standalone daemon's probe listener (server/http_server.h).

A standalone daemon with no pods (or --pods N, one configMap volume each) serves /healthz,
/readyz and /metrics on 127.0.0.1. Measured:
  * latency of K sequential GETs of /healthz and of /metrics, each on its own connection (as the
    kubelet probes) and all on one keep-alive connection (as a scraper), from this process
    (Python's http.client, so the client's own time is included): p50, p99, max;
  * RSS and threads of the daemon before, with C keep-alive connections open (each has answered
    one /healthz and waits for the next request: one thread each), and after they are closed:
    the per-connection cost. C defaults to 15, below the probe listener's budget of 16
    (AdminServer::kProbeConnections).

Usage: bench/admin_bench.py [--daemon PATH] [--requests K] [--connections C] [--pods N]
Prints markdown tables (docs/design.md, "HTTP stacks, weighed").
"""
import argparse
import http.client
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from rss_by_pods import memory_kib, unmount_under, write_atomically

REPO = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def threads(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def percentile(sorted_ms, p):
    return sorted_ms[min(len(sorted_ms) - 1, len(sorted_ms) * p // 100)]


def timed_gets(port, path, k, keep_alive):
    out = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10) if keep_alive else None
    for _ in range(k):
        start = time.monotonic()
        c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"GET {path}: {r.status} {body[:200]!r}")
        if conn is None:
            c.close()
        out.append((time.monotonic() - start) * 1000)
    if conn is not None:
        conn.close()
    out.sort()
    return out, len(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", default=str(REPO / "build" / "bin" / "volumemanager"))
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--connections", type=int, default=15)
    ap.add_argument("--pods", type=int, default=0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="admin-bench-"))
    for d in ("pods", "objects", "root", "state"):
        (work / d).mkdir()
    (work / "objects" / "objects.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared-cm\ndata:\n  value: v0\n")
    for i in range(args.pods):
        write_atomically(work / "pods" / f"pod-{i:05d}.yaml", (
            f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  uid: p{i}\nspec:\n"
            "  containers:\n  - name: app\n    image: x\n    volumeMounts:\n"
            "    - {name: cfg, mountPath: /cfg}\n  volumes:\n  - name: cfg\n"
            "    configMap: {name: shared-cm}\n"))
    port = free_port()
    log = open(work / "daemon.log", "wb")
    proc = subprocess.Popen(
        [args.daemon, "--root-dir", str(work / "root"), "--state-dir", str(work / "state"),
         "--node-name", "bench", "--pod-manifest-path", str(work / "pods"),
         "--object-manifest-path", str(work / "objects"),
         "--healthz-bind-address", f"127.0.0.1:{port}", "--debug-bind-address", ""],
        stdout=log, stderr=subprocess.STDOUT)
    print(f"# admin server, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load "
          f"{os.getloadavg()[0]:.2f}, daemon {args.daemon}, {args.pods} pods", flush=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    c.close()
                    break
                c.close()
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"daemon not ready; log {work / 'daemon.log'}")
            time.sleep(0.2)
        time.sleep(2)
        print("| request | connection | requests | body bytes | p50 ms | p99 ms | max ms |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for path in ("/healthz", "/metrics"):
            for keep_alive in (False, True):
                ms, size = timed_gets(port, path, args.requests, keep_alive)
                print(f"| GET {path} | {'one keep-alive' if keep_alive else 'one each'} | "
                      f"{len(ms)} | {size} | {percentile(ms, 50):.2f} | {percentile(ms, 99):.2f} "
                      f"| {ms[-1]:.2f} |", flush=True)
        time.sleep(1)
        rss0, _, anon0 = memory_kib(proc.pid)
        threads0 = threads(proc.pid)
        conns = []
        for _ in range(args.connections):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/healthz")
            c.getresponse().read()
            conns.append(c)
        time.sleep(1)
        rss1, _, anon1 = memory_kib(proc.pid)
        threads1 = threads(proc.pid)
        for c in conns:
            c.close()
        time.sleep(2)
        rss2, _, anon2 = memory_kib(proc.pid)
        threads2 = threads(proc.pid)
        n = args.connections
        print(f"# RSS / anonymous / threads: idle {rss0} / {anon0} KiB / {threads0}; with {n} "
              f"keep-alive connections {rss1} / {anon1} KiB / {threads1}; after closing them "
              f"{rss2} / {anon2} KiB / {threads2}; per open connection "
              f"{(rss1 - rss0) / n:.1f} KiB RSS, {(anon1 - anon0) / n:.1f} KiB anonymous; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        unmount_under(work / "root")
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
