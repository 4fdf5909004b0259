"""Bad inputs, from the tables in tests/badinputs/: malformed pod manifests, object manifests,
watch events, kubeconfigs and flag values. Each must get a clear error naming the file, pod,
volume or object (every `expect` substring on one log line, or in the exit message), the daemon
must stay up (start-up inputs: exit with a message instead, having created nothing), and every
other volume must stay untouched: a canary pod's volumes, byte for byte and link for link.

Manifests and objects go one by one into the dirs of one standalone daemon; watch events are
injected into the live watches of one cluster-mode daemon (the test API server's `raw`
injection); kubeconfigs and flags each start the binary once.
"""
import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import (BIN, Env, NODE, mounts_under, parse_log_line, snapshot, visible_files,
                      wait_for)
from test_cluster import DAEMON_USER

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))

TABLES = Path(__file__).resolve().parents[1] / "badinputs"


def table(name):
    cases = yaml.safe_load((TABLES / name).read_text())
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), f"duplicate ids in {name}"
    return pytest.mark.parametrize("case", cases, ids=ids)


def merge(base, override):
    """`override` merged into a copy of `base`; a None value removes the key."""
    out = copy.deepcopy(base)
    if not isinstance(override, dict) or not isinstance(out, dict):
        return copy.deepcopy(override)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def decoded(line):
    """A structured line (either format) spelled out for substring checks: the message, each key
    as `key "value"`, then the bare values, all unquoted (so an error's own quotes read as
    written); the line itself when it is not structured."""
    r = parse_log_line(line)
    if r is None:
        return line
    keys = [(k, v) for k, v in r.items() if k not in ("ts", "level", "msg")]
    return " ".join([str(r.get("msg", ""))] +
                    [f'{k} "{v}"' if isinstance(v, str) else f"{k} {v}" for k, v in keys] +
                    [str(v) for _, v in keys] +
                    # `object` is kind/namespace/name; the table names objects as the kubelet's
                    # messages do, "kind namespace/name"
                    [str(v).replace("/", " ", 1) for k, v in keys if k == "object"])


def log_line_with(text, expect):
    """The first line of `text` holding every substring of `expect`, as written or decoded."""
    for line in text.splitlines():
        if all(e in line for e in expect) or all(e in decoded(line) for e in expect):
            return line
    return None


CANARY_SECRET = "SECRET-MARKER-CANARY"


def with_mounts(pod):
    """`pod` with its first container mounting every volume that has a name (only mounted
    volumes are set up)."""
    volumes = pod.get("spec", {}).get("volumes") if isinstance(pod.get("spec"), dict) else None
    if isinstance(volumes, list):
        names = [v["name"] for v in volumes if isinstance(v, dict) and isinstance(v.get("name"), str)]
        pod["spec"]["containers"][0]["volumeMounts"] = [
            {"name": n, "mountPath": f"/mnt/{i}"} for i, n in enumerate(names)]
    return pod


