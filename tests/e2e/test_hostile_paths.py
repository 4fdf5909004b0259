"""A pod's volume path turned against the node: symlinks planted above an owned volume dir (before
start and while running), bind mounts and a bind loop inside a volume. The real binary, as root,
standalone and in cluster mode: nothing outside the root dir is written, mounted or removed, the
affected volume's error names pod and volume, the daemon stays up, the other volumes are served.
"""
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import (configmap, mounts_under, needs_root, pod, secret, snapshot, visible_files,
                      wait_for)
from test_cluster import CM, SECRET, Cluster, TestApiServer, cm_volume, secret_volume

pytestmark = needs_root("bind mounts, tmpfs")

PLUGIN = {"cfg": CM, "sec": SECRET}


def tree_state(path: Path):
    """Names, types, modes and bytes below `path` (links not followed), and `path` itself."""
    if not path.exists() and not path.is_symlink():
        return None
    return (path.lstat().st_mode, snapshot(path))


def plant_victim(victim: Path, below: list):
    """A directory outside the root that looks like the rest of the volume's path below the
    planted link (so that a daemon that follows the link finds a volume dir there), holding a
    canary in each level and in the volume dir."""
    d = victim
    d.mkdir(parents=True)
    (d / "canary").write_text("must stay\n")
    for name in below:
        d = d / name
        d.mkdir()
        (d / "canary").write_text("must stay\n")
    return d


def replace_with_link(real: Path, target: Path):
    """Moves the real dir aside (the attacker's rename) and plants `real -> target`."""
    real.rename(real.with_name(real.name + ".moved"))
    os.symlink(target, real)


def start_two_pods(env, tmp_path):
    env.put_object(configmap("app", {"k": "v1"}))
    env.put_object(secret("tls", string_data={"key": "SECRET-MARKER-hostile"}))
    env.put_pod(pod("a", [{"name": "cfg", "configMap": {"name": "app"}},
                          {"name": "sec", "secret": {"secretName": "tls"}}], uid="uid-a"))
    env.put_pod(pod("b", [{"name": "cfg", "configMap": {"name": "app"}}], uid="uid-b"))
    env.start()
    for uid in ("uid-a", "uid-b"):
        wait_for(lambda u=uid: visible_files(env.volume_dir(u, CM, "cfg")) == {"k": b"v1"},
                 what=f"{uid}'s configMap volume")
    wait_for(lambda: visible_files(env.volume_dir("uid-a", SECRET, "sec")),
             what="uid-a's secret volume")


def volume_errors(env, uid, volume):
    """Warnings and errors naming the pod (by name and UID) and the volume."""
    return [r for r in env.records()
            if r.get("podUID") == uid and r.get("pod") and r.get("volume") == volume
            and r.get("level") in ("warning", "error")]


def assert_b_still_served(env, value):
    env.put_object(configmap("app", {"k": value}))
    wait_for(lambda: visible_files(env.volume_dir("uid-b", CM, "cfg")) == {"k": value.encode()},
             what="the other pod's volume still refreshed")


# The levels of an owned volume's path where a link can be planted, with the names below them.
LEVELS = {
    "pod dir": (lambda root: root / "pods" / "uid-a", ["volumes", CM, "cfg"]),
    "volumes dir": (lambda root: root / "pods" / "uid-a" / "volumes", [CM, "cfg"]),
    "plugin dir": (lambda root: root / "pods" / "uid-a" / "volumes" / CM, ["cfg"]),
}


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_a_symlink_planted_above_an_owned_volume_while_running_is_never_followed(
        env, tmp_path, level):
    start_two_pods(env, tmp_path)
    where, below = LEVELS[level]
    victim = tmp_path / "victim"
    plant_victim(victim, below)
    before = tree_state(victim)
    replace_with_link(where(env.root), victim)

    # A change makes the daemon write the volume again: refused, the victim untouched.
    assert_b_still_served(env, "v2")
    wait_for(lambda: any("symlink" in (r.get("err", "") + r.get("msg", ""))
                         for r in volume_errors(env, "uid-a", "cfg")),
             what="an error naming pod a, volume cfg and the symlink")
    assert tree_state(victim) == before

    # The pod goes: its teardown must not remove through the link either.
    os.remove(env.pods / "a.yaml")
    assert_b_still_served(env, "v3")
    time.sleep(1.5)  # a teardown attempt and its first retry
    assert tree_state(victim) == before
    assert env.proc.poll() is None, "the daemon must stay up"
    assert [m for m in mounts_under(victim)] == []


