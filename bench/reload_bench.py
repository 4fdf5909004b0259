#!/usr/bin/python3
"""Reload actions at fan-out: how long from one object change to every application told.

Standalone mode; N pods (1,000) share one ConfigMap through a configMap volume, each with the
annotation `volumemanager.io/reload: POST http://:PORT/-/reload` and `reload-delay: 0`, and its
own address as `status.podIP` (127.1.x.y: every address of 127.0.0.0/8 is local here). A listener
per address stands for each pod's application: it notes when a request head arrives and answers
200. By default they are `build/bin/reload_listener` (one epoll process in C, printing each
arrival's CLOCK_MONOTONIC time); `--python-listeners` uses asyncio listeners in this process
instead (which cost as much CPU as the daemon's requests). Each round rewrites the ConfigMap's manifest (the change's time is
taken just before the rename) and waits until every listener has been called once for it; a
pod's latency is its call's arrival minus the change's time. Rounds are 1.5 s apart (the per-pod
minimum interval between two reloads is 1 s).

Goal (issue 31): p99 <= 300 ms on this 2-core machine with the default concurrency limit (32
requests in flight node-wide).

Usage: bench/reload_bench.py [--daemon PATH] [--pods 1000] [--rounds 10] [--quick]
                             [--json FILE] [-- extra daemon flags]
Prints a markdown table; writes the figures to --json when given.
"""
import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rss_by_pods import unmount_under

REPO = Path(__file__).resolve().parents[1]
CM = "kubernetes.io~configmap"
PORT = 18099


def address(i):
    return f"127.1.{i // 250}.{i % 250 + 1}"


def pod_yaml(i):
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-{i:04d}\n  uid: uid-{i:04d}\n"
            f"  annotations:\n    volumemanager.io/reload: POST http://:{PORT}/-/reload\n"
            f"    volumemanager.io/reload-delay: \"0\"\n"
            f"spec:\n  containers:\n  - name: app\n    image: busybox\n    volumeMounts:\n"
            f"    - name: config\n      mountPath: /etc/app\n"
            f"  volumes:\n  - name: config\n    configMap:\n      name: shared\n"
            f"status:\n  podIP: {address(i)}\n")


def configmap_yaml(n):
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n"
            f"data:\n  round: \"{n}\"\n  settings.yaml: |\n    level: {n}\n")


def percentile(values, p):
    values = sorted(values)
    k = max(0, min(len(values) - 1, int(round(p / 100.0 * len(values) + 0.5)) - 1))
    return values[k]


