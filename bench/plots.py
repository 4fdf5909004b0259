#!/usr/bin/python3
"""Draws the benchmark plots (PNG, matplotlib: Debian python3-matplotlib) from the results that
bench/run_benches.py leaves in a results dir:

  propagation_latency.png  cluster_latency.json (bench/cluster_bench.py --json): the distribution
                           (CDF) of PUT -> new bytes in the first and the last volume, per
                           scenario, with the test server's own watch delivery for comparison
  rss_by_pods.png          rss_by_pods.json (bench/rss_by_pods.py): RSS, PSS and anonymous
                           memory against the number of pods (3 volumes each); beside it, faint,
                           rss_by_pods_before.json when present (an earlier commit's run, with
                           a "label" naming it)
  writer_vs_floor.png      bench_atomicwriter.txt (build/bin/bench_atomicwriter's table): time in
                           one changed write of the project's writer, of the kubelet's own writer
                           (v1.20.2, through its Go harness) and of issue 48's syscall floor, per
                           payload and medium
  api_cost.png             cost_model.json (bench/cost_model.py): per strategy, what one node
                           costs the API server per minute (requests, bytes) and what the fleet
                           extrapolation gives

Each plot's title carries the date, commit and load average of the run (from run.json when
present). A missing input skips its plot.

Usage: bench/plots.py [--results build/bench-results] [--out bench/plots]
"""
import argparse
import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def stamp(run):
    if not run:
        return ""
    return (f"\n{run.get('date', '?')}, commit {run.get('commit', '?')}, load "
            f"{run.get('load_min', 0):.1f}-{run.get('load_max', 0):.1f}, {run.get('cpus', '?')} "
            f"CPUs")


def cdf(ax, values, label, style="-"):
    v = sorted(x for x in values if not math.isnan(x))
    if not v:
        return
    ys = [(i + 1) / len(v) for i in range(len(v))]
    ax.step(v, ys, style, where="post", label=label)


def propagation(results, out, run):
    data = json.loads((results / "cluster_latency.json").read_text())
    scenarios = data.get("latency", [])
    if not scenarios:
        return False
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 4), squeeze=False)
    for ax, sc in zip(axes[0], scenarios):
        cdf(ax, sc["first"], "to first volume")
        cdf(ax, sc["last"], "to last volume")
        cdf(ax, sc["server"], "test server's watch delivery", ":")
        ax.set_xscale("log")
        ax.set_xlabel("ms after the PUT was sent")
        ax.set_ylabel("fraction of changes")
        ax.set_title(sc["scenario"], fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Cluster mode: object change -> new bytes in the volume (CDF)" + stamp(run),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "propagation_latency.png", dpi=90)
    plt.close(fig)
    return True


def rss(results, out, run):
    points = json.loads((results / "rss_by_pods.json").read_text())["points"]
    pods = [p["pods"] for p in points]
    fig, ax = plt.subplots(figsize=(6, 4))
    before_file = results / "rss_by_pods_before.json"
    before = json.loads(before_file.read_text()) if before_file.exists() else None
    for color, (key, label) in enumerate(
            (("rss_kib", "RSS"), ("pss_kib", "PSS"), ("anon_kib", "anonymous"))):
        ax.plot(pods, [p[key] / 1024 for p in points], "o-", color=f"C{color}", label=label)
        if before:
            ax.plot([p["pods"] for p in before["points"]],
                    [p[key] / 1024 for p in before["points"]], "o--", color=f"C{color}",
                    alpha=0.35, label=f"{label}, {before.get('label', 'before')}")
    ax.axhline(12, color="grey", ls="--", lw=1, label="goal at 1,000 pods (12 MiB)")
    ax.axhline(20, color="grey", ls=":", lw=1, label="issue 15's bar (20 MiB)")
    ax.set_xlabel("pods (3 volumes each: configMap, secret, downwardAPI)")
    ax.set_ylabel("MiB")
    ax.set_ylim(0, max(22, ax.get_ylim()[1]))  # the bar's line inside the frame
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Standalone daemon memory against pod count" + stamp(run), fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "rss_by_pods.png", dpi=90)
    plt.close(fig)
    return True


# | payload | medium | kubelet us/write | writer us/write | floor us/write | ...: each time cell
# "median (min-max)"; the no-change rows have "-" for the floor, and the kubelet's cells say "not
# built" when its harness was not (then only the writer and the floor are drawn).
ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*([^|]*?)\s*\|\s*([\d.]+)[^|]*\|"
                 r"\s*([\d.]+)[^|]*\|")


