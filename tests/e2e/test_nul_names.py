"""A NUL byte in an item path must never write outside the root dir.

`a/..\\0x/..\\0x/.../victim/PWNED` has no `..` element, so it passed every path rule; but each
system call reads a name only up to its NUL, so every `..\\0x` was `..` and the daemon (root on
every node) created `PWNED` wherever the path aimed. Here it aims at `victim/`, a sibling of the
root dir (tmp/root, tmp/victim), from an item of each volume kind (configMap, secret with mode
0755, projected, downwardAPI), through manifests (JSON `\\u0000`, YAML `"\\0"`) and through the
test API server (the daemon setting volumes up itself, and with the default kubelet ownership, an
optional ConfigMap whose key appears after the kubelet's set-up).

Each case asserts: nothing appears in tmp/victim and no `PWNED` anywhere under tmp; the daemon
stays up; its error names the pod, the volume's field and the item path (NUL shown as \\x00);
another pod's volumes are served, and in kubelet ownership the kubelet's other volume of the same
pod is left as it was. The pod itself is refused whole, as any pod that fails API validation is
(a pod whose volume cannot be mounted never starts anyway).
"""
import json
import os
import time
from pathlib import Path

import pytest
import yaml

from conftest import NODE, killed_after, pod, snapshot, visible_files, wait_for
from test_bad_inputs import log_line_with
from api_servers import SERVERS, api_server
from test_cluster import CM, Cluster

# From a file in a version dir: ..<ts> -> volume -> plugin -> volumes -> <uid> -> pods -> root
# -> tmp is 7 levels; the first "..\0x" only undoes "a". One more would climb above tmp, so the
# path aims exactly at tmp/victim.
ATTACK = "a/" + "..\0x/" * 8 + "victim/PWNED"
SHOWN = "a/..\\x00x/..\\x00x"  # how the error quotes it
NUL_MSG = "must not contain a NUL byte"

KINDS = {
    "configmap": ({"configMap": {"name": "evil-cm", "items": [{"key": "k", "path": ATTACK}]}},
                  "configMap.items[0].path"),
    "secret-0755": ({"secret": {"secretName": "evil-secret", "defaultMode": 0o755,
                                "items": [{"key": "k", "path": ATTACK, "mode": 0o755}]}},
                    "secret.items[0].path"),
    "projected": ({"projected": {"sources": [
                      {"configMap": {"name": "evil-cm", "items": [{"key": "k", "path": "fine"}]}},
                      {"secret": {"name": "evil-secret",
                                  "items": [{"key": "k", "path": ATTACK}]}}]}},
                  "projected.sources[1].secret.items[0].path"),
    "downwardapi": ({"downwardAPI": {"items": [{"path": ATTACK,
                                                "fieldRef": {"fieldPath": "metadata.name"}}]}},
                    "downwardAPI.items[0].path"),
}


def pwned(tmp: Path):
    """Every entry named PWNED under tmp, and whatever is in tmp/victim."""
    found = [os.path.join(d, n) for d, dirs, files in os.walk(tmp) for n in dirs + files
             if n.startswith("PWNED")]
    victim = tmp / "victim"
    return found + [str(p) for p in victim.iterdir()] if victim.exists() else found + ["victim gone"]


def assert_nothing_escaped(tmp: Path):
    assert pwned(tmp) == [], "created outside the root dir"


def wait_for_error_or_escape(log, tmp, expect, timeout=10):
    """The log line holding every substring of `expect`; fails at once if anything escaped."""
    def done():
        assert_nothing_escaped(tmp)
        return log_line_with(log(), expect)
    return wait_for(done, timeout=timeout, what=f"a log line with {expect}")


# --- standalone: manifests ------------------------------------------------------------------

