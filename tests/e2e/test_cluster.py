"""End-to-end tests of the volumemanager binary in cluster mode, beside a (simulated) kubelet.

The real binary runs with --kubeconfig against tests/apiserver/kube-test-apiserver; the test plays
the kubelet: it sets volumes up with the kubelet's writer algorithm (kubelet_writer.py) and
rewrites them as the kubelet's pod sync would. The daemon must refresh exactly those volumes, at
once, and create, remove or touch nothing else.
"""
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import DaemonProcess, visible_files, wait_for
import kubelet_writer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from harness import TestApiServer  # noqa: E402

NODE = "e2e-node"
DAEMON_TOKEN = "volumemanager-token"
DAEMON_USER = "system:serviceaccount:kube-system:volumemanager"
CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
PROJECTED = "kubernetes.io~projected"
DOWNWARD = "kubernetes.io~downward-api"


class Cluster(DaemonProcess):
    def __init__(self, tmp: Path, server: TestApiServer):
        super().__init__(tmp / "daemon.log")
        self.tmp = tmp
        self.server = server
        self.root = tmp / "root"
        self.state = tmp / "state"
        self.root.mkdir()
        # The daemon's own user, so that ACLs can be set for it alone.
        server.admin("POST", "tokens", {"token": DAEMON_TOKEN, "user": DAEMON_USER})
        config = yaml.safe_load(Path(server.kubeconfig).read_text())
        for user in config["users"]:
            user["user"] = {"token": DAEMON_TOKEN}
        self.kubeconfig = tmp / "daemon.kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump(config))

    # --- the API ---------------------------------------------------------------------------
    def api(self, method, path, body=None, expect=(200, 201)):
        status, data = self.server.request(method, path, body)
        assert status in expect, f"{method} {path}: {status} {data}"
        return data

    def put_configmap(self, name, data, namespace="default", immutable=None):
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": namespace}, "data": data}
        if immutable is not None:
            obj["immutable"] = immutable
        return self._put(f"/api/v1/namespaces/{namespace}/configmaps", name, obj)

    def put_secret(self, name, string_data, namespace="default"):
        obj = {"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": namespace}, "stringData": string_data}
        return self._put(f"/api/v1/namespaces/{namespace}/secrets", name, obj)

    def _put(self, collection, name, obj):
        status, current = self.server.request("GET", f"{collection}/{name}")
        if status == 404:
            return self.api("POST", collection, obj)
        obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self.api("PUT", f"{collection}/{name}", obj)

    def delete(self, path):
        return self.api("DELETE", path, expect=(200, 202))

    def create_pod(self, name, volumes, node=NODE, namespace="default", annotations=None,
                   labels=None):
        meta = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = annotations
        if labels:
            meta["labels"] = labels
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
               "spec": {"nodeName": node,
                        "containers": [{"name": "app", "image": "busybox",
                                        "volumeMounts": [{"name": v["name"],
                                                          "mountPath": f"/mnt/{v['name']}"}
                                                         for v in volumes]}],
                        "volumes": volumes}}
        created = self.api("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
        return created["metadata"]["uid"]

    def events(self, namespace="default"):
        return self.api("GET", f"/api/v1/namespaces/{namespace}/events")["items"]

    # --- the node --------------------------------------------------------------------------
    def volume_dir(self, uid, plugin, volume):
        return self.root / "pods" / uid / "volumes" / plugin / volume

    def kubelet_sets_up(self, uid, plugin, volume, payload):
        kubelet_writer.set_up(self.volume_dir(uid, plugin, volume), payload)

    def start(self, *extra):
        return self.run(["--kubeconfig", str(self.kubeconfig), "--root-dir", str(self.root),
                         "--state-dir", str(self.state), "--node-name", NODE, "-v", "1", *extra])

    def start_and_sync(self, *extra):
        """Starts the daemon and waits until it has listed this node's pods and its objects."""
        self.start(*extra)
        wait_for(lambda: "pod source api delivered its first state" in self.log(),
                 what="the first list of pods")
        time.sleep(0.3)  # the per-object lists follow at once


@pytest.fixture
def cluster(tmp_path):
    with TestApiServer() as server:
        c = Cluster(tmp_path, server)
        yield c
        if c.proc is not None:
            c.stop(signal.SIGKILL)


def cm_volume(name, cm, **extra):
    return {"name": name, "configMap": {"name": cm, **extra}}


def tree(path):
    """Every entry under `path` (relative), for 'nothing was created' checks."""
    out = []
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(root, n), path))
    return sorted(out)