def test_symlinks_planted_before_start_at_the_pods_dir_and_a_pod_dir(env, tmp_path):
    victim = tmp_path / "victim"
    plant_victim(victim, ["volumes", CM, "cfg"])
    before = tree_state(victim)
    env.put_object(configmap("app", {"k": "v1"}))
    env.put_object(secret("tls", string_data={"key": "SECRET-MARKER-hostile"}))
    env.put_pod(pod("a", [{"name": "cfg", "configMap": {"name": "app"}},
                          {"name": "sec", "secret": {"secretName": "tls"}}], uid="uid-a"))
    env.put_pod(pod("b", [{"name": "cfg", "configMap": {"name": "app"}}], uid="uid-b"))
    (env.root / "pods").mkdir()
    os.symlink(victim, env.root / "pods" / "uid-a")
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("uid-b", CM, "cfg")) == {"k": b"v1"},
             what="the other pod's volume")
    wait_for(lambda: volume_errors(env, "uid-a", "cfg") and volume_errors(env, "uid-a", "sec"),
             what="errors naming pod a and each of its volumes")
    assert tree_state(victim) == before
    assert mounts_under(victim) == []

    # The whole pods dir a link: nothing is written below it, the daemon stays up.
    env.stop()
    victim2 = tmp_path / "victim2"
    plant_victim(victim2, ["uid-c", "volumes", CM, "cfg"])
    before2 = tree_state(victim2)
    os.rename(env.root / "pods", env.root / "pods.moved")
    os.symlink(victim2, env.root / "pods")
    env.put_pod(pod("c", [{"name": "cfg", "configMap": {"name": "app"}}], uid="uid-c"))
    env.start()
    wait_for(lambda: volume_errors(env, "uid-c", "cfg"), what="an error naming pod c, volume cfg")
    env.put_object(configmap("app", {"k": "v2"}))
    time.sleep(1.0)
    assert tree_state(victim2) == before2
    assert env.proc.poll() is None


def bind(src: Path, dst: Path):
    subprocess.run(["mount", "--bind", str(src), str(dst)], check=True)


def test_teardown_never_empties_a_bind_mount_inside_a_volume(env, tmp_path):
    start_two_pods(env, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "more").write_text("keep too\n")
    before = tree_state(outside)
    vol = env.volume_dir("uid-a", CM, "cfg")
    (vol / "mnt").mkdir()
    bind(outside, vol / "mnt")
    try:
        os.remove(env.pods / "a.yaml")
        wait_for(lambda: any("mount" in r.get("err", "") for r in volume_errors(env, "uid-a", "cfg")),
                 what="a teardown error naming the mount inside volume cfg of pod a")
        assert tree_state(outside) == before
        assert (vol / "mnt" / "precious").exists(), "the bind mount is left in place"
        assert_b_still_served(env, "v2")
    finally:
        subprocess.run(["umount", str(vol / "mnt")], check=False)
    assert tree_state(outside) == before
    # Once the mount is gone, the next attempt removes the volume (backoff: 0.5 s doubling).
    wait_for(lambda: not vol.exists(), timeout=20, what="the volume removed once unbound")
    assert tree_state(outside) == before


