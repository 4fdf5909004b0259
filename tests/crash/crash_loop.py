#!/usr/bin/python3
"""Crash loop: the real daemon (standalone mode) under a stream of object and pod changes, killed
with SIGKILL at random moments and restarted, N times. After every kill and every restart it checks
what a container and the node would see:

* every volume shows one complete payload of each object it reads (old or new, never mixed): every
  file carries its object's name and generation, and the key set changes with the generation, so a
  mix of two versions, a missing file or a torn file is detected; the generation a volume shows
  never goes back;
* no `..data_tmp` (the kubelet's staging name) anywhere in the daemon's volumes;
* after the first reconcile (the disk converged on the manifests): no debris (only `..data`, the
  version it points to and one resolving link per top-level name), no dir of a removed pod, and
  the ownership journal lists exactly the volumes on disk;
* the ownership journal always checks out (header, every complete line's checksum) and lists every
  volume dir the daemon created that exists on disk;
* the foreign pods and files planted under pods/ are untouched, byte for byte.

Run: crash_loop.py --daemon build/bin/volumemanager --iterations 10000 [--seed N] [--workdir D]
Prints one progress line every --report iterations and a summary (iterations, kills, duration,
restarts per second, findings); exits 1 on the first violation, naming it, and keeps the workdir.
"""
import argparse
import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
PROJECTED = "kubernetes.io~projected"
DOWNWARD = "kubernetes.io~downward-api"
CONFIGMAPS = ["cm0", "cm1", "cm2"]
SECRETS = ["s0", "s1"]
OPTIONAL = "opt0"  # a ConfigMap that comes and goes; read as an optional projected source
SLOTS = 5          # pod manifest files pod-<slot>.yaml; each incarnation gets a new UID
JOURNAL_HEADER = "volumemanager-ownership v3"


class Violation(AssertionError):
    pass


# --- payloads: every file names its object and generation; the key set depends on the generation


def payload(obj, gen):
    """key -> bytes of object `obj` at generation `gen`."""
    out = {f"{obj}-gen": f"{obj} gen={gen}\n".encode()}
    for j in range(1 + gen % 3):
        filler = "x" * ((gen * 37 + j * 101) % 2500)
        out[f"{obj}-k{j}"] = f"{obj} gen={gen} key=k{j}\n{filler}\n".encode()
    return out


FILE_RE = re.compile(rb"^([a-z0-9]+) gen=([0-9]+)[\n ]")


def labels_text(gen):
    return f'app="crash"\ngen="{gen}"'.encode()


# --- the model: what was written to the manifest dirs, with each object's generation history