def test_refreshes_the_kubelets_volumes_of_this_nodes_pods_at_once(cluster):
    cluster.put_configmap("app", {"level": "info"})
    mine = cluster.create_pod("web", [cm_volume("cfg", "app")])
    other = cluster.create_pod("elsewhere", [cm_volume("cfg", "app")], node="other-node")
    # The kubelets have set both up (the other node's only as a stand-in on this disk).
    cluster.kubelet_sets_up(mine, CM, "cfg", {"level": "info"})
    cluster.kubelet_sets_up(other, CM, "cfg", {"level": "info"})
    cluster.start_and_sync()
    cluster.put_configmap("app", {"level": "debug"})
    wait_for(lambda: visible_files(cluster.volume_dir(mine, CM, "cfg")) == {"level": b"debug"},
             what="the new ConfigMap content in this node's pod")
    time.sleep(0.3)
    assert visible_files(cluster.volume_dir(other, CM, "cfg")) == {"level": b"info"}
    # The volume is still the kubelet's: no ..data_tmp or staging debris, nothing recorded as
    # the daemon's own.
    entries = [e.name for e in cluster.volume_dir(mine, CM, "cfg").iterdir()]
    assert "..data_tmp" not in entries
    assert cluster.stop() == 0
    journal = (cluster.state / "ownership.journal").read_text()
    assert mine not in journal


def test_creates_nothing_for_volumes_the_kubelet_has_not_set_up(cluster):
    cluster.put_configmap("app", {"level": "info"})
    cluster.put_secret("tls", {"tls.key": "SECRET-MARKER-1"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app"),
                                     {"name": "tls", "secret": {"secretName": "tls"}}])
    cluster.start_and_sync()
    time.sleep(1.0)
    cluster.put_configmap("app", {"level": "debug"})
    time.sleep(0.5)
    assert tree(cluster.root) == ["pods"]
    # Once the kubelet sets it up (from an older cache), the daemon makes it current.
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "info"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"debug"},
             timeout=5, what="the kubelet's volume refreshed once it exists")
    assert not cluster.volume_dir(uid, SECRET, "tls").exists()
    assert "SECRET-MARKER-1" not in cluster.log()


def test_secret_and_projected_content_with_pod_derived_items_left_as_the_kubelet_wrote_them(
        cluster):
    cluster.put_configmap("app", {"level": "info"})
    cluster.put_secret("tls", {"tls.key": "SECRET-MARKER-2"})
    projected = {"name": "all", "projected": {"sources": [
        {"configMap": {"name": "app"}},
        {"secret": {"name": "tls"}},
        {"downwardAPI": {"items": [{"path": "labels",
                                    "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}}
    token = {"name": "kube-api-access", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
        {"configMap": {"name": "app"}}]}}
    info = {"name": "info", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
    uid = cluster.create_pod("web", [projected, token, info, {"name": "tls", "secret": {"secretName": "tls"}}],
                             labels={"app": "web"})
    kubelet_labels = 'app="web"\nkubelet-view="yes"'
    cluster.kubelet_sets_up(uid, PROJECTED, "all",
                            {"level": "info", "tls.key": "SECRET-MARKER-2", "labels": kubelet_labels})
    cluster.kubelet_sets_up(uid, PROJECTED, "kube-api-access", {"token": "jwt", "level": "info"})
    cluster.kubelet_sets_up(uid, DOWNWARD, "info", {"labels": kubelet_labels})
    cluster.kubelet_sets_up(uid, SECRET, "tls", {"tls.key": "SECRET-MARKER-2"})
    cluster.start_and_sync()
    cluster.put_configmap("app", {"level": "debug"})
    cluster.put_secret("tls", {"tls.key": "SECRET-MARKER-3"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, PROJECTED, "all")) ==
             {"level": b"debug", "tls.key": b"SECRET-MARKER-3", "labels": kubelet_labels.encode()},
             what="projected volume current, downward item carried over")
    wait_for(lambda: visible_files(cluster.volume_dir(uid, SECRET, "tls")) ==
             {"tls.key": b"SECRET-MARKER-3"}, what="secret volume current")
    assert visible_files(cluster.volume_dir(uid, PROJECTED, "kube-api-access")) == \
        {"token": b"jwt", "level": b"info"}
    assert visible_files(cluster.volume_dir(uid, DOWNWARD, "info")) == \
        {"labels": kubelet_labels.encode()}
    log = cluster.log()
    assert 'volume "kube-api-access" of pod "default/web"' in log
    assert 'volume "info" of pod "default/web"' in log
    for marker in ("SECRET-MARKER-2", "SECRET-MARKER-3"):
        assert marker not in log


def test_optional_missing_object_then_created(cluster):
    uid = cluster.create_pod("web", [cm_volume("cfg", "late", optional=True)])
    cluster.kubelet_sets_up(uid, CM, "cfg", {})
    cluster.start_and_sync()
    cluster.put_configmap("late", {"k": "v"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"k": b"v"},
             what="content of the object created after the pod")


def test_deleted_object_keeps_the_content_and_a_failure_posts_a_failed_mount_event(cluster):
    cluster.put_configmap("app", {"level": "info"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app", items=[{"key": "level",
                                                                     "path": "level"}])])
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "info"})
    cluster.start_and_sync()
    cluster.put_configmap("app", {"other": "x"})  # the item's key is gone
    event = wait_for(lambda: [e for e in cluster.events() if e["reason"] == "FailedMount"],
                     what="a FailedMount event")[0]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "web"
    assert event["involvedObject"]["uid"] == uid
    assert event["message"] == ('MountVolume.SetUp failed for volume "cfg" : configmap '
                                'references non-existent config key: level')
    assert event["source"] == {"component": "volumemanager", "host": NODE}
    cluster.delete("/api/v1/namespaces/default/configmaps/app")
    time.sleep(0.5)
    assert visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"info"}