def test_a_bind_loop_of_the_pods_dir_inside_a_volume_deletes_no_other_pod(env, tmp_path):
    start_two_pods(env, tmp_path)
    # A file of the kubelet's in pod b's dir, and pod b's live volume: both must survive.
    kubelet_file = env.root / "pods" / "uid-b" / "etc-hosts"
    kubelet_file.write_text("127.0.0.1 localhost\n")
    b_before = snapshot(env.root / "pods" / "uid-b")
    vol = env.volume_dir("uid-a", CM, "cfg")
    (vol / "loop").mkdir()
    bind(env.root / "pods", vol / "loop")
    try:
        os.remove(env.pods / "a.yaml")
        wait_for(lambda: any("mount" in r.get("err", "") for r in volume_errors(env, "uid-a", "cfg")),
                 what="a teardown error naming the bind mount")
        time.sleep(1.0)
        assert kubelet_file.read_text() == "127.0.0.1 localhost\n"
        assert visible_files(env.volume_dir("uid-b", CM, "cfg")) == {"k": b"v1"}
        assert snapshot(env.root / "pods" / "uid-b") == b_before
        assert env.proc.poll() is None
    finally:
        subprocess.run(["umount", "-l", str(vol / "loop")], check=False)


def test_a_foreign_mount_on_an_owned_volume_dir_is_neither_unmounted_nor_emptied(env, tmp_path):
    start_two_pods(env, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep\n")
    before = tree_state(outside)
    vol = env.volume_dir("uid-a", CM, "cfg")
    bind(outside, vol)
    try:
        os.remove(env.pods / "a.yaml")
        wait_for(lambda: any("did not make" in r.get("err", "")
                             for r in volume_errors(env, "uid-a", "cfg")),
                 what="a teardown error: a mount volumemanager did not make")
        assert tree_state(outside) == before
        assert str(vol) in mounts_under(env.root), "the foreign mount stays"
    finally:
        subprocess.run(["umount", "-l", str(vol)], check=False)


@pytest.fixture
def cluster(tmp_path):
    with TestApiServer() as server:
        c = Cluster(tmp_path, server)
        try:
            yield c
        finally:
            if c.proc is not None:
                c.stop(signal.SIGKILL)
            for m in mounts_under(tmp_path):
                subprocess.run(["umount", "-l", m], check=False)


@pytest.mark.test_server_only("links and bind mounts planted on the node; the server only serves the pods")
@pytest.mark.parametrize("ownership", ["kubelet", "self"])
def test_cluster_mode_never_writes_or_removes_through_a_planted_link(cluster, tmp_path, ownership):
    cluster.put_configmap("app", {"k": "v1"})
    a = cluster.create_pod("a", [cm_volume("cfg", "app")])
    b = cluster.create_pod("b", [cm_volume("cfg", "app")])
    if ownership == "kubelet":
        cluster.kubelet_sets_up(a, CM, "cfg", {"k": "v1"})
        cluster.kubelet_sets_up(b, CM, "cfg", {"k": "v1"})
    cluster.start("--volume-ownership", ownership)
    cluster.wait_synced("configmap default/app")
    for uid in (a, b):
        wait_for(lambda u=uid: visible_files(cluster.volume_dir(u, CM, "cfg")) == {"k": b"v1"},
                 what="both volumes")
    victim = tmp_path / "victim"
    plant_victim(victim, [CM, "cfg"])
    # The victim looks set up, so a daemon that followed the link would refresh it.
    shutil.rmtree(victim / CM / "cfg")
    shutil.copytree(cluster.volume_dir(a, CM, "cfg"), victim / CM / "cfg", symlinks=True)
    before = tree_state(victim)
    replace_with_link(cluster.root / "pods" / a / "volumes", victim)
    cluster.put_configmap("app", {"k": "v2"})
    wait_for(lambda: visible_files(cluster.volume_dir(b, CM, "cfg")) == {"k": b"v2"},
             what="the other pod's volume refreshed")
    wait_for(lambda: any("symlink" in r.get("err", "") for r in cluster.records()
                         if r.get("volume") == "cfg" and r.get("podUID") == a),
             what="an error naming pod a's volume cfg and the symlink")
    assert tree_state(victim) == before
    cluster.api("DELETE", "/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0",
                expect=(200, 202))
    time.sleep(1.5)
    assert tree_state(victim) == before
    assert cluster.proc.poll() is None


@pytest.mark.test_server_only("links and bind mounts planted on the node; the server only serves the pods")
def test_cluster_mode_teardown_never_crosses_a_bind_loop(cluster, tmp_path):
    """In cluster mode, with the daemon owning its volumes: pod a's volume holds a bind of the
    root's pods dir; deleting pod a must not delete pod b's live volume nor a kubelet file."""
    cluster.put_configmap("app", {"k": "v1"})
    a = cluster.create_pod("a", [cm_volume("cfg", "app")])
    b = cluster.create_pod("b", [cm_volume("cfg", "app")])
    cluster.start("--volume-ownership", "self")
    cluster.wait_synced("configmap default/app")
    for uid in (a, b):
        wait_for(lambda u=uid: visible_files(cluster.volume_dir(u, CM, "cfg")) == {"k": b"v1"},
                 what="both volumes")
    kubelet_file = cluster.root / "pods" / b / "etc-hosts"
    kubelet_file.write_text("127.0.0.1 localhost\n")
    b_before = snapshot(cluster.root / "pods" / b)
    vol = cluster.volume_dir(a, CM, "cfg")
    (vol / "loop").mkdir()
    bind(cluster.root / "pods", vol / "loop")
    try:
        cluster.api("DELETE", "/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0",
                    expect=(200, 202))
        wait_for(lambda: any("mount point" in r.get("err", "") for r in cluster.records()
                             if r.get("podUID") == a and r.get("volume") == "cfg"),
                 what="a teardown error naming the bind mount in pod a's volume")
        assert snapshot(cluster.root / "pods" / b) == b_before
        assert cluster.proc.poll() is None
    finally:
        subprocess.run(["umount", "-l", str(vol / "loop")], check=False)


# Issue 41, item 6: a directory bound over a pod's plugin dir that already holds a dir named like
# the pod's volume. The daemon must not take that dir for its volume dir: it writes nothing into
# it, removes nothing of it at teardown, and says why (pod, volume, path).
VICTIM_BYTES = b"the victim's own file\n"


def plant_plugin_bind(root: Path, uid: str, volume: str, tmp_path: Path):
    """A dir outside the root holding <volume>/victim, bound over pods/<uid>/volumes/<CM>; the
    plugin dir is made first when missing (as a pod dir's owner could)."""
    planted = tmp_path / "planted"
    (planted / volume).mkdir(parents=True)
    (planted / volume / "victim").write_bytes(VICTIM_BYTES)
    plugin_dir = root / "pods" / uid / "volumes" / CM
    plugin_dir.mkdir(parents=True, exist_ok=True)
    bind(planted, plugin_dir)
    return planted, plugin_dir


def victim_intact(planted: Path, volume: str):
    victim = planted / volume / "victim"
    return victim.is_file() and victim.read_bytes() == VICTIM_BYTES


def foreign_in_debug_state(env):
    """The daemon's /debug/state list of volume dirs it found not to be its own."""
    _, debug = env.admin_addresses()
    with urllib.request.urlopen(debug + "/debug/state", timeout=10) as r:
        return json.loads(r.read())["foreignVolumeDirs"]


def said_why(env, uid, volume, path):
    """A warning or error naming pod and volume, whose text names `path`."""
    return [r for r in volume_errors(env, uid, volume)
            if str(path) in r.get("err", "") + r.get("msg", "") + r.get("dir", "")]


def test_a_dir_bound_over_the_plugin_dir_before_set_up_is_refused_and_never_removed(env, tmp_path):
    env.put_object(configmap("app", {"k": "v1"}))
    env.put_pod(pod("a", [{"name": "c", "configMap": {"name": "app"}}], uid="uid-a"))
    env.put_pod(pod("b", [{"name": "cfg", "configMap": {"name": "app"}}], uid="uid-b"))
    planted, plugin_dir = plant_plugin_bind(env.root, "uid-a", "c", tmp_path)
    try:
        env.start()
        wait_for(lambda: visible_files(env.volume_dir("uid-b", CM, "cfg")) == {"k": b"v1"},
                 what="the other pod's volume")
        time.sleep(1.0)  # pod a's set-up attempts
        written = sorted(p.name for p in (planted / "c").iterdir())
        os.remove(env.pods / "a.yaml")
        assert_b_still_served(env, "v2")
        time.sleep(1.5)  # a teardown attempt and its first retry
        assert victim_intact(planted, "c"), "the victim's file removed"
        assert written == ["victim"], "nothing may be written into the planted dir"
        assert said_why(env, "uid-a", "c", env.volume_dir("uid-a", CM, "c")), \
            "an error naming pod a, volume c and its path"
        assert env.proc.poll() is None
    finally:
        subprocess.run(["umount", "-l", str(plugin_dir)], check=False)
    assert victim_intact(planted, "c")


def test_a_dir_bound_over_an_owned_volumes_plugin_dir_is_left_alone_at_teardown(env, tmp_path):
    start_two_pods(env, tmp_path)
    env.put_pod(pod("a", [{"name": "c", "configMap": {"name": "app"}}], uid="uid-a"))
    wait_for(lambda: visible_files(env.volume_dir("uid-a", CM, "c")) == {"k": b"v1"},
             what="pod a's volume c, set up by the daemon")
    planted, plugin_dir = plant_plugin_bind(env.root, "uid-a", "c", tmp_path)
    try:
        os.remove(env.pods / "a.yaml")
        time.sleep(2.5)  # the manifest settle time (1 s), a teardown attempt and its first retry
        assert victim_intact(planted, "c"), "the victim's file removed"
        assert [r for r in said_why(env, "uid-a", "c", env.volume_dir("uid-a", CM, "c"))
                if "TearDown" in r.get("msg", "")], \
            "a teardown warning naming pod a, volume c and its path"
        assert_b_still_served(env, "v2")
        assert [f["path"] for f in foreign_in_debug_state(env)] == \
            ["pods/uid-a/volumes/kubernetes.io~configmap/c"]
        assert env.proc.poll() is None
    finally:
        subprocess.run(["umount", "-l", str(plugin_dir)], check=False)
    assert victim_intact(planted, "c")


def test_a_dir_bound_over_the_plugin_dir_while_stopped_is_not_adopted(env, tmp_path):
    env.put_object(configmap("app", {"k": "v1"}))
    env.put_pod(pod("a", [{"name": "c", "configMap": {"name": "app"}}], uid="uid-a"))
    env.put_pod(pod("b", [{"name": "cfg", "configMap": {"name": "app"}}], uid="uid-b"))
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("uid-a", CM, "c")) == {"k": b"v1"},
             what="pod a's volume c, set up by the daemon")
    env.stop()
    planted, plugin_dir = plant_plugin_bind(env.root, "uid-a", "c", tmp_path)
    try:
        os.remove(env.pods / "a.yaml")
        env.start()
        wait_for(lambda: visible_files(env.volume_dir("uid-b", CM, "cfg")) == {"k": b"v1"},
                 what="the other pod's volume")
        assert_b_still_served(env, "v2")
        time.sleep(1.5)  # a teardown attempt, if any, and its first retry
        assert victim_intact(planted, "c"), "the victim's file removed"
        assert [r for r in env.records()
                if r.get("level") == "warning"
                and str(env.volume_dir("uid-a", CM, "c")) in r.get("msg", "")], \
            "a warning naming the volume dir that is no longer the daemon's"
        assert [f["path"] for f in foreign_in_debug_state(env)] == \
            ["pods/uid-a/volumes/kubernetes.io~configmap/c"]
        assert env.proc.poll() is None
    finally:
        subprocess.run(["umount", "-l", str(plugin_dir)], check=False)
    assert victim_intact(planted, "c")