class Model:
    def __init__(self, rng):
        self.rng = rng
        self.gens = {o: [0] for o in CONFIGMAPS + SECRETS}  # every generation ever written
        self.gens[OPTIONAL] = [None]                        # None: absent
        self.pods = {}                                      # slot -> pod record (or absent)
        self.incarnation = 0
        self.retired_uids = set()                           # UIDs of removed pods

    def current(self, obj):
        return self.gens[obj][-1]

    def next_gen(self, obj):
        return max(g for g in self.gens[obj] if g is not None) + 1 if any(
            g is not None for g in self.gens[obj]) else 1

    def new_pod(self, slot):
        self.incarnation += 1
        uid = f"crash-{slot}-{self.incarnation}"
        rng = self.rng
        volumes = []
        kinds = rng.sample(["cm", "secret", "projected", "downward"], rng.randint(1, 4))
        for k in kinds:
            if k == "cm":
                volumes.append({"name": "cfg", "configMap": {"name": rng.choice(CONFIGMAPS)}})
            elif k == "secret":
                volumes.append({"name": "sec", "secret": {"secretName": rng.choice(SECRETS)}})
            elif k == "projected":
                volumes.append({"name": "bundle", "projected": {"sources": [
                    {"configMap": {"name": rng.choice(CONFIGMAPS)}},
                    {"secret": {"name": rng.choice(SECRETS)}},
                    {"configMap": {"name": OPTIONAL, "optional": True}},
                    {"downwardAPI": {"items": [{"path": "podlabels",
                                                "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                ]}})
            else:
                volumes.append({"name": "info", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}})
        return {"slot": slot, "uid": uid, "volumes": volumes, "labels": [0],
                "name": f"pod-{slot}-{self.incarnation}"}


def volume_dirs_of(pod, root):
    """(plugin dir, volume dir, spec) of each volume of `pod`."""
    out = []
    for v in pod["volumes"]:
        plugin = (CM if "configMap" in v else SECRET if "secret" in v else
                  PROJECTED if "projected" in v else DOWNWARD)
        out.append((plugin, root / "pods" / pod["uid"] / "volumes" / plugin / v["name"], v))
    return out


def sources_of(spec):
    """Objects a volume reads: [(object, optional)] plus whether it has pod labels."""
    if "configMap" in spec:
        return [(spec["configMap"]["name"], False)], False
    if "secret" in spec:
        return [(spec["secret"]["secretName"], False)], False
    if "downwardAPI" in spec:
        return [], True
    objs, labels = [], False
    for s in spec["projected"]["sources"]:
        if "configMap" in s:
            objs.append((s["configMap"]["name"], s["configMap"].get("optional", False)))
        elif "secret" in s:
            objs.append((s["secret"]["name"], False))
        else:
            labels = True
    return objs, labels


# --- the manifest dirs


def write_yaml(path: Path, doc):
    tmp = path.with_name(f".{path.name}.tmp")
    # Double-quoted scalars, never folded: yaml-cpp drops the trailing empty lines of a folded
    # flow scalar (RELIABILITY.md, findings), which PyYAML's default style would produce.
    tmp.write_text(yaml.safe_dump(doc, default_style='"', width=1 << 30))
    os.replace(tmp, path)


def object_doc(obj, gen):
    data = {k: v.decode() for k, v in payload(obj, gen).items()}
    if obj.startswith("s"):
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": obj}, "stringData": data}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": obj}, "data": data}


def pod_doc(pod):
    mounts = [{"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in pod["volumes"]]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod["name"], "uid": pod["uid"],
                         "labels": {"app": "crash", "gen": str(pod["labels"][-1])}},
            "spec": {"containers": [{"name": "app", "image": "busybox", "volumeMounts": mounts}],
                     "volumes": pod["volumes"]}}


class FileBackend:
    """Standalone mode: manifest files, rewritten, added and removed as an editor does."""

    def __init__(self, pods_dir: Path, objects_dir: Path):
        self.pods_dir, self.objects_dir = pods_dir, objects_dir

    def put_object(self, obj, gen):
        write_yaml(self.objects_dir / f"{obj}.yaml", object_doc(obj, gen))

    def delete_object(self, obj):
        os.remove(self.objects_dir / f"{obj}.yaml")

    def put_pod(self, pod):
        write_yaml(self.pods_dir / f"pod-{pod['slot']}.yaml", pod_doc(pod))

    def delete_pod(self, pod):
        os.remove(self.pods_dir / f"pod-{pod['slot']}.yaml")

    def daemon_args(self):
        return ["--pod-manifest-path", str(self.pods_dir),
                "--object-manifest-path", str(self.objects_dir)]


class ApiBackend:
    """Cluster mode: the same changes through the test API server (tests/apiserver), whose pods
    are bound to the daemon's node; the daemon sets its volumes up itself."""

    NS = "/api/v1/namespaces/default"

    def __init__(self, server):
        self.server = server
        # The daemon's Node, as its kubelet registers it: the daemon checks that it exists.
        self._call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                             "metadata": {"name": "crash-node"}})

    def _call(self, method, path, body=None, expect=(200, 201)):
        status, data = self.server.request(method, path, body)
        if status not in expect:
            raise RuntimeError(f"{method} {path}: {status} {data}")
        return data

    def _put(self, coll, name, doc):
        status, current = self.server.request("GET", f"{coll}/{name}")
        if status == 404:
            return self._call("POST", coll, doc)
        doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self._call("PUT", f"{coll}/{name}", doc)

    def put_object(self, obj, gen):
        doc = object_doc(obj, gen)
        doc["metadata"]["namespace"] = "default"
        self._put(f"{self.NS}/{'secrets' if doc['kind'] == 'Secret' else 'configmaps'}", obj, doc)

    def delete_object(self, obj):
        self._call("DELETE", f"{self.NS}/configmaps/{obj}", expect=(200, 202))

    def put_pod(self, pod):
        doc = pod_doc(pod)
        doc["metadata"]["namespace"] = "default"
        doc["spec"]["nodeName"] = "crash-node"
        del doc["metadata"]["uid"]
        pod["uid"] = self._put(f"{self.NS}/pods", pod["name"], doc)["metadata"]["uid"]

    def delete_pod(self, pod):
        self._call("DELETE", f"{self.NS}/pods/{pod['name']}?gracePeriodSeconds=0",
                   expect=(200, 202))

    def daemon_args(self):
        return ["--kubeconfig", self.server.kubeconfig, "--volume-ownership", "self"]


class World:
    def __init__(self, work: Path, rng, server=None):
        self.work = work
        self.pods_dir = work / "pods"
        self.objects_dir = work / "objects"
        self.root = work / "root"
        self.state = work / "state"
        for d in (self.pods_dir, self.objects_dir, self.root / "pods"):
            d.mkdir(parents=True, exist_ok=True)
        self.rng = rng
        self.model = Model(rng)
        self.last_seen = {}  # (volume dir, object or "labels") -> highest generation seen
        self.foreign = {}    # planted path -> snapshot
        self.backend = ApiBackend(server) if server else FileBackend(self.pods_dir,
                                                                     self.objects_dir)
        for obj in CONFIGMAPS + SECRETS:
            self.backend.put_object(obj, 0)
        for slot in range(SLOTS):
            self.add_pod(slot)

    # mutations -----------------------------------------------------------------------------
    def add_pod(self, slot):
        pod = self.model.new_pod(slot)
        # Some pods get a file of the kubelet's in their pod dir before the daemon sees them: the
        # daemon did not create that dir, so it must leave it (and the file) when the pod goes.
        # (Not in cluster mode: the API server gives the UID only when the pod is created.)
        if isinstance(self.backend, FileBackend) and self.rng.random() < 0.3:
            planted = self.root / "pods" / pod["uid"] / "etc-hosts"
            planted.parent.mkdir(parents=True)
            planted.write_bytes(f"127.0.0.1 {pod['uid']}\n".encode())
            self.foreign[planted] = snapshot(planted)
        self.backend.put_pod(pod)
        self.model.pods[slot] = pod

    def mutate(self):
        rng, m = self.rng, self.model
        r = rng.random()
        if r < 0.45:
            obj = rng.choice(CONFIGMAPS + SECRETS)
            gen = m.next_gen(obj)
            self.backend.put_object(obj, gen)
            m.gens[obj].append(gen)
        elif r < 0.55:
            if m.current(OPTIONAL) is None:
                gen = m.next_gen(OPTIONAL)
                self.backend.put_object(OPTIONAL, gen)
                m.gens[OPTIONAL].append(gen)
            else:
                self.backend.delete_object(OPTIONAL)
                m.gens[OPTIONAL].append(None)
        elif r < 0.75:
            live = [p for p in m.pods.values() if p]
            if live:
                pod = rng.choice(live)
                pod["labels"].append(pod["labels"][-1] + 1)
                self.backend.put_pod(pod)
        else:
            slot = rng.randrange(SLOTS)
            if m.pods.get(slot):
                self.backend.delete_pod(m.pods[slot])
                m.retired_uids.add(m.pods[slot]["uid"])
                m.pods[slot] = None
            else:
                self.add_pod(slot)

    # foreign content -----------------------------------------------------------------------
    def plant_foreign(self):
        """Pods the daemon never heard of: volumes as the kubelet leaves them, with a stale
        ..data_tmp, an empty pod dir and a dir named like a volume of a pod the daemon serves
        (same plugin and volume name, another UID)."""
        pods = self.root / "pods"
        for uid, plugin, name in [("kubelet-a", CM, "cfg"), ("kubelet-a", SECRET, "sec"),
                                  ("kubelet-b", PROJECTED, "bundle"),
                                  ("crash-0-0", CM, "cfg")]:
            vd = pods / uid / "volumes" / plugin / name
            ts = vd / "..2025_01_02_03_04_05.1234567"
            ts.mkdir(parents=True)
            (ts / "key").write_bytes(f"{uid} {name}\n".encode())
            os.symlink(ts.name, vd / "..data")
            os.symlink("..2025_01_01_00_00_00.1", vd / "..data_tmp")
            os.symlink("..data/key", vd / "key")
        (pods / "kubelet-c" / "volumes" / CM).mkdir(parents=True)
        (pods / "kubelet-a" / "etc-hosts").write_bytes(b"127.0.0.1 localhost\n")
        for uid in ("kubelet-a", "kubelet-b", "kubelet-c", "crash-0-0"):
            self.foreign[pods / uid] = snapshot(pods / uid)

    def check_foreign(self):
        for path, before in self.foreign.items():
            if snapshot(path) != before:
                raise Violation(f"foreign {path} was touched")

    # checks --------------------------------------------------------------------------------
    def check_volume(self, pod, vdir, spec, converged):
        """One complete payload per source; returns the top-level names."""
        if not vdir.exists():
            if converged:
                raise Violation(f"{vdir}: missing after the first reconcile")
            return
        names = set(os.listdir(vdir))
        if "..data_tmp" in names:
            raise Violation(f"{vdir}: ..data_tmp present")
        if "..data" not in names:
            if converged:
                raise Violation(f"{vdir}: no ..data after the first reconcile")
            return  # a first set-up cut short: nothing published yet
        target = os.readlink(vdir / "..data")
        version = vdir / target
        files = {}
        for dirpath, _, filenames in os.walk(version):
            for f in filenames:
                p = Path(dirpath) / f
                files[str(p.relative_to(version))] = p.read_bytes()
        # Every top-level name links into ..data.
        top = {n for n in names if not n.startswith("..")}
        want_top = {f.split("/")[0] for f in files}
        if not want_top <= top:
            raise Violation(f"{vdir}: top-level links {sorted(want_top - top)} missing")
        for n in want_top:
            if os.readlink(vdir / n) != f"..data/{n}":
                raise Violation(f"{vdir}/{n}: link to {os.readlink(vdir / n)}")
        objs, has_labels = sources_of(spec)
        groups = {}
        for rel, data in files.items():
            if rel in ("labels", "podlabels"):
                continue
            mo = FILE_RE.match(data)
            if not mo:
                raise Violation(f"{vdir}/{rel}: not a payload file: {data[:60]!r}")
            groups.setdefault(mo.group(1).decode(), {})[rel] = data
        for obj, optional in objs:
            got = groups.pop(obj, None)
            history = self.model.gens[obj]
            if got is None:
                if optional and None in history:
                    if converged and history[-1] is not None:
                        raise Violation(f"{vdir}: {obj} absent, current gen {history[-1]}")
                    continue
                raise Violation(f"{vdir}: no file of {obj}")
            gen = int(FILE_RE.match(got[f"{obj}-gen"] if f"{obj}-gen" in got else
                                    next(iter(got.values()))).group(2))
            if gen not in history:
                raise Violation(f"{vdir}: {obj} gen {gen} was never written")
            if got != payload(obj, gen):
                raise Violation(f"{vdir}: {obj} mixed or incomplete at gen {gen}: "
                                f"{sorted(got)} vs {sorted(payload(obj, gen))}")
            if converged and gen != history[-1]:
                raise Violation(f"{vdir}: {obj} at gen {gen}, current {history[-1]}")
            self.monotonic(vdir, obj, gen)
        if groups:
            raise Violation(f"{vdir}: files of objects it does not read: {sorted(groups)}")
        if has_labels:
            name = "podlabels" if "projected" in spec else "labels"
            data = files.get(name)
            mo = re.fullmatch(rb'app="crash"\ngen="([0-9]+)"', data or b"")
            if not mo or int(mo.group(1)) not in pod["labels"]:
                raise Violation(f"{vdir}/{name}: {data!r}")
            gen = int(mo.group(1))
            if converged and gen != pod["labels"][-1]:
                raise Violation(f"{vdir}: labels gen {gen}, current {pod['labels'][-1]}")
            self.monotonic(vdir, "labels", gen)
        if converged:
            dots = {n for n in names if n.startswith("..")}
            if dots != {"..data", target} or top != want_top:
                raise Violation(f"{vdir}: debris after the first reconcile: {sorted(names)}")

    def monotonic(self, vdir, what, gen):
        key = (str(vdir), what)
        if gen < self.last_seen.get(key, -1):
            raise Violation(f"{vdir}: {what} went back from gen {self.last_seen[key]} to {gen}")
        self.last_seen[key] = gen

    def journal(self):
        """The live entries of the ownership journal: path -> kind."""
        path = self.state / "ownership.journal"
        if not path.exists():
            return {}
        data = path.read_bytes().decode()
        lines = data.split("\n")
        if lines[0] != JOURNAL_HEADER:
            raise Violation(f"journal header {lines[0]!r}")
        complete, last = lines[1:-1], lines[-1]  # `last`: an append cut short, ignored
        live = {}
        for line in complete:
            body = line[17:]
            if len(line) < 18 or line[16] != " " or f"{fnv1a64(body.encode()):016x}" != line[:16]:
                raise Violation(f"journal line does not check out: {line!r}")
            if body.startswith("= root "):  # the root dir and its identity (line 2)
                continue
            op, kind, rel = body.split(" ", 2)
            if op == "@":  # the inode of an owned volume dir, after its `+`
                inode, _, rel = rel.partition(" ")
                if kind != "volume" or not inode.isdigit() or live.get(rel) != "volume":
                    raise Violation(f"journal identity line for no owned volume: {line!r}")
                continue
            if op == "+":
                live[rel] = kind
            else:
                live.pop(rel, None)
        del last
        return live

    def check(self, converged):
        root = self.root
        self.check_foreign()
        journal = self.journal()
        live_uids = {p["uid"] for p in self.model.pods.values() if p}
        for pod in [p for p in self.model.pods.values() if p]:
            for plugin, vdir, spec in volume_dirs_of(pod, root):
                self.check_volume(pod, vdir, spec, converged)
        # Every volume dir of a pod of ours on disk is in the journal; none of a removed pod
        # after the first reconcile; no ..data_tmp in any.
        ours = [d for d in (root / "pods").iterdir() if d not in self.foreign]
        for poddir in ours:
            vols = poddir / "volumes"
            for plugin_dir in (vols.iterdir() if vols.is_dir() else []):
                for vdir in plugin_dir.iterdir():
                    rel = str(vdir.relative_to(root))
                    if journal.get(rel) != "volume":
                        raise Violation(f"{vdir} on disk, not in the ownership journal")
                    if (vdir / "..data_tmp").exists() or os.path.islink(vdir / "..data_tmp"):
                        raise Violation(f"{vdir}: ..data_tmp present")
                    if converged and poddir.name not in live_uids:
                        raise Violation(f"{vdir}: volume of a removed pod after the reconcile")
            if converged and poddir.name not in live_uids:
                planted = poddir / "etc-hosts"
                if planted not in self.foreign or set(os.listdir(poddir)) != {"etc-hosts"}:
                    raise Violation(f"{poddir}: removed pod's dir left: {os.listdir(poddir)}")
        if converged:
            on_disk = set()
            for poddir in ours:
                for vdir in (poddir / "volumes").glob("*/*"):
                    on_disk.add(str(vdir.relative_to(root)))
            listed = {p for p, k in journal.items() if k == "volume"}
            if listed != on_disk:
                raise Violation(f"journal {sorted(listed ^ on_disk)} differ from disk")


def fnv1a64(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def snapshot(path):
    out = {}
    p = Path(path)
    items = [p] + ([Path(d) / n for d, ds, fs in os.walk(p) for n in ds + fs] if p.is_dir() and
                   not p.is_symlink() else [])
    for q in items:
        st = q.lstat()
        if q.is_symlink():
            out[str(q)] = ("link", os.readlink(q))
        elif q.is_dir():
            out[str(q)] = ("dir", st.st_mode, st.st_uid)
        else:
            out[str(q)] = ("file", st.st_mode, st.st_mtime_ns, q.read_bytes())
    return out


# --- the daemon


class Daemon:
    def __init__(self, binary, world: World, log_path: Path):
        self.binary = binary
        self.world = world
        self.log_path = log_path
        self.proc = None

    def start(self):
        w = self.world
        log = open(self.log_path, "ab")
        self.mark = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.proc = subprocess.Popen(
            [self.binary, "--root-dir", str(w.root), "--state-dir", str(w.state),
             "--node-name", "crash-node", *w.backend.daemon_args(), "--unpublished-grace", "0s",
             "--healthz-bind-address", "127.0.0.1:0", "--debug-bind-address", ""],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        if rc != -signal.SIGKILL:
            raise Violation(f"the daemon exited by itself (status {rc}) before the kill")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ready(self):
        with open(self.log_path, "rb") as f:
            f.seek(self.mark)
            text = f.read().decode(errors="replace")
        found = re.findall(r"serving /healthz, /readyz and /metrics on ([0-9.:]+)", text)
        if not found:
            return False
        try:
            with urllib.request.urlopen(f"http://{found[-1]}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False


def wait_converged(world, daemon, deadline_s):
    """Waits for readiness (every desired volume written or checked once: the first reconcile),
    then polls until the disk shows the manifests' state exactly."""
    end = time.monotonic() + deadline_s
    last = "not ready"
    while not daemon.ready():
        if not daemon.alive():
            raise Violation("the daemon exited while starting")
        if time.monotonic() > end:
            raise Violation(f"not ready within {deadline_s}s")
        time.sleep(0.01)
    while time.monotonic() < end:
        if not daemon.alive():
            raise Violation("the daemon exited while converging")
        try:
            world.check(converged=True)
            return
        except (Violation, OSError, KeyError) as e:
            last = e
        time.sleep(0.02)
    raise Violation(f"not converged within {deadline_s}s: {last}")


def load_average():
    """The 1, 5 and 15 minute load averages, for the run's record (RELIABILITY.md)."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def unmount_under(path):
    prefix = str(path)
    with open("/proc/self/mounts") as f:
        targets = [ln.split()[1] for ln in f]
    for t in sorted((t for t in targets if t == prefix or t.startswith(prefix + "/")),
                    key=len, reverse=True):
        subprocess.run(["umount", "-l", t], check=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", default="build/bin/volumemanager")
    ap.add_argument("--iterations", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--report", type=int, default=100, help="progress line every N iterations")
    ap.add_argument("--converge-every", type=float, default=0.2,
                    help="share of iterations that wait for the first reconcile before the kill")
    ap.add_argument("--cluster", action="store_true",
                    help="cluster mode: pods and objects from the test API server")
    ap.add_argument("--kill-window", type=float, default=None,
                    help="kills fall at random in this many seconds after the start (default "
                         "0.25, 0.8 in cluster mode, whose start-up takes longer)")
    ap.add_argument("--deadline", type=float, default=60.0,
                    help="seconds to wait for convergence (generous: the machine may be loaded)")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="crash-loop-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.kill_window is None:
        args.kill_window = 0.8 if args.cluster else 0.25
    mode = "cluster" if args.cluster else "standalone"
    print(f"crash loop ({mode}): seed {seed}, workdir {work}, {args.iterations} iterations",
          flush=True)
    with contextlib.ExitStack() as stack:
        server = None
        if args.cluster:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
            from harness import TestApiServer
            server = stack.enter_context(TestApiServer())
        return run(args, seed, rng, work, server)


def run(args, seed, rng, work, server):
    world = World(work, rng, server)
    world.plant_foreign()
    daemon = Daemon(os.path.abspath(args.daemon), world, work / "daemon.log")
    start = time.monotonic()
    stats = {"kills": 0, "converged": 0, "mutations": 0, "kill_before_ready": 0}
    ok = False
    i = 0
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        for i in range(1, args.iterations + 1):
            # Changes made while the daemon is down, then the restart.
            for _ in range(rng.choice([0, 0, 1, 3])):
                world.mutate()
                stats["mutations"] += 1
            daemon.start()
            if rng.random() < args.converge_every:
                wait_converged(world, daemon, args.deadline)
                stats["converged"] += 1
                # Then a burst of changes and a kill in the middle of their writes.
                for _ in range(rng.randint(1, 6)):
                    world.mutate()
                    stats["mutations"] += 1
                time.sleep(rng.uniform(0, 0.03))
            else:
                # A kill at a random moment of start-up, reconstruction or the writes after it,
                # with changes streaming in meanwhile.
                until = time.monotonic() + rng.uniform(0, args.kill_window)
                while time.monotonic() < until:
                    if rng.random() < 0.5:
                        world.mutate()
                        stats["mutations"] += 1
                    time.sleep(rng.uniform(0, 0.02))
            if not daemon.alive():
                raise Violation("the daemon exited by itself")
            if not daemon.ready():
                stats["kill_before_ready"] += 1
            daemon.kill()
            stats["kills"] += 1
            world.check(converged=False)
            if i % args.report == 0 or i == args.iterations:
                el = time.monotonic() - start
                print(f"{i} iterations, {stats['kills']} kills "
                      f"({stats['kill_before_ready']} before ready), {stats['converged']} "
                      f"converged restarts, {stats['mutations']} changes, {el:.0f} s "
                      f"({i / el:.2f} restarts/s), load {load_average()}", flush=True)
        # The end: a last start, convergence, and a clean stop.
        daemon.start()
        wait_converged(world, daemon, args.deadline)
        daemon.proc.send_signal(signal.SIGTERM)
        rc = daemon.proc.wait(timeout=30)
        daemon.proc = None
        if rc != 0:
            raise Violation(f"graceful stop exited {rc}")
        world.check(converged=True)
        ok = True
    except Violation as e:
        print(f"VIOLATION (seed {seed}, iteration {i}): {e}", flush=True)
        print(f"workdir kept: {work}; daemon log: {work / 'daemon.log'}", flush=True)
    except KeyboardInterrupt:
        # Stopped from outside (Ctrl-C, SIGTERM): the summary below still records the counts.
        print(f"STOPPED at iteration {i} (seed {seed}), no violation until then", flush=True)
    finally:
        if daemon.proc is not None:
            daemon.proc.kill()
            daemon.proc.wait()
    el = time.monotonic() - start
    print(f"summary: {stats['kills']} kills ({stats['kill_before_ready']} before ready), "
          f"{stats['converged']} converged restarts, {stats['mutations']} changes, "
          f"{el:.0f} s ({stats['kills'] / el:.2f} restarts/s), load {load_average()}, "
          f"seed {seed}: {'no violation' if ok else 'FAILED'}", flush=True)
    unmount_under(work)
    if ok and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
