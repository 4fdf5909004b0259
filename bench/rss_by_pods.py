#!/usr/bin/python3
"""The daemon's memory against the number of pods, standalone mode. Two shapes of pod:
- `--shape mixed` (the default): each pod with 3 volumes (a configMap of one shared ConfigMap, a
  secret of one shared Secret, a downwardAPI of its labels), as in bench_propagation's idle
  scenario;
- `--shape configmaps`: 1,000 ConfigMaps of two keys in one multi-document object manifest, one
  pod per manifest file, each pod with 3 configMap volumes of three different ConfigMaps.
One daemon; pods are added in steps, and after each step, once every volume of every pod is
mounted and --settle seconds have passed, RSS, PSS and anonymous memory come from
/proc/<pid>/smaps_rollup and VmRSS, RssAnon, RssFile and RssShmem from /proc/<pid>/status.
`--idle S` takes them again S seconds after the last step; `--changes N` then edits one
ConfigMap N times (a different one each time), waits for each edit to reach its volumes, and
takes them once more. `--uuid-uids` gives the pods UIDs of 36 characters, as the API server
does (by default a pod's UID is its name, pod-00000, short enough to be held inline in a
std::string: the daemon keeps a pod's UID in several per-volume keys). `--mappings` also sums
Rss from /proc/<pid>/smaps by what is mapped (each
file: the binary, each shared library; [heap]; [anon] for the other anonymous mappings) at each
point, into the JSON, and prints that table for the last point.

Usage: bench/rss_by_pods.py [--daemon PATH] [--pods 0 100 250 500 1000] [--shape mixed|configmaps]
                            [--idle S] [--changes N] [--mappings] [--uuid-uids] [--quick]
                            [--json FILE]
                            [-- daemon flags]
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


def pod_yaml(uid, name):
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  uid: {uid}\n"
            "  labels: {app: bench}\nspec:\n  containers:\n  - name: app\n    image: x\n"
            "    volumeMounts:\n    - {name: cfg, mountPath: /cfg}\n"
            "    - {name: sec, mountPath: /sec}\n    - {name: info, mountPath: /info}\n"
            "  volumes:\n  - name: cfg\n    configMap: {name: shared-cm}\n"
            "  - name: sec\n    secret: {secretName: shared-secret}\n"
            "  - name: info\n    downwardAPI:\n      items:\n"
            "      - {path: labels, fieldRef: {fieldPath: metadata.labels}}\n")


def configmaps_yaml(n, generation=None):
    """`n` ConfigMaps cm-00000.. of two keys each, one multi-document manifest; ConfigMap
    `generation[0]` carries `generation[1]` in its first key."""
    docs = []
    for i in range(n):
        a = f"value-a-{i}"
        if generation is not None and generation[0] == i:
            a = f"changed-{generation[1]}"
        docs.append(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:05d}\n"
                    f"data:\n  a: {a}\n  b: value-b-{i}\n")
    return "---\n".join(docs)


def configmap_pod_yaml(uid, name, index, configmaps):
    vols = "".join(f"  - name: v{j}\n    configMap: {{name: cm-{(index * 3 + j) % configmaps:05d}}}\n"
                   for j in range(3))
    mounts = "".join(f"    - {{name: v{j}, mountPath: /v{j}}}\n" for j in range(3))
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  uid: {uid}\nspec:\n"
            f"  containers:\n  - name: app\n    image: x\n    volumeMounts:\n{mounts}"
            f"  volumes:\n{vols}")


def status_kib(pid):
    """VmRSS, RssAnon, RssFile and RssShmem from /proc/<pid>/status."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(rest.split()[0])
    return out


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


