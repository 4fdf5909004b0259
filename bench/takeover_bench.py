#!/usr/bin/python3
"""Takeover time of the node's lock (--leader-elect) between two daemons on one node.

Two standalone daemons share a root dir and a state dir, as during a DaemonSet rolling update with
surge. Per round: A holds the lock, B waits; A is stopped (SIGTERM, a graceful stop, or SIGKILL);
the time runs from the signal until B's log says it holds the lock (B's log is polled every
millisecond). Then the roles swap and a new waiter is started. Only the file lock (the default) is
measured here: the Lease lock's takeover is bounded by its retry period and lease duration, which
tests/leaderelection checks with a fake clock.

Usage: bench/takeover_bench.py [--daemon build/bin/volumemanager] [--rounds 20]
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

HOLDING = re.compile(r"holding the node's lock \(.*\) as (\S+): writing")


class Daemon:
    def __init__(self, binary, work, name):
        self.log_path = work / f"{name}.log"
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [binary, "--root-dir", str(work / "root"), "--state-dir", str(work / "state"),
             "--node-name", "bench-node", "--pod-manifest-path", str(work / "pods"),
             "--object-manifest-path", str(work / "objects"), "--healthz-bind-address", "",
             "--debug-bind-address", ""],
            stdout=self.log, stderr=subprocess.STDOUT)

    def holding(self):
        return HOLDING.search(self.log_path.read_text(errors="replace")) is not None

    def waiting(self):
        return ": waiting" in self.log_path.read_text(errors="replace")

    def stop(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        self.log.close()


def wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.001)
    raise SystemExit(f"timed out after {timeout} s waiting for {what}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", default="build/bin/volumemanager")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    binary = os.path.abspath(args.daemon)
    results = {}
    with tempfile.TemporaryDirectory(prefix="takeover-bench-") as tmp:
        work = Path(tmp)
        for d in ("root", "state", "pods", "objects"):
            (work / d).mkdir()
        n = 0
        holder = Daemon(binary, work, f"d{n}")
        wait(holder.holding, 30, "the first daemon holding the lock")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            times = []
            for _ in range(args.rounds):
                n += 1
                waiter = Daemon(binary, work, f"d{n}")
                wait(waiter.waiting, 30, "the second daemon waiting")
                t0 = time.monotonic()
                holder.proc.send_signal(sig)
                t1 = wait(waiter.holding, 30, "the waiting daemon holding the lock")
                times.append((t1 - t0) * 1000)
                holder.stop(sig)
                holder = waiter
            results[sig] = times
        holder.stop(signal.SIGTERM)
    load = os.getloadavg()[0]
    print(f"file lock takeover, {args.rounds} rounds each, load average {load:.1f}")
    print("| stop | p50 (ms) | p90 (ms) | max (ms) |")
    print("|---|---:|---:|---:|")
    for sig, name in ((signal.SIGTERM, "graceful (SIGTERM)"), (signal.SIGKILL, "kill -9")):
        t = sorted(results[sig])
        p90 = t[min(len(t) - 1, int(0.9 * len(t)))]
        print(f"| {name} | {statistics.median(t):.1f} | {p90:.1f} | {t[-1]:.1f} |")


if __name__ == "__main__":
    main()
