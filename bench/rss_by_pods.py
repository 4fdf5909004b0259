#!/usr/bin/python3
"""The daemon's memory against the number of pods: standalone mode, each pod with 3 volumes
(a configMap of one shared ConfigMap, a secret of one shared Secret, a downwardAPI of its
labels), as in bench_propagation's idle scenario. One daemon; pods are added in steps, and after
each step, once every volume of every pod is mounted and 3 s have passed, RSS, PSS and anonymous
memory come from /proc/<pid>/smaps_rollup.

Usage: bench/rss_by_pods.py [--daemon PATH] [--pods 0 100 250 500 1000] [--quick] [--json FILE]
Prints a markdown table; writes the points to --json (default build/bench-results/rss_by_pods.json).
"""
import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

VOLUMES = (("kubernetes.io~configmap", "cfg"), ("kubernetes.io~secret", "sec"),
           ("kubernetes.io~downward-api", "info"))


def pod_yaml(uid):
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {uid}\n  uid: {uid}\n"
            "  labels: {app: bench}\nspec:\n  containers:\n  - name: app\n    image: x\n"
            "    volumeMounts:\n    - {name: cfg, mountPath: /cfg}\n"
            "    - {name: sec, mountPath: /sec}\n    - {name: info, mountPath: /info}\n"
            "  volumes:\n  - name: cfg\n    configMap: {name: shared-cm}\n"
            "  - name: sec\n    secret: {secretName: shared-secret}\n"
            "  - name: info\n    downwardAPI:\n      items:\n"
            "      - {path: labels, fieldRef: {fieldPath: metadata.labels}}\n")


def write_atomically(path, text):
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text)
    os.rename(tmp, path)


def memory_kib(pid):
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        fields[key.strip()] = int(rest.split()[0])
    return fields["Rss"], fields["Pss"], fields.get("Anonymous", 0)


def unmount_under(root):
    prefix = str(root) + "/"
    targets = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
               if line.split()[1].startswith(prefix)]
    for t in sorted(targets, reverse=True):
        subprocess.run(["umount", "-l", t], check=False)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--daemon", default=str(REPO / "build" / "bin" / "volumemanager"))
    p.add_argument("--pods", type=int, nargs="*", default=[0, 100, 250, 500, 750, 1000])
    p.add_argument("--settle", type=float, default=3.0)
    p.add_argument("--json", default=str(REPO / "build" / "bench-results" / "rss_by_pods.json"))
    p.add_argument("--workdir", default="/tmp")
    p.add_argument("--quick", action="store_true", help="0, 100, 300 pods")
    args = p.parse_args()
    if args.quick:
        args.pods = [0, 100, 300]
    work = Path(tempfile.mkdtemp(prefix="rss-by-pods-", dir=args.workdir))
    for d in ("pods", "objects", "root", "state"):
        (work / d).mkdir()
    (work / "objects" / "objects.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared-cm\ndata:\n  value: v0\n"
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: shared-secret\nstringData:\n"
        "  token: bench-not-a-secret\n")
    started = time.time()
    print(f"# RSS by pod count, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
          f"load {os.getloadavg()[0]:.2f}, daemon {args.daemon}", flush=True)
    log = open(work / "daemon.log", "wb")
    proc = subprocess.Popen([args.daemon, "--root-dir", str(work / "root"), "--state-dir",
                             str(work / "state"), "--node-name", "bench", "--pod-manifest-path",
                             str(work / "pods"), "--object-manifest-path", str(work / "objects")],
                            stdout=log, stderr=subprocess.STDOUT)
    points = []
    try:
        have = 0
        print("| pods | volumes | RSS MiB | PSS MiB | anonymous MiB | load |")
        print("|---:|---:|---:|---:|---:|---|")
        for n in args.pods:
            for i in range(have, n):
                write_atomically(work / "pods" / f"pod-{i:05d}.yaml", pod_yaml(f"pod-{i:05d}"))
            have = max(have, n)
            pending = [work / "root" / "pods" / f"pod-{i:05d}" / "volumes" / plugin / vol
                       / "..data" for i in range(n) for plugin, vol in VOLUMES]
            deadline = time.monotonic() + 300
            while pending:
                if proc.poll() is not None:
                    raise RuntimeError(f"daemon exited; log {work / 'daemon.log'}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(pending)} volumes not mounted after 300 s")
                pending = [v for v in pending if not os.path.lexists(v)]
                if pending:
                    time.sleep(0.2)
            time.sleep(args.settle)
            rss, pss, anon = memory_kib(proc.pid)
            point = {"pods": n, "volumes": 3 * n, "rss_kib": rss, "pss_kib": pss,
                     "anon_kib": anon, "load": os.getloadavg()[0]}
            points.append(point)
            print(f"| {n} | {3 * n} | {rss / 1024:.1f} | {pss / 1024:.1f} | {anon / 1024:.1f} | "
                  f"{point['load']:.1f} |", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        unmount_under(work / "root")
        subprocess.run(["rm", "-rf", str(work)], check=False)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                     time.gmtime(started)),
                               "daemon": args.daemon, "points": points}, indent=1))


if __name__ == "__main__":
    main()