def standalone_objects(env):
    env.put_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "evil-cm"},
                    "data": {"k": "owned"}})
    env.put_object({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "evil-secret"},
                    "stringData": {"k": "#!/bin/sh\necho SECRET-MARKER-NUL\n"}})
    env.put_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "good"},
                    "data": {"level": "info"}})


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_manifest_item_path_with_a_nul_writes_nothing_outside_the_root(env, kind, fmt):
    (env.tmp / "victim").mkdir()
    standalone_objects(env)
    env.put_pod(pod("bystander", [{"name": "cfg", "configMap": {"name": "good"}}],
                    uid="bystander-uid"))
    source, field = KINDS[kind]
    evil = pod("evil", [{"name": "fine", "configMap": {"name": "good"}},
                        {"name": "bad", **source}], uid="evil-uid")
    if fmt == "json":
        text = json.dumps(evil)
        assert "\\u0000" in text
    else:
        text = yaml.safe_dump(evil)
        assert '\\0' in text
    (env.pods / f"evil.{fmt}").write_text(text)
    env.start("--no-tmpfs")
    bystander = env.volume_dir("bystander-uid", CM, "cfg")
    wait_for(lambda: visible_files(bystander) == {"level": b"info"}, what="the bystander's volume")
    line = wait_for_error_or_escape(env.log, env.tmp, [
        f"evil.{fmt}", "pods/evil:", f"spec.volumes[1].{field}", SHOWN, NUL_MSG])
    assert "\0" not in line
    time.sleep(0.5)
    assert_nothing_escaped(env.tmp)
    assert env.proc.poll() is None, "the daemon exited"
    assert not (env.root / "pods" / "evil-uid").exists()
    # Still serving: a change reaches the bystander.
    env.put_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "good"},
                    "data": {"level": "debug"}})
    wait_for(lambda: visible_files(bystander) == {"level": b"debug"},
             what="the bystander's volume refreshed")
    assert_nothing_escaped(env.tmp)


def test_manifest_nul_in_an_item_key_and_a_volume_name_is_refused(env):
    (env.tmp / "victim").mkdir()
    standalone_objects(env)
    env.put_pod(pod("bystander", [{"name": "cfg", "configMap": {"name": "good"}}],
                    uid="bystander-uid"))
    env.put_pod(pod("keyed", [{"name": "v", "configMap": {
        "name": "evil-cm", "items": [{"key": "k\0/../../x", "path": "p"}]}}], uid="keyed-uid"))
    env.put_pod(pod("named", [{"name": "v\0..", "configMap": {"name": "good"}}], uid="named-uid"))
    env.start("--no-tmpfs")
    wait_for(lambda: visible_files(env.volume_dir("bystander-uid", CM, "cfg")) ==
             {"level": b"info"}, what="the bystander's volume")
    wait_for_error_or_escape(env.log, env.tmp, [
        "keyed.yaml", "pods/keyed:", "spec.volumes[0].configMap.items[0].key",
        "k\\x00/../../x", NUL_MSG])
    wait_for_error_or_escape(env.log, env.tmp, [
        "named.yaml", "pods/named:", "spec.volumes[0].name", "v\\x00..", NUL_MSG])
    assert env.proc.poll() is None
    assert not (env.root / "pods" / "keyed-uid").exists()
    assert not (env.root / "pods" / "named-uid").exists()
    assert_nothing_escaped(env.tmp)


def test_manifest_nul_in_a_configmap_key_is_refused(env):
    (env.tmp / "victim").mkdir()
    env.put_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "evil-cm"},
                    "data": {"..\0x": "owned", "ok": "1"}})
    env.put_pod(pod("evil", [{"name": "all", "configMap": {"name": "evil-cm", "optional": True}}],
                    uid="evil-uid"))
    env.start("--no-tmpfs")
    wait_for_error_or_escape(env.log, env.tmp, [
        "configmaps/evil-cm", "data[..\\x00x]", NUL_MSG])
    time.sleep(0.5)
    assert env.proc.poll() is None
    assert_nothing_escaped(env.tmp)


# --- cluster mode: the test API server and the real kube-apiserver ---------------------------

@pytest.fixture(params=SERVERS)
def cluster(request, tmp_path):
    with api_server(request.param, tmp_path) as server, \
            killed_after(Cluster(tmp_path, server, request.param)) as c:
        yield c