def rss_by_mapping(pid):
    """Rss (KiB) of /proc/<pid>/smaps summed by mapped file, or [heap], [stack], [anon]..."""
    out = {}
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if not fields[0].endswith(":"):  # a mapping's header: range perms offset dev inode [path]
            name = fields[5] if len(fields) > 5 else "[anon]"
        elif fields[0] == "Rss:":
            out[name] = out.get(name, 0) + int(fields[1])
    return out


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
    p.add_argument("--shape", choices=("mixed", "configmaps"), default="mixed")
    p.add_argument("--configmaps", type=int, default=1000, help="--shape configmaps: how many")
    p.add_argument("--idle", type=float, default=0.0,
                   help="take the figures again this many seconds after the last step")
    p.add_argument("--changes", type=int, default=0,
                   help="then edit a ConfigMap this many times and take them once more")
    p.add_argument("--mappings", action="store_true",
                   help="also Rss by mapped file at each point (JSON; table for the last point)")
    p.add_argument("--uuid-uids", action="store_true",
                   help="pod UIDs of 36 characters, as the API server gives them (default: "
                        "the pod's name, pod-00000)")
    p.add_argument("extra", nargs="*", help="extra daemon flags (after --)")
    args = p.parse_args()
    if args.quick:
        args.pods = [0, 100, 300]

    def uid_of(i):
        return f"{i:08x}-5eed-4b1d-9a5e-{i:012x}" if args.uuid_uids else f"pod-{i:05d}"

    work = Path(tempfile.mkdtemp(prefix="rss-by-pods-", dir=args.workdir))
    for d in ("pods", "objects", "root", "state"):
        (work / d).mkdir()
    configmaps = args.shape == "configmaps"
    if configmaps:
        (work / "objects" / "objects.yaml").write_text(configmaps_yaml(args.configmaps))
        volumes = [("kubernetes.io~configmap", f"v{j}") for j in range(3)]
    else:
        (work / "objects" / "objects.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared-cm\ndata:\n  value: v0\n"
            "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: shared-secret\nstringData:\n"
            "  token: bench-not-a-secret\n")
        volumes = VOLUMES
    started = time.time()
    print(f"# RSS by pod count, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
          f"load {os.getloadavg()[0]:.2f}, shape {args.shape}, daemon {args.daemon} "
          f"{' '.join(args.extra)}{' (36-character pod UIDs)' if args.uuid_uids else ''}",
          flush=True)
    log = open(work / "daemon.log", "wb")
    proc = subprocess.Popen([args.daemon, "--root-dir", str(work / "root"), "--state-dir",
                             str(work / "state"), "--node-name", "bench", "--pod-manifest-path",
                             str(work / "pods"), "--object-manifest-path", str(work / "objects"),
                             *args.extra],
                            stdout=log, stderr=subprocess.STDOUT)
    points = []

    def take(n, when):
        rss, pss, anon = memory_kib(proc.pid)
        st = status_kib(proc.pid)
        point = {"pods": n, "volumes": 3 * n, "when": when, "rss_kib": rss, "pss_kib": pss,
                 "anon_kib": anon, "vmrss_kib": st.get("VmRSS", 0),
                 "rss_anon_kib": st.get("RssAnon", 0), "rss_file_kib": st.get("RssFile", 0),
                 "rss_shmem_kib": st.get("RssShmem", 0), "load": os.getloadavg()[0]}
        if args.mappings:
            point["mappings_kib"] = rss_by_mapping(proc.pid)
        points.append(point)
        print(f"| {n} | {3 * n} | {when} | {rss / 1024:.1f} | {pss / 1024:.1f} | "
              f"{anon / 1024:.1f} | {point['rss_anon_kib'] / 1024:.1f} | "
              f"{point['rss_file_kib'] / 1024:.1f} | {point['rss_shmem_kib'] / 1024:.1f} | "
              f"{point['load']:.1f} |", flush=True)

    try:
        have = 0
        print("| pods | volumes | when | RSS MiB | PSS MiB | anonymous MiB | RssAnon | RssFile | "
              "RssShmem | load |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
        n = 0
        for n in args.pods:
            for i in range(have, n):
                name = f"pod-{i:05d}"
                text = (configmap_pod_yaml(uid_of(i), name, i, args.configmaps) if configmaps
                        else pod_yaml(uid_of(i), name))
                write_atomically(work / "pods" / f"pod-{i:05d}.yaml", text)
            have = max(have, n)
            pending = [work / "root" / "pods" / uid_of(i) / "volumes" / plugin / vol
                       / "..data" for i in range(n) for plugin, vol in volumes]
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
            take(n, f"{args.settle:g} s after the last volume")
        if args.idle > 0:
            time.sleep(args.idle)
            take(n, f"after {args.idle:g} s idle")
        if args.changes > 0 and configmaps and n > 0:
            for c in range(args.changes):
                target = (c * 3) % min(args.configmaps, 3 * n)
                write_atomically(work / "objects" / "objects.yaml",
                                 configmaps_yaml(args.configmaps, (target, c)))
                pod, vol = divmod(target, 3)
                first = (work / "root" / "pods" / uid_of(pod) / "volumes" /
                         "kubernetes.io~configmap" / f"v{vol}" / "a")
                deadline = time.monotonic() + 60
                while True:
                    try:
                        if first.read_text() == f"changed-{c}":
                            break
                    except OSError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"change {c} did not reach {first} in 60 s")
                    time.sleep(0.005)
            time.sleep(args.settle)
            take(n, f"after {args.changes} changes")
        if args.mappings and points:
            last = points[-1]
            print(f"\nRss by mapping, {last['pods']} pods, {last['when']}:\n")
            print("| mapping | Rss KiB |\n|---|---:|")
            for name, kib in sorted(last["mappings_kib"].items(), key=lambda kv: -kv[1]):
                print(f"| {name} | {kib} |")
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
                               "daemon": args.daemon, "shape": args.shape,
                               "extra_flags": args.extra, "uuid_uids": args.uuid_uids,
                               "points": points}, indent=1))


if __name__ == "__main__":
    main()