class Standalone:
    """One standalone daemon for a whole table, with a canary pod whose volumes must never change."""

    def __init__(self, tmp: Path):
        self.env = Env(tmp)
        e = self.env
        e.put_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "canary-cm"},
                      "data": {"k": "canary"}}, "canary-cm.yaml")
        e.put_object({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "canary-secret"},
                      "stringData": {"s": CANARY_SECRET}}, "canary-secret.yaml")
        e.put_pod(with_mounts({
                   "apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "canary", "uid": "canary-uid", "labels": {"app": "c"}},
                   "spec": {"containers": [{"name": "app", "image": "busybox"}], "volumes": [
                       {"name": "cfg", "configMap": {"name": "canary-cm"}},
                       {"name": "sec", "secret": {"secretName": "canary-secret"}},
                       {"name": "info", "downwardAPI": {"items": [
                           {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                       {"name": "all", "projected": {"sources": [
                           {"configMap": {"name": "canary-cm"}},
                           {"secret": {"name": "canary-secret"}}]}}]}}), "canary.yaml")
        e.unpublished_grace = "30s"
        e.start("--no-tmpfs", "-v", "6")
        self.canary = e.root / "pods" / "canary-uid"
        volumes = self.canary / "volumes"
        expected = {"kubernetes.io~configmap/cfg": {"k": b"canary"},
                    "kubernetes.io~secret/sec": {"s": CANARY_SECRET.encode()},
                    "kubernetes.io~downward-api/info": {"labels": b'app="c"'},
                    "kubernetes.io~projected/all": {"k": b"canary",
                                                    "s": CANARY_SECRET.encode()}}
        wait_for(lambda: all(visible_files(volumes / v) == content
                             for v, content in expected.items()), what="the canary's volumes")
        wait_for(lambda: "canary" in e.log() and e.log().count("SetUp succeeded") >= 4,
                 what="the canary's volumes set up")
        self.before = snapshot(self.canary)

    def check(self, case, directory, content, expect):
        e = self.env
        offset = len(e.log())
        path = directory / f"{case['id']}.yaml"
        tmp = directory / f".{case['id']}.tmp"
        tmp.write_bytes(content)
        os.replace(tmp, path)
        try:
            line = wait_for(lambda: log_line_with(e.log()[offset:], expect),
                            what=f"a log line with {expect}")
            assert e.proc.poll() is None, "the daemon exited"
            assert snapshot(self.canary) == self.before, "the canary's volumes changed"
            return line
        finally:
            path.unlink()

    def stop(self):
        e = self.env
        if e.proc is not None:
            e.stop(signal.SIGKILL)
        for m in mounts_under(e.tmp):
            subprocess.run(["umount", "-l", m], check=False)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    s = Standalone(tmp_path_factory.mktemp("badinputs"))
    yield s
    s.stop()


def to_bytes(case, key):
    text = case[key]
    return text.encode("utf-8", "surrogateescape") if "\\x" not in text else text.encode("latin-1")


@table("pods.yaml")
def test_bad_pod_manifest(standalone, case):
    e = standalone.env
    for i, obj in enumerate(case.get("objects", [])):
        e.put_object(obj, f"{case['id']}-{i}.yaml")
    if "text" in case:
        content = case["text"].encode("latin-1")
    else:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": case["id"], "uid": f"uid-{case['id']}"},
               "spec": {"containers": [{"name": "app", "image": "busybox",
                                        "resources": {"limits": {"cpu": "1"}}}],
                        "volumes": case.get("volumes", [])}}
        pod = merge(with_mounts(pod), case.get("pod", {}))
        content = yaml.safe_dump(pod).encode()
    standalone.check(case, e.pods, content, case["expect"])


@table("objects.yaml")
def test_bad_object_manifest(standalone, case):
    e = standalone.env
    if "text" in case:
        content = case["text"].encode("latin-1")
    else:
        content = yaml.safe_dump(case["object"]).encode()
    standalone.check(case, e.objects, content, case["expect"])


def run_binary(tmp_path, args, env=None):
    base = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60,
                          env=dict(base, **(env or {})), errors="replace")


def assert_nothing_created(tmp_path):
    assert not (tmp_path / "root").exists()
    assert not (tmp_path / "state").exists()


@table("kubeconfigs.yaml")
def test_bad_kubeconfig(tmp_path, case):
    path = tmp_path / f"{case['id']}.kubeconfig"
    path.write_bytes(case["text"].encode("latin-1"))
    done = run_binary(tmp_path, ["--kubeconfig", str(path), "--root-dir", str(tmp_path / "root"),
                                 "--state-dir", str(tmp_path / "state"), "--node-name", NODE])
    assert done.returncode == 1, done
    last = done.stderr.strip().splitlines()[-1]
    for text in [f"--kubeconfig {path}", *case["expect"]]:
        assert text in last, last
    assert "SECRET-MARKER" not in done.stdout + done.stderr
    assert_nothing_created(tmp_path)


@table("flags.yaml")
def test_bad_flag_value(tmp_path, case):
    (tmp_path / "pods").mkdir()
    done = run_binary(tmp_path, ["--root-dir", str(tmp_path / "root"), "--state-dir",
                                 str(tmp_path / "state"), "--node-name", NODE,
                                 "--pod-manifest-path", str(tmp_path / "pods"), *case["args"]])
    assert done.returncode == 2, done
    for text in case["expect"]:
        assert text in done.stderr, done.stderr
    assert_nothing_created(tmp_path)


class ClusterCanary:
    """One cluster-mode daemon for the watch-event table, beside a simulated kubelet that has set
    up a canary pod's configMap and secret volumes."""

    def __init__(self, tmp: Path, server):
        from test_cluster import CM, SECRET, Cluster, cm_volume, secret_volume
        self.cluster = c = Cluster(tmp, server)
        c.put_configmap("canary-cm", {"k": "canary"})
        c.put_secret("canary-secret", {"s": CANARY_SECRET})
        uid = c.create_pod("canary", [cm_volume("cfg", "canary-cm"),
                                      secret_volume("sec", "canary-secret")])
        c.kubelet_sets_up(uid, CM, "cfg", {"k": "canary"})
        c.kubelet_sets_up(uid, SECRET, "sec", {"s": CANARY_SECRET})
        c.start("-v", "6")
        c.wait_synced("configmap default/canary-cm", "secret default/canary-secret")
        self.canary = c.root / "pods" / uid
        self.before = snapshot(self.canary)

    def inject(self, case):
        c = self.cluster
        # A fresh revision for each case: an event carrying the revision the reflector already
        # holds is, rightly, no change.
        c.put_configmap("revision-bump", {"case": case["id"]})
        rv = str(c.server.admin("GET", "state")["revision"])
        line = case["line"] if "line" in case else json.dumps(case["event"])
        line = line.replace('"RV"', json.dumps(rv))
        # A watch younger than the reflectors' short-watch limit (1 s) that ends without events
        # is relisted after a backoff: let the current one age first.
        watches = [r for r in c.daemon_requests()
                   if r["query"].get("watch") in ("true", "1") and
                   r["path"].endswith("/" + case["resource"])]
        if watches:
            time.sleep(max(0.0, watches[-1]["time"] + 1.2 - time.time()))
        offset = len(c.log())
        c.server.admin("POST", "faults", {
            "verb": "watch", "resource": case["resource"], "user": DAEMON_USER, "times": 1,
            "watch": {"inject": [{"after": 0, "kind": "raw", "line": line}]}})
        c.server.admin("POST", "drop-watches", {"abort": False})
        found = wait_for(lambda: log_line_with(c.log()[offset:], case["expect"]), timeout=30,
                         what=f"a log line with {case['expect']}")
        assert c.proc.poll() is None, "the daemon exited"
        assert snapshot(self.canary) == self.before, "the canary's volumes changed"
        return found


@pytest.fixture(scope="module")
def cluster_canary(tmp_path_factory):
    from harness import TestApiServer
    with TestApiServer() as server:
        cc = ClusterCanary(tmp_path_factory.mktemp("watch"), server)
        try:
            yield cc
            cc.cluster.assert_no_secret_leaked()
        finally:
            if cc.cluster.proc is not None:
                cc.cluster.stop(signal.SIGKILL)


@pytest.mark.test_server_only("raw watch events injected into the daemon's watches (fault hook)")
@table("watch_events.yaml")
def test_bad_watch_event(cluster_canary, case):
    cluster_canary.inject(case)
