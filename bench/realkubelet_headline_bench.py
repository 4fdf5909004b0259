#!/usr/bin/env python3
"""The headline, measured beside the real kubelet: how long one ConfigMap change takes to reach a
pod's files with the real kubelet alone, and with the daemon beside it.

One run, one node (tests/realkube: the real kube-apiserver and kubelet v1.20.2, Watch strategy,
`--sync-frequency` as given, the fake container runtime, all in a node namespace of its own), one
pod with a configMap volume the kubelet set up:
1. **the kubelet alone**: `--alone` changes, each 1-5 s after the previous one reached the disk;
2. **the daemon beside it** (kubelet ownership, the kubelet's own credentials): `--beside`
   changes the same way;
3. **both writing** (`--storm` seconds, 0 to leave out): a second pod whose volume holds three
   keys of 4 KiB, changed every 200 ms while the pod is updated every second (each update is a
   pod sync in which the kubelet rewrites the volume from its cache), read as an application
   reads through `..data` every ms: torn files, versions mixed within one read, and each time
   the volume went back to an older version and for how long.
A change's latency runs from just before the API request to the first read of the new bytes (the
file polled every ms).

    bench/realkubelet_headline_bench.py --daemon build/bin/volumemanager [--alone 3] [--beside 20]
        [--storm 300] [--sync-frequency 1m] [--json out.json] [--workdir DIR]

Needs `make real-kube` (build/realkube: kube-apiserver, kubelet, etcd, the runtime's stubs) and
root. The machine's state is compared before and after (tests/realkube/machine.py).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "tests" / "apiserver"))
sys.path.insert(0, str(REPO / "tests" / "realkube"))

NODE = "bench-node"
CM_PLUGIN = "kubernetes.io~configmap"


class FileWatch:
    """Polls one file every ms; records when each content was first read."""

    def __init__(self, path):
        self.path = Path(path)
        self.first = {}
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            try:
                text = self.path.read_text()
            except OSError:
                text = None
            if text is not None and text not in self.first:
                self.first[text] = time.monotonic()
            time.sleep(0.001)

    def wait(self, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.first:
                return self.first[text]
            time.sleep(0.005)
        raise RuntimeError(f"{text!r} not in {self.path} within {timeout} s")

    def stop(self):
        self.stopping = True
        self.thread.join()


def changes(node, watch, name, count, start, pause, timeout):
    """`count` changes of ConfigMap `name` (key "value": start, start+1, ...); each latency."""
    out = []
    for i in range(count):
        time.sleep(random.uniform(*pause))
        value = str(start + i)
        sent = time.monotonic()
        node.put_configmap(name, {"value": value})
        answered = time.monotonic()
        seen = watch.wait(value, timeout)
        out.append({"latency_s": seen - sent, "request_s": answered - sent})
        print(f"  change {value}: on disk after {1000 * (seen - sent):.1f} ms", flush=True)
    return out


def summary(latencies):
    xs = sorted(latencies)
    return {"n": len(xs), "min": xs[0], "median": statistics.median(xs), "max": xs[-1]}


def inside(args):
    import realkubelet
    from api_servers import REAL_TOKENS
    from test_real_kubelet import Beside

    work = Path(args.workdir)
    result = {"kubelet_version": "v1.20.2", "strategy": "Watch",
              "sync_frequency": args.sync_frequency}
    with realkubelet.KubeletNode(work / "node", NODE, REAL_TOKENS,
                                 sync_frequency=args.sync_frequency) as node:
        node.put_configmap("headline", {"value": "0"})
        pod = node.run_pod("headline", [{"name": "cfg", "configMap": {"name": "headline"}}],
                           [{"name": "cfg", "mountPath": "/etc/app"}])
        uid = pod["metadata"]["uid"]
        node.mounted(uid, "cfg")
        volume = node.kubelet.volume_dir(uid, CM_PLUGIN, "cfg")
        watch = FileWatch(volume / "value")
        watch.wait("0", 10)
        print(f"the kubelet alone ({args.alone} changes, --sync-frequency "
              f"{args.sync_frequency}):", flush=True)
        alone = changes(node, watch, "headline", args.alone, 1, (1, 5), 300)
        daemon = Beside(work, node)
        daemon.start_and_sync()
        try:
            time.sleep(1)
            print(f"the daemon beside it ({args.beside} changes):", flush=True)
            beside = changes(node, watch, "headline", args.beside, 1000, (0.5, 1.5), 60)
            watch.stop()
            result["alone"] = {"changes": alone,
                               **summary([c["latency_s"] for c in alone])}
            result["beside"] = {"changes": beside,
                                **summary([c["latency_s"] for c in beside])}
            if args.storm > 0:
                result["storm"] = storm(node, args.storm)
            result["daemon_errors"] = len(daemon.records(level="error"))
        finally:
            daemon.stop()
        result["kubelet_errors_about_the_volumes"] = len(
            node.kubelet.errors(0, 'volume "cfg"', 'volume "storm"'))
    return result


def storm(node, seconds):
    import realkubelet
    keys = ("a.conf", "b.conf", "c.conf")
    node.put_configmap("storm", realkubelet.payload(0, keys))
    pod = node.run_pod("storm", [{"name": "storm", "configMap": {"name": "storm"}}],
                       [{"name": "storm", "mountPath": "/etc/storm"}])
    uid = pod["metadata"]["uid"]
    node.mounted(uid, "storm")
    volume = node.kubelet.volume_dir(uid, CM_PLUGIN, "storm")
    began = node.kubelet.offset()
    print(f"both writing for {seconds} s (a change every 200 ms, a pod update every s):",
          flush=True)
    n = 0
    with realkubelet.VolumeReader(volume, keys) as reader:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            n += 1
            node.put_configmap("storm", realkubelet.payload(n, keys))
            if n % 5 == 0:
                node.touch_pod("storm", n)
            time.sleep(0.2)
        realkubelet.wait(lambda: reader.seen and reader.seen[-1] == n, 30, "the last version")
    kubelet_lines = [line for line in node.kubelet.lines(began)
                     if str(volume) in line and "required for target directory" in line]
    back = reader.went_back()
    out = {"seconds": seconds, "versions": n + 1, "versions_read": len(set(reader.seen)),
           "reads": reader.reads, "torn": len(reader.torn), "mixed": len(reader.mixed),
           "kubelet_writer_runs": len(kubelet_lines),
           "kubelet_writes": sum("write required" in line for line in kubelet_lines),
           "went_back": [{"from": f, "to": t, "for_s": d} for _, f, t, d in back]}
    print(f"  {out['versions_read']} of {n + 1} versions read in {reader.reads} reads, "
          f"{out['torn']} torn, {out['mixed']} mixed; the kubelet's writer ran "
          f"{out['kubelet_writer_runs']} times and wrote {out['kubelet_writes']}; back to an "
          f"older version {len(back)} times "
          + ", ".join(f"({f} -> {t} for {1000 * d:.0f} ms)" if d is not None
                      else f"({f} -> {t}, never restored)" for _, f, t, d in back), flush=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--alone", type=int, default=3)
    parser.add_argument("--beside", type=int, default=20)
    parser.add_argument("--storm", type=float, default=300)
    parser.add_argument("--sync-frequency", default="1m")
    parser.add_argument("--workdir")
    parser.add_argument("--json")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["VOLUMEMANAGER_BIN"] = str(Path(args.daemon).resolve())
    if args.inside:
        result = inside(args)
        Path(args.json).write_text(json.dumps(result, indent=1))
        return 0

    from machine import differences, machine_state
    work = Path(args.workdir or tempfile.mkdtemp(prefix="realkubelet-headline-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.json).resolve() if args.json else work / "result.json"
    print(f"work dir: {work}", flush=True)
    before = machine_state()
    rc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "realkube" / "node_namespace.py"),
         str(work / "namespace"), "--", sys.executable, __file__, "--inside",
         "--daemon", args.daemon, "--alone", str(args.alone), "--beside", str(args.beside),
         "--storm", str(args.storm), "--sync-frequency", args.sync_frequency,
         "--workdir", str(work), "--json", str(out)]).returncode
    changed = differences(before, machine_state(),
                          {"kube-apiserver", "etcd", "kubelet", "volumemanager"})
    if changed:
        print("the machine changed:\n  " + "\n  ".join(changed))
        return 1
    if rc != 0:
        return rc
    result = json.loads(out.read_text())
    alone, beside = result["alone"], result["beside"]
    print(f"\nkubelet {result['kubelet_version']}, {result['strategy']} strategy, "
          f"--sync-frequency {result['sync_frequency']}")
    print(f"the kubelet alone:   min {alone['min']:.1f} s, median {alone['median']:.1f} s, "
          f"max {alone['max']:.1f} s ({alone['n']} changes)")
    print(f"the daemon beside:   min {1000 * beside['min']:.1f} ms, median "
          f"{1000 * beside['median']:.1f} ms, max {1000 * beside['max']:.1f} ms "
          f"({beside['n']} changes)")
    print(f"median ratio: {alone['median'] / beside['median']:.0f}x; results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
