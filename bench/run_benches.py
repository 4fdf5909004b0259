#!/usr/bin/python3
"""Runs every benchmark (`make bench`): each build/bin/bench_* and each Python bench, in their
quick variants by default, then bench/plots.py (into <results>/plots, so that a quick run never
replaces the committed plots of bench/plots/, which come from full runs; --plots-out bench/plots
to replace them). Every output goes to the results dir with what a
figure needs beside it: date, commit, machine, the load average sampled every 2 s during each
bench, the command and its wall time (run.json, and one summary.md to copy from).

Usage: bench/run_benches.py [--build build] [--results build/bench-results] [--full]
                            [--only NAME,...] [--plots-out DIR]
Exit status 1 when any bench failed (the others still run).
"""
import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = "/usr/bin/python3"

# Quick arguments of the C++ benches (their own --help / header comments say what they mean);
# a bench_* not listed here runs with no arguments.
QUICK_ARGS = {
    "bench_atomicwriter": ["--seconds", "0.25", "--rounds", "3"],
    "bench_local_object_store": ["--changes", "50"],
    "bench_propagation": ["--quick", "--sync-frequency", "1m"],  # one idle run, not two
    "bench_watch": ["--quick"],
    "bench_wakeup": ["--messages", "200", "--rounds", "3"],
}


class LoadSampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.samples = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self.stop.wait(2.0)

    def finish(self):
        self.stop.set()
        self.join()
        self.samples.append(os.getloadavg()[0])
        s = self.samples
        return {"load_min": min(s), "load_max": max(s), "load_mean": sum(s) / len(s)}


def git(*args):
    try:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def machine():
    model = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = Path("/proc/meminfo").read_text().split()[1]
    debian = Path("/etc/debian_version").read_text().strip() \
        if Path("/etc/debian_version").exists() else "?"
    return (f"{os.cpu_count()} x {model}, {int(mem) / 1048576:.0f} GiB, Linux "
            f"{platform.release()}, Debian {debian}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=str(REPO / "build"))
    p.add_argument("--results", default="")
    p.add_argument("--full", action="store_true", help="the full variants (tens of minutes)")
    p.add_argument("--only", default="", help="comma list of bench names to run")
    p.add_argument("--plots-out", default="",
                   help="where the plots go (default: the results dir's plots/)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds one bench may run before it is stopped and counted as failed "
                        "(default 300 for the quick variants, none for --full)")
    args = p.parse_args()
    build = Path(args.build).resolve()
    results = Path(args.results or build / "bench-results").resolve()
    results.mkdir(parents=True, exist_ok=True)
    args.plots_out = args.plots_out or str(results / "plots")
    daemon = str(build / "bin" / "volumemanager")
    quick = [] if args.full else ["--quick"]
    timeout = args.timeout if args.timeout is not None else (None if args.full else 300.0)

    steps = []
    for b in sorted((build / "bin").glob("bench_*")):
        steps.append((b.name, [str(b), *([] if args.full else QUICK_ARGS.get(b.name, []))]))
    steps += [
        ("cluster_bench", [PY, "bench/cluster_bench.py", *quick, "--daemon", daemon,
                           "--only", "latency", "--json", str(results / "cluster_latency.json")]),
        ("cost_model", [PY, "bench/cost_model.py", *quick, "--daemon", daemon,
                        "--json", str(results / "cost_model.json")]),
        ("rss_by_pods", [PY, "bench/rss_by_pods.py", *quick, "--daemon", daemon,
                         "--json", str(results / "rss_by_pods.json")]),
        ("idle_cost", [PY, "bench/idle_cost.py", *quick, "--daemon", daemon,
                       "--json", str(results / "idle_cost.json")]),
        ("reload_bench", [PY, "bench/reload_bench.py", *quick, "--daemon", daemon,
                          "--json", str(results / "reload_bench.json")]),
        ("takeover_bench", [PY, "bench/takeover_bench.py", "--daemon", daemon,
                            *([] if args.full else ["--rounds", "5"])]),
    ]
    if args.only:
        wanted = set(args.only.split(","))
        steps = [s for s in steps if s[0] in wanted]

    commit = git("rev-parse", "--short", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    run = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
           "machine": machine(), "cpus": os.cpu_count(), "variant": "full" if args.full
           else "quick", "benches": []}
    overall = LoadSampler()
    overall.start()
    t_all = time.monotonic()
    failed = []
    for name, cmd in steps:
        print(f"== {name}: {' '.join(cmd)}", flush=True)
        sampler = LoadSampler()
        sampler.start()
        t0 = time.monotonic()
        with open(results / f"{name}.txt", "w") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
            timer = None
            if timeout:
                # The bench and whatever it started (daemons, test servers) go together.
                timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGTERM))
                timer.start()
            for line in proc.stdout:
                sys.stdout.write(line)
                out.write(line)
            rc = proc.wait()
            if timer is not None:
                timer.cancel()
            if rc == -signal.SIGTERM and timeout and time.monotonic() - t0 >= timeout:
                out.write(f"stopped after {timeout:.0f} s (--timeout)\n")
                print(f"== {name}: stopped after {timeout:.0f} s", flush=True)
        entry = {"name": name, "command": " ".join(cmd), "seconds": round(time.monotonic() - t0, 1),
                 "exit": rc, **sampler.finish()}
        run["benches"].append(entry)
        print(f"== {name}: exit {rc}, {entry['seconds']} s, load {entry['load_min']:.1f}-"
              f"{entry['load_max']:.1f}", flush=True)
        if rc != 0:
            failed.append(name)
    run.update(overall.finish())
    run["seconds"] = round(time.monotonic() - t_all, 1)
    (results / "run.json").write_text(json.dumps(run, indent=1))
    subprocess.run([PY, "bench/plots.py", "--results", str(results), "--out", args.plots_out],
                   cwd=REPO, check=False)

    with open(results / "summary.md", "w") as md:
        md.write(f"Run of {run['date']}, commit {run['commit']}, {run['machine']}; load average "
                 f"{run['load_min']:.1f}-{run['load_max']:.1f} (mean {run['load_mean']:.1f}); "
                 f"{run['variant']} variants; {run['seconds']:.0f} s in all.\n\n")
        md.write("| bench | command | wall s | load min-max | exit |\n|---|---|---:|---|---:|\n")
        for e in run["benches"]:
            md.write(f"| {e['name']} | `{e['command']}` | {e['seconds']} | "
                     f"{e['load_min']:.1f}-{e['load_max']:.1f} | {e['exit']} |\n")
        for e in run["benches"]:
            md.write(f"\n## {e['name']}\n\n```\n{(results / (e['name'] + '.txt')).read_text()}"
                     f"```\n")
    print(f"== all benches: {run['seconds']:.0f} s (results {results}, plots {args.plots_out})"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