def cluster_objects(c):
    c.put_configmap("evil-cm", {"k": "owned"})
    c.put_secret("evil-secret", {"k": "#!/bin/sh\necho SECRET-MARKER-NUL\n"})
    c.put_configmap("good", {"level": "info"})


def test_the_api_server_stores_and_serves_a_nul_in_an_item_path(cluster):
    """The premise of the cluster cases: the API server takes the path (kube-apiserver 1.20
    validates item paths for `..` segments, not for a NUL byte)."""
    uid = cluster.create_pod("evil", [{"name": "bad", **KINDS["configmap"][0]}])
    served = cluster.api("GET", "/api/v1/namespaces/default/pods/evil")
    assert served["metadata"]["uid"] == uid
    assert served["spec"]["volumes"][0]["configMap"]["items"][0]["path"] == ATTACK


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_api_pod_item_path_with_a_nul_writes_nothing_outside_the_root(cluster, kind):
    tmp = cluster.tmp
    (tmp / "victim").mkdir()
    cluster_objects(cluster)
    bystander = cluster.create_pod("bystander", [{"name": "cfg", "configMap": {"name": "good"}}])
    source, field = KINDS[kind]
    cluster.create_pod("evil", [{"name": "fine", "configMap": {"name": "good"}},
                                {"name": "bad", **source}])
    cluster.start("--volume-ownership", "self", "--no-tmpfs")
    volume = cluster.volume_dir(bystander, CM, "cfg")
    wait_for(lambda: visible_files(volume) == {"level": b"info"}, what="the bystander's volume")
    line = wait_for_error_or_escape(cluster.log, tmp, [
        "default/evil", "pods/evil", f"spec.volumes[1].{field}", SHOWN, NUL_MSG])
    assert "\0" not in line
    time.sleep(0.5)
    assert_nothing_escaped(tmp)
    assert cluster.proc.poll() is None, "the daemon exited"
    cluster.put_configmap("good", {"level": "debug"})
    wait_for(lambda: visible_files(volume) == {"level": b"debug"},
             what="the bystander's volume refreshed")
    assert_nothing_escaped(tmp)


def test_kubelet_ownership_optional_key_added_after_the_kubelets_set_up(cluster):
    """The kubelet has set the volume up without the item (the optional ConfigMap had no such
    key); the key arrives later, and the daemon, which refreshes what the kubelet set up, must
    not write the item."""
    tmp = cluster.tmp
    (tmp / "victim").mkdir()
    cluster.put_configmap("good", {"level": "info"})
    items = [{"key": "k", "path": ATTACK}]
    uid = cluster.create_pod("evil", [
        {"name": "fine", "configMap": {"name": "good"}},
        {"name": "late", "configMap": {"name": "late", "optional": True, "items": items}}])
    other = cluster.create_pod("bystander", [{"name": "cfg", "configMap": {"name": "good"}}])
    cluster.kubelet_sets_up(uid, CM, "fine", {"level": "info"})
    cluster.kubelet_sets_up(uid, CM, "late", {})
    cluster.kubelet_sets_up(other, CM, "cfg", {"level": "info"})
    fine_before = snapshot(cluster.volume_dir(uid, CM, "fine"))
    cluster.start()  # the default in cluster mode: --volume-ownership kubelet
    cluster.wait_synced("configmap default/good")
    cluster.put_configmap("late", {"k": "owned"})
    cluster.put_configmap("good", {"level": "debug"})
    volume = cluster.volume_dir(other, CM, "cfg")
    wait_for(lambda: (assert_nothing_escaped(tmp), visible_files(volume))[1] ==
             {"level": b"debug"}, what="the bystander's volume refreshed")
    wait_for_error_or_escape(cluster.log, tmp, [
        "default/evil", "spec.volumes[1].configMap.items[0].path", SHOWN, NUL_MSG])
    time.sleep(1.0)
    assert_nothing_escaped(tmp)
    assert cluster.proc.poll() is None, "the daemon exited"
    # The kubelet's volumes of the refused pod are left as the kubelet made them.
    assert visible_files(cluster.volume_dir(uid, CM, "late")) == {}
    assert snapshot(cluster.volume_dir(uid, CM, "fine")) == fine_before
