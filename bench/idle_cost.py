#!/usr/bin/python3
"""What the daemon costs while nothing changes: standalone mode, 1,000 pods with 3 configMap
volumes each (3,000 volumes) from one `List` manifest of 1,000 ConfigMaps, on ext4. Once every
volume is written (its `..data` exists), the daemon is left alone for --idle-seconds (120) and
measured over that window:

- CPU: the time on CPU of every thread, from /proc/PID/task/*/schedstat (first field, ns),
  summed, as % of one core over the window; /proc/PID/stat's utime+stime (every thread, those
  that ended too, in clock ticks) as a cross-check.
- Wake-ups per second: the context switches of every thread (voluntary + involuntary, from
  /proc/PID/task/*/status), and schedstat's third field (timeslices run) for comparison.

The goal (issue 29, item 7): at most 0.05 % of a core. The work dir must be on ext4: a dir
under --workdir when that is ext4, else (as root) a loop-mounted ext4 image made there with
mkfs.ext4.

Usage: bench/idle_cost.py [--daemon PATH] [--pods 1000] [--volumes-per-pod 3]
                          [--idle-seconds 120] [--settle 0] [--workdir /tmp] [--quick]
                          [--json FILE] [-- extra daemon flags]
Prints a markdown table; writes the figures to --json when given.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from rss_by_pods import unmount_under  # the same clean-up of the tmpfs mounts under a root

REPO = Path(__file__).resolve().parents[1]
CM = "kubernetes.io~configmap"


def fs_type(path):
    """The type of the filesystem holding `path`, from /proc/self/mountinfo (longest mount point
    that contains it)."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        mount_point = fields[4].replace("\\040", " ")
        fstype = fields[fields.index("-") + 1]
        inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, kind = mount_point, fstype
    return kind


def objects_list(n):
    """One `List` manifest of `n` ConfigMaps, cm-00000 .. (three keys each)."""
    items = []
    for i in range(n):
        items.append(f"- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-{i:05d}\n"
                     f"  data:\n    a: value-a-{i}\n    b: value-b-{i}\n    c: value-c-{i}\n")
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)


def pod_yaml(i, volumes, configmaps):
    """Pod pod-<i> with `volumes` configMap volumes, each of a different ConfigMap."""
    name = f"pod-{i:05d}"
    mounts = "".join(f"    - {{name: v{j}, mountPath: /v{j}}}\n" for j in range(volumes))
    vols = "".join(f"  - name: v{j}\n    configMap: {{name: cm-{(i * volumes + j) % n:05d}}}\n"
                   for j in range(volumes) for n in [configmaps])
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  uid: {name}\nspec:\n"
            f"  containers:\n  - name: app\n    image: x\n    volumeMounts:\n{mounts}"
            f"  volumes:\n{vols}")


def task_counters(pid):
    """(ns on CPU, timeslices, context switches) summed over the threads alive now."""
    cpu_ns = slices = switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run_ns, _, timeslices = (int(x) for x in (task / "schedstat").read_text().split())
            status = (task / "status").read_text()
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        cpu_ns += run_ns
        slices += timeslices
        for line in status.splitlines():
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                switches += int(line.split()[1])
    return cpu_ns, slices, switches