async def main_async(args, work):
    pods_dir, objects_dir, root, state = (work / n for n in ("pods", "objects", "root", "state"))
    for d in (pods_dir, objects_dir, root):
        d.mkdir()
    calls = {}  # address -> list of arrival times

    def handler_for(ip):
        async def handle(reader, writer):
            try:
                await reader.readuntil(b"\r\n\r\n")
                calls.setdefault(ip, []).append(time.monotonic())
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()
        return handle

    servers = []
    listener = None
    if args.python_listeners:
        servers = [await asyncio.start_server(handler_for(address(i)), address(i), PORT,
                                              backlog=64) for i in range(args.pods)]
    else:
        listener = await asyncio.create_subprocess_exec(
            args.listener, str(PORT), *[address(i) for i in range(args.pods)],
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        if (await listener.stdout.readline()).strip() != b"ready":
            raise SystemExit("reload_listener did not start")

        async def read_arrivals():
            while True:
                line = await listener.stdout.readline()
                if not line:
                    return
                index, ns = line.split()
                calls.setdefault(address(int(index)), []).append(int(ns) / 1e9)
        reader = asyncio.ensure_future(read_arrivals())

    (objects_dir / "shared.yaml").write_text(configmap_yaml(0))
    for i in range(args.pods):
        (pods_dir / f"app-{i:04d}.yaml").write_text(pod_yaml(i))
    log = open(work / "daemon.log", "wb")
    daemon = subprocess.Popen(
        [args.daemon, "--root-dir", str(root), "--state-dir", str(state), "--node-name", "bench",
         "--pod-manifest-path", str(pods_dir), "--object-manifest-path", str(objects_dir),
         "--healthz-bind-address", "", "--debug-bind-address", "", *args.extra],
        stdout=log, stderr=subprocess.STDOUT)
    rounds = []
    try:
        def all_set_up():
            return all((root / "pods" / f"uid-{i:04d}" / "volumes" / CM / "config" / "..data")
                       .exists() for i in range(args.pods))
        deadline = time.monotonic() + 120
        while not all_set_up():
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit("the volumes were not all set up; see " + str(work / "daemon.log"))
            await asyncio.sleep(0.1)
        await asyncio.sleep(2.0)
        if calls:
            raise SystemExit(f"{len(calls)} pods were called at set-up")
        def proc_cpu(pid):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        def daemon_cpu():
            return proc_cpu(daemon.pid)

        def listeners_cpu():
            return proc_cpu(listener.pid) if listener is not None else time.process_time()
        cpu = {"daemon": 0.0, "listeners": 0.0}
        for n in range(1, args.rounds + 1):
            before = {ip: len(t) for ip, t in calls.items()}
            cpu_daemon, cpu_self = daemon_cpu(), listeners_cpu()
            tmp = objects_dir / ".shared.yaml.tmp"
            tmp.write_text(configmap_yaml(n))
            t0 = time.monotonic()
            os.replace(tmp, objects_dir / "shared.yaml")
            deadline = t0 + 60
            while True:
                done = [calls[ip][before.get(ip, 0)] - t0 for ip in calls
                        if len(calls[ip]) > before.get(ip, 0)]
                if len(done) == args.pods or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.005)
            if len(done) < args.pods:
                raise SystemExit(f"round {n}: only {len(done)} of {args.pods} pods were called")
            rounds.append(done)
            cpu["daemon"] += daemon_cpu() - cpu_daemon
            cpu["listeners"] += listeners_cpu() - cpu_self
            await asyncio.sleep(1.5)
        extra_calls = sum(len(t) for t in calls.values()) - args.pods * args.rounds
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        log.close()
        for s in servers:
            s.close()
        if listener is not None:
            listener.stdin.close()
            await listener.wait()
            reader.cancel()
        unmount_under(root)
    cpu = {k: v / len(rounds) * 1000 for k, v in cpu.items()}
    return rounds, extra_calls, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--daemon", default=str(REPO / "build" / "bin" / "volumemanager"))
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="200 pods, 3 rounds")
    ap.add_argument("--json")
    ap.add_argument("--keep", help="copy the daemon's log here")
    ap.add_argument("--listener", default=str(REPO / "build" / "bin" / "reload_listener"))
    ap.add_argument("--python-listeners", action="store_true",
                    help="asyncio listeners in this process instead of reload_listener")
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()
    if args.quick:
        args.pods, args.rounds = 200, 3
    with tempfile.TemporaryDirectory(prefix="reload-bench-") as tmp:
        try:
            rounds, extra_calls, cpu = asyncio.run(main_async(args, Path(tmp)))
        finally:
            if args.keep:
                Path(args.keep).write_bytes((Path(tmp) / "daemon.log").read_bytes())
    all_ms = [x * 1000 for r in rounds for x in r]
    print("| pods | rounds | p50 ms | p90 ms | p99 ms | max ms | last pod told, median of rounds ms"
          " | extra calls | CPU per change, daemon / listeners ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    last = statistics.median(max(r) * 1000 for r in rounds)
    print(f"| {args.pods} | {args.rounds} | {percentile(all_ms, 50):.1f} | "
          f"{percentile(all_ms, 90):.1f} | {percentile(all_ms, 99):.1f} | {max(all_ms):.1f} | "
          f"{last:.1f} | {extra_calls} | {cpu['daemon']:.0f} / {cpu['listeners']:.0f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "pods": args.pods, "rounds": args.rounds, "p50_ms": percentile(all_ms, 50),
            "p90_ms": percentile(all_ms, 90), "p99_ms": percentile(all_ms, 99),
            "max_ms": max(all_ms), "last_pod_median_ms": last, "extra_calls": extra_calls,
            "daemon_cpu_ms_per_change": cpu["daemon"],
            "listeners_cpu_ms_per_change": cpu["listeners"],
            "per_round_max_ms": [max(r) * 1000 for r in rounds]}, indent=2))


if __name__ == "__main__":
    main()