def first_number(cell):
    m = re.match(r"[\d.]+", cell)
    return float(m.group(0)) if m else float("nan")


def writer(results, out, run):
    rows = []
    for line in (results / "bench_atomicwriter.txt").read_text().splitlines():
        m = ROW.match(line)
        if m:
            name, medium, kubelet_us, writer_us, floor_us = m.groups()
            rows.append((name, medium, float(writer_us), first_number(kubelet_us),
                         float(floor_us)))
    if not rows:
        return False
    media = sorted({r[1] for r in rows}, key=lambda m: m != "tmpfs")
    fig, axes = plt.subplots(1, len(media), figsize=(4.5 * len(media), 4), squeeze=False)
    for ax, medium in zip(axes[0], media):
        sel = [r for r in rows if r[1] == medium]
        xs = range(len(sel))
        ax.bar([x - 0.27 for x in xs], [r[2] for r in sel], 0.27, label="writer")
        ax.bar(list(xs), [r[3] for r in sel], 0.27, label="kubelet's writer (v1.20.2)")
        ax.bar([x + 0.27 for x in xs], [r[4] for r in sel], 0.27, label="floor (issue 48)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r[0].split(")")[0] + ")" for r in sel])
        ax.set_yscale("log")
        ax.set_ylabel("µs in one changed write")
        ax.set_title(medium, fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("AtomicWriter against the kubelet's writer and the floor of its syscalls "
                 "(a: 1 file, b: 10 files, c: 100 files nested)" + stamp(run), fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "writer_vs_floor.png", dpi=90)
    plt.close(fig)
    return True


def api_cost(results, out, run):
    data = json.loads((results / "cost_model.json").read_text())
    fleet = data.get("fleet", [])
    if not fleet:
        return False
    names = [r["strategy"] for r in fleet]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    series = (("requests_s", "requests/s", 1), ("watches", "watches open", 1),
              ("bytes_out_s", "MB/s to the nodes", 1e6))
    for ax, (key, label, scale) in zip(axes, series):
        raw = [r[key] / scale for r in fleet]
        vals = [max(v, 1e-3) for v in raw]  # a log axis: a zero is drawn at its floor
        ax.bar(names, vals, color=["C0", "C1", "C2", "C3"][:len(names)])
        ax.set_yscale("log")
        ax.set_title(label, fontsize=9)
        ax.tick_params(axis="x", labelsize=7, rotation=15)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        for i, (v, shown) in enumerate(zip(raw, vals)):
            ax.text(i, shown, f"{v:,.0f}" if v >= 10 or v == 0 else f"{v:.2g}", ha="center",
                    va="bottom", fontsize=7)
    a = data.get("fleet_assumptions", {})
    fig.suptitle(f"API server cost of {a.get('nodes', 0):,} nodes x {a.get('objects_per_node', 0)}"
                 f" objects (sync {a.get('sync_s', 0):.0f} s, Cache TTL "
                 f"{a.get('cache_ttl_s', 0):.0f} s), from one node measured" + stamp(run),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "api_cost.png", dpi=90)
    plt.close(fig)
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", default=str(REPO / "build" / "bench-results"))
    p.add_argument("--out", default=str(REPO / "bench" / "plots"))
    args = p.parse_args()
    results, out = Path(args.results), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_file = results / "run.json"
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    for name, draw in (("propagation_latency", propagation), ("rss_by_pods", rss),
                       ("writer_vs_floor", writer), ("api_cost", api_cost)):
        try:
            drawn = draw(results, out, run)
        except FileNotFoundError as err:
            print(f"plots: {name}: skipped ({err.filename} missing)")
            continue
        print(f"plots: {out / (name + '.png')}" if drawn else f"plots: {name}: no data")


if __name__ == "__main__":
    main()