def process_ticks(pid):
    """utime + stime of the whole process (ended threads included), in clock ticks."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def threads(pid):
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def make_ext4_dir(workdir):
    """A dir on ext4 below `workdir`, and a cleanup function."""
    base = Path(tempfile.mkdtemp(prefix="idle-cost-", dir=workdir))
    if fs_type(base) == "ext4":
        return base, lambda: subprocess.run(["rm", "-rf", str(base)], check=False)
    if os.geteuid() != 0:
        raise SystemExit(f"{workdir} is {fs_type(base)}, not ext4, and a loop mount needs root")
    image, mnt = base / "image.ext4", base / "mnt"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(1 << 30)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-N", "200000", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)

    def cleanup():
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        subprocess.run(["rm", "-rf", str(base)], check=False)
    return mnt, cleanup


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--daemon", default=str(REPO / "build" / "bin" / "volumemanager"))
    p.add_argument("--pods", type=int, default=1000)
    p.add_argument("--volumes-per-pod", type=int, default=3)
    p.add_argument("--configmaps", type=int, default=1000)
    p.add_argument("--idle-seconds", type=float, default=120.0)
    p.add_argument("--settle", type=float, default=0.0,
                   help="seconds between the last volume written and the window's start")
    p.add_argument("--workdir", default="/tmp")
    p.add_argument("--quick", action="store_true", help="a 30 s window")
    p.add_argument("--json")
    p.add_argument("extra", nargs="*", help="extra daemon flags (after --)")
    args = p.parse_args()
    if args.quick:
        args.idle_seconds = 30.0

    work, cleanup = make_ext4_dir(args.workdir)
    for d in ("pods", "objects", "root", "state"):
        (work / d).mkdir()
    (work / "objects" / "configmaps.yaml").write_text(objects_list(args.configmaps))
    for i in range(args.pods):
        (work / "pods" / f"pod-{i:05d}.yaml").write_text(
            pod_yaml(i, args.volumes_per_pod, args.configmaps))
    started = time.time()
    volumes = args.pods * args.volumes_per_pod
    print(f"# Idle cost, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
          f"{args.pods} pods x {args.volumes_per_pod} configMap volumes on {fs_type(work)}, "
          f"load {os.getloadavg()[0]:.2f}, daemon {args.daemon} {' '.join(args.extra)}",
          flush=True)
    log = open(work / "daemon.log", "wb")
    proc = subprocess.Popen(
        [args.daemon, "--root-dir", str(work / "root"), "--state-dir", str(work / "state"),
         "--node-name", "bench", "--pod-manifest-path", str(work / "pods"),
         "--object-manifest-path", str(work / "objects"),
         "--healthz-bind-address", "127.0.0.1:0", "--debug-bind-address", "127.0.0.1:0",
         *args.extra],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        pending = [work / "root" / "pods" / f"pod-{i:05d}" / "volumes" / CM / f"v{j}" / "..data"
                   for i in range(args.pods) for j in range(args.volumes_per_pod)]
        deadline = time.monotonic() + 600
        while pending:
            if proc.poll() is not None:
                raise SystemExit(f"daemon exited ({proc.returncode}); log {work / 'daemon.log'}")
            if time.monotonic() > deadline:
                raise SystemExit(f"{len(pending)} of {volumes} volumes not written after 600 s")
            pending = [v for v in pending if not os.path.lexists(v)]
            if pending:
                time.sleep(0.2)
        mounted_after = time.time() - started
        time.sleep(args.settle)

        ticks_per_s = os.sysconf("SC_CLK_TCK")
        t0 = time.monotonic()
        cpu0, slices0, switches0 = task_counters(proc.pid)
        ticks0 = process_ticks(proc.pid)
        time.sleep(args.idle_seconds)
        cpu1, slices1, switches1 = task_counters(proc.pid)
        ticks1 = process_ticks(proc.pid)
        window = time.monotonic() - t0
        if proc.poll() is not None:
            raise SystemExit(f"daemon exited during the window; log {work / 'daemon.log'}")

        result = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "daemon": args.daemon, "extra_flags": args.extra, "filesystem": fs_type(work),
            "pods": args.pods, "volumes": volumes, "configmaps": args.configmaps,
            "mounted_after_s": round(mounted_after, 1), "settle_s": args.settle,
            "window_s": round(window, 1), "threads": threads(proc.pid),
            "cpu_percent_of_core": 100.0 * (cpu1 - cpu0) / (window * 1e9),
            "cpu_percent_of_core_stat": 100.0 * (ticks1 - ticks0) / ticks_per_s / window,
            "wakeups_per_s": (switches1 - switches0) / window,
            "timeslices_per_s": (slices1 - slices0) / window,
            "load": os.getloadavg()[0],
        }
        print("| volumes | all written after | window | CPU % of a core (schedstat) | "
              "(utime+stime) | wake-ups/s (context switches) | timeslices/s | threads | load |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        print(f"| {volumes} | {mounted_after:.1f} s | {window:.0f} s | "
              f"{result['cpu_percent_of_core']:.4f} | {result['cpu_percent_of_core_stat']:.3f} | "
              f"{result['wakeups_per_s']:.2f} | {result['timeslices_per_s']:.2f} | "
              f"{result['threads']} | {result['load']:.2f} |", flush=True)
        goal = 0.05
        print(f"goal <= {goal} % of a core: "
              f"{'met' if result['cpu_percent_of_core'] <= goal else 'not met'}")
        if args.json:
            out = Path(args.json)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        unmount_under(work / "root")
        cleanup()


if __name__ == "__main__":
    main()