def test_a_403_on_one_object_affects_only_the_volumes_that_read_it(cluster):
    cluster.put_configmap("open", {"k": "1"})
    cluster.put_configmap("closed", {"k": "1"})
    cluster.server.admin("POST", "acl", {"user": DAEMON_USER, "rules": [
        {"verbs": ["get", "list", "watch"], "resources": ["pods"]},
        {"verbs": ["create", "patch", "update"], "resources": ["events"]},
        {"verbs": ["get", "list", "watch"], "resources": ["configmaps"], "names": ["open"]}]})
    uid = cluster.create_pod("web", [cm_volume("a", "open"), cm_volume("b", "closed")])
    cluster.kubelet_sets_up(uid, CM, "a", {"k": "1"})
    cluster.kubelet_sets_up(uid, CM, "b", {"k": "1"})
    cluster.start_and_sync()
    cluster.put_configmap("open", {"k": "2"})
    cluster.put_configmap("closed", {"k": "2"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "a")) == {"k": b"2"},
             what="the readable object's volume current")
    time.sleep(0.5)
    assert visible_files(cluster.volume_dir(uid, CM, "b")) == {"k": b"1"}


def test_an_api_outage_changes_nothing_and_recovery_is_prompt(cluster):
    cluster.put_configmap("app", {"level": "1"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app")])
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    cluster.start_and_sync()
    # Every watch cut, every request answered 503 for a while.
    cluster.server.admin("POST", "faults", {"status": 503, "times": 1000})
    cluster.server.admin("POST", "drop-watches", {"abort": True})
    time.sleep(2)
    assert visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"1"}
    cluster.server.admin("DELETE", "faults")
    cluster.put_configmap("app", {"level": "2"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"2"},
             timeout=15, what="content current after the outage")


def test_mirror_pods_and_terminating_pods(cluster):
    cluster.put_configmap("app", {"level": "1"})
    mirror = cluster.create_pod("static-web", [cm_volume("cfg", "app")],
                                annotations={"kubernetes.io/config.mirror": "abc"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app")])
    cluster.kubelet_sets_up(mirror, CM, "cfg", {"level": "1"})
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    cluster.start_and_sync()
    cluster.put_configmap("app", {"level": "2"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"2"},
             what="the regular pod refreshed")
    time.sleep(0.3)
    assert visible_files(cluster.volume_dir(mirror, CM, "cfg")) == {"level": b"1"}
    # Deletion requested: the pod terminates, its volumes are no longer refreshed.
    cluster.api("DELETE", "/api/v1/namespaces/default/pods/web", expect=(200, 202))
    wait_for(lambda: "is terminating" in cluster.log(), what="the pod seen terminating")
    cluster.put_configmap("app", {"level": "3"})
    time.sleep(0.5)
    assert visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"2"}
    # Deleted for good: the kubelet tears the volume down, the daemon leaves it alone.
    cluster.api("DELETE", "/api/v1/namespaces/default/pods/web?gracePeriodSeconds=0",
                expect=(200, 202, 404))
    time.sleep(0.5)
    assert visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"2"}


def test_swaps_by_a_kubelet_writer_older_are_corrected_newer_are_kept(cluster):
    cluster.put_configmap("app", {"level": "1"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app")])
    vol = cluster.volume_dir(uid, CM, "cfg")
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    cluster.start_and_sync()
    cluster.put_configmap("app", {"level": "2"})
    wait_for(lambda: visible_files(vol) == {"level": b"2"}, what="the daemon's refresh")

    # The kubelet's pod sync writes from a lagging cache: corrected at once.
    kubelet_writer.write(vol, {"level": "1"})
    wait_for(lambda: visible_files(vol) == {"level": b"2"}, timeout=5,
             what="older content written by the kubelet corrected")
    assert "swapped by another writer" in cluster.log()

    # Now the daemon's own watch lags (stalled), and the kubelet writes newer content: a fresh
    # read proves it newer, so it stays; no new -> old -> new.
    cluster.server.admin("POST", "faults", {"verb": "watch", "resource": "configmaps",
                                            "watch": {"stall": True}, "times": -1})
    cluster.server.admin("POST", "drop-watches", {"abort": True})
    time.sleep(0.5)
    cluster.put_configmap("app", {"level": "3"})
    time.sleep(0.3)
    assert visible_files(vol) == {"level": b"2"}  # the daemon has not heard of it
    kubelet_writer.write(vol, {"level": "3"})
    seen = set()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        seen.add(visible_files(vol).get("level"))
        time.sleep(0.005)
    assert seen == {b"3"}
    cluster.server.admin("DELETE", "faults")
