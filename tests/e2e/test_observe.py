"""Observe mode (--observe), end to end: the daemon reads pods and objects, compares each volume
with the disk and reports what a normal run would change, and changes nothing under the root dir
or the state dir (a tree hash of names, types, modes, sizes and mtimes before and after). The
volumes it reports are exactly those a normal run of the same set-up writes."""
import hashlib
import json
import os
import re
import stat
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import (SECRET_MARKER, configmap, killed_after, mounts_under, pod, readyz,
                      secret, visible_files, wait_for)
import kubelet_writer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cluster import Cluster  # noqa: E402
from test_reload import App, create_running_pod  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from api_servers import SERVERS, api_server  # noqa: E402

CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"



def tree_hash(*dirs):
    """Names, types, modes, sizes and mtimes of everything at and below each dir (no link
    followed); an absent dir hashes as absent."""
    h = hashlib.sha256()
    listing = []
    for top in map(Path, dirs):
        if not os.path.lexists(top):
            listing.append(f"{top} absent")
            continue
        paths = [top]
        for dirpath, dirnames, filenames in os.walk(top):
            paths += [Path(dirpath) / n for n in dirnames + filenames]
        for p in sorted(paths):
            st = os.lstat(p)
            target = os.readlink(p) if stat.S_ISLNK(st.st_mode) else ""
            listing.append(f"{p} {stat.S_IFMT(st.st_mode):o} {stat.S_IMODE(st.st_mode):o} "
                           f"{st.st_size} {st.st_mtime_ns} {target}")
    for line in listing:
        h.update(line.encode() + b"\n")
    return h.hexdigest(), listing


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def get_text(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def observed(debug_url):
    """(podUID, volume) -> the volume's observe entry in /debug/state."""
    state = get_json(debug_url + "/debug/state")
    assert state.get("observe") is True
    return {(v["podUID"], v["volume"]): v["observe"] for v in state["volumes"] if "observe" in v}


def data_targets(root: Path):
    """(podUID, volume) -> what ..data points at, for every volume dir under `root`."""
    out = {}
    for volume in root.glob("pods/*/volumes/*/*"):
        link = volume / "..data"
        out[(volume.parts[-4], volume.name)] = os.readlink(link) if link.is_symlink() else None
    return out


def addresses_since(daemon, start):
    """(probe, debug) base URLs the daemon's run that logged after offset `start` serves."""
    address = r"([0-9a-f.:\[\]]+)"

    def find():
        log = daemon.log()[start:]
        probe = re.findall(r"serving /healthz, /readyz and /metrics on " + address, log)
        debug = re.findall(r"serving /debug/state and /configz on " + address, log)
        return probe and debug and (f"http://{probe[-1]}", f"http://{debug[-1]}")
    return wait_for(find, timeout=30, what="the admin endpoints' addresses in the log")


def differing_metric(probe_url):
    text = get_text(probe_url + "/metrics")
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^volumemanager_observe_volumes_differing\{reason="([a-z_]+)"\} (\S+)$', text, re.M)}


def test_standalone_self_ownership_changes_nothing_and_reports_what_a_normal_run_writes(env):
    cm_vol = lambda name, cm: {"name": name, "configMap": {"name": cm}}
    env.put_object(configmap("cfg", {"a": "1", "b": "2"}))
    env.put_object(configmap("other", {"x": "1"}))
    env.put_object(secret("tls", {"key": SECRET_MARKER + "-one"}))
    env.put_pod(pod("web", [cm_vol("cfg", "cfg"), {"name": "tls", "secret": {"secretName": "tls"}}],
                    uid="u-web"))
    env.put_pod(pod("keep", [cm_vol("v", "other")], uid="u-keep"))
    env.put_pod(pod("gone", [cm_vol("v", "other")], uid="u-gone"))
    # A normal run sets them up (and records them in its journal).
    env.start()
    for uid, plugin, volume in [("u-web", CM, "cfg"), ("u-web", SECRET, "tls"),
                                ("u-keep", CM, "v"), ("u-gone", CM, "v")]:
        d = env.volume_dir(uid, plugin, volume)
        wait_for(lambda: visible_files(d), timeout=30, what=f"{uid}/{volume} set up")
    assert env.stop() == 0

    # What the next run has to do: update one volume (a key changed, one added), tear one down
    # (its pod removed), set one up (a new pod); two stay current.
    env.put_object(configmap("cfg", {"a": "1", "b": "22", "c": "3"}))
    (env.pods / "gone.yaml").unlink()
    env.put_pod(pod("new", [cm_vol("v", "other")], uid="u-new"))
    before, before_listing = tree_hash(env.root, env.state)
    targets_before = data_targets(env.root)

    log_start = len(env.log())
    env.start("--observe")
    probe, debug = addresses_since(env, log_start)
    expected = {("u-web", "cfg"): "content", ("u-gone", "v"): "tear_down",
                ("u-new", "v"): "not_set_up", ("u-web", "tls"): None, ("u-keep", "v"): None}

    def all_observed():
        seen = observed(debug)
        return all(k in seen and seen[k].get("state") in ("differs", "current")
                   for k in expected) and seen
    seen = wait_for(all_observed, timeout=30, what="every volume observed in /debug/state")
    for key, reason in expected.items():
        assert seen[key]["reason"] == reason, (key, seen[key])
        assert seen[key]["state"] == ("current" if reason is None else "differs"), (key, seen[key])
    assert seen[("u-web", "cfg")]["changed"] == ["b"]
    assert seen[("u-web", "cfg")]["added"] == ["c"]
    assert seen[("u-web", "cfg")]["removed"] == []
    assert seen[("u-new", "v")]["added"] == ["x"]
    metric = wait_for(lambda: differing_metric(probe), what="the observe metric")
    assert metric == {"content": 1, "not_set_up": 1, "modes": 0, "tear_down": 1}, metric
    # Said at info, once per volume that differs, with names only; the start says what it skips.
    log = env.log()[log_start:]
    assert "observe mode: writing nothing. No node lock is taken" in log
    assert "acquiring the node's lock" not in log
    assert "MountVolume.SetUp succeeded" not in log and "Volume updated" not in log
    lines = [r for r in env.records(reason=lambda r: r in ("content", "tear_down", "not_set_up"))
             if r.get("msg", "").startswith("Observe: would")]
    assert {(r["podUID"], r["volume"], r["reason"]) for r in lines} == {
        ("u-web", "cfg", "content"), ("u-gone", "v", "tear_down"), ("u-new", "v", "not_set_up")}
    web = next(r for r in lines if r["volume"] == "cfg")
    assert web["changed"] == "b" and web["added"] == "c" and web["pod"] == "default/web-e2e-node"
    assert env.stop() == 0

    after, after_listing = tree_hash(env.root, env.state)
    assert after == before, [l for l in after_listing if l not in before_listing] + \
        [l for l in before_listing if l not in after_listing]
    reported = {k for k, o in seen.items() if o["wouldWrite"]}

    # The same set-up run normally: the volumes it writes (created, published anew or removed).
    log_start = len(env.log())
    env.start()
    new_dir = env.volume_dir("u-new", CM, "v")
    wait_for(lambda: visible_files(new_dir) == {"x": b"1"}, timeout=30, what="the new volume")
    wait_for(lambda: not env.volume_dir("u-gone", CM, "v").exists(), timeout=30,
             what="the teardown")
    wait_for(lambda: visible_files(env.volume_dir("u-web", CM, "cfg")).get("c") == b"3",
             timeout=30, what="the update")
    wait_for(lambda: readyz(env)[0] == 200, timeout=30, what="ready")
    assert env.stop() == 0
    targets_after = data_targets(env.root)
    written = {k for k in set(targets_before) | set(targets_after)
               if targets_before.get(k) != targets_after.get(k)}
    assert written == reported == {("u-web", "cfg"), ("u-gone", "v"), ("u-new", "v")}, \
        (written, reported)


def test_observe_on_an_empty_node_creates_no_dir(env):
    """Not even the root dir's pods/ or the state dir: nothing to lock, nothing to record."""
    env.put_object(configmap("cfg", {"a": "1"}))
    env.put_object(secret("s", {"k": SECRET_MARKER}))
    env.put_pod(pod("p", [{"name": "v", "configMap": {"name": "cfg"}},
                          {"name": "s", "secret": {"secretName": "s"}}], uid="u1"))
    env.start("--observe")
    _, debug = env.admin_addresses(timeout=30)
    seen = wait_for(lambda: observed(debug).get(("u1", "v"), {}).get("reason") and
                    observed(debug)[("u1", "v")], timeout=30, what="the volume")
    assert seen["state"] == "differs" and seen["reason"] == "not_set_up"
    assert seen["wouldWrite"] is True
    secret_seen = wait_for(lambda: observed(debug).get(("u1", "s"), {}).get("reason") and
                           observed(debug)[("u1", "s")], timeout=30, what="secret")
    assert secret_seen["reason"] == "not_set_up" and secret_seen["added"] == ["k"]
    assert mounts_under(env.root) == []  # no tmpfs for the secret volume
    assert list(env.root.iterdir()) == []
    assert not env.state.exists()
    assert env.stop() == 0
    assert list(env.root.iterdir()) == [] and not env.state.exists()


# --- cluster mode, beside the simulated kubelet ------------------------------------------------

@pytest.fixture(params=SERVERS)
def cluster(request, tmp_path):
    """The daemon against the test server, or the real kube-apiserver (api_servers.py)."""
    with api_server(request.param, tmp_path) as server, \
            killed_after(Cluster(tmp_path, server, request.param)) as c:
        yield c


def test_cluster_kubelet_ownership_changes_nothing_and_reports_what_a_normal_run_writes(cluster):
    c = cluster
    cm_vol = lambda name, cm: {"name": name, "configMap": {"name": cm}}
    c.put_configmap("app", {"level": "1"})
    c.put_configmap("other", {"x": "1"})
    c.put_secret("tls", {"key": SECRET_MARKER + "-cluster"})
    web = c.create_pod("web", [cm_vol("cfg", "app"),
                               {"name": "tls", "secret": {"secretName": "tls"}}])
    keep = c.create_pod("keep", [cm_vol("cfg", "other")])
    waiting = c.create_pod("waiting", [cm_vol("cfg", "other")])  # the kubelet has not set it up
    # The kubelet's set-up, from a cache older than the API for `app`.
    c.kubelet_sets_up(web, CM, "cfg", {"level": "1"})
    c.kubelet_sets_up(web, SECRET, "tls", {"key": SECRET_MARKER + "-cluster"})
    c.kubelet_sets_up(keep, CM, "cfg", {"x": "1"})
    c.put_configmap("app", {"level": "2", "new": "n"})
    c.state.mkdir()  # as a node where the daemon ran before; observe creates nothing there
    before, before_listing = tree_hash(c.root, c.state)
    targets_before = data_targets(c.root)

    c.start("--observe")
    probe, debug = addresses_since(c, 0)
    expected = {(web, "cfg"): "content", (web, "tls"): None, (keep, "cfg"): None}

    def all_observed():
        seen = observed(debug)
        return all(k in seen and seen[k].get("state") in ("differs", "current")
                   for k in expected) and seen
    seen = wait_for(all_observed, timeout=30, what="every set-up volume observed")
    for key, reason in expected.items():
        assert seen[key]["reason"] == reason, (key, seen[key])
    assert seen[(web, "cfg")]["changed"] == ["level"] and seen[(web, "cfg")]["added"] == ["new"]
    # Not set up by the kubelet: a normal run would not write it either.
    assert seen[(waiting, "cfg")] == {"state": "not_compared"}
    assert differing_metric(probe) == {"content": 1, "not_set_up": 0, "modes": 0, "tear_down": 0}
    assert c.stop() == 0
    log = c.log()
    assert "acquiring the node's lock" not in log and "holding the node's lock" not in log
    after, after_listing = tree_hash(c.root, c.state)
    assert after == before, [l for l in after_listing if l not in before_listing] + \
        [l for l in before_listing if l not in after_listing]
    assert c.events() == []
    reported = {k for k, o in seen.items() if o.get("wouldWrite")}

    # The same set-up run normally.
    log_start = len(c.log())
    c.start()
    wait_for(lambda: visible_files(c.volume_dir(web, CM, "cfg")) == {"level": b"2", "new": b"n"},
             timeout=30, what="the normal run's refresh")
    wait_for(lambda: readyz(c)[0] == 200, timeout=30, what="ready")
    assert c.stop() == 0
    targets_after = data_targets(c.root)
    written = {k for k in set(targets_before) | set(targets_after)
               if targets_before.get(k) != targets_after.get(k)}
    assert written == reported == {(web, "cfg")}, (written, reported)


def test_cluster_a_kubelet_swap_runs_no_reload_action_in_observe_mode(node_network, cluster):
    """A normal run calls the pod's application after a swap of the kubelet's
    (test_reload.py); observe mode says it would, and calls nothing. The daemon and its server in
    the test's node network (set up first: `node_network` before `cluster`), the pod at its own
    address."""
    c = cluster
    ip = node_network.pods.set_up("web")
    app = App(host=ip, pod_networks=node_network.pods)
    try:
        c.put_configmap("app", {"level": "1"})
        uid = create_running_pod(c, "web", app.url(), ip)
        vol = c.volume_dir(uid, CM, "config")
        c.kubelet_sets_up(uid, CM, "config", {"level": "1"})
        c.start("--observe")
        _, debug = addresses_since(c, 0)
        wait_for(lambda: observed(debug).get((uid, "config"), {}).get("state") == "current",
                 timeout=30, what="the volume observed current")
        c.put_configmap("app", {"level": "2"})
        wait_for(lambda: observed(debug)[(uid, "config")].get("reason") == "content",
                 timeout=30, what="the change observed")
        kubelet_writer.write(vol, {"level": "2"})  # the kubelet's sync brings it
        reported = lambda: c.records(msg="Observe: would run the reload actions", podUID=uid)
        wait_for(lambda: app.calls or reported(), timeout=30, what="a reload call or its report")
        wait_for(lambda: observed(debug)[(uid, "config")].get("state") == "current",
                 timeout=30, what="the volume current again after the kubelet's swap")
        time.sleep(1.0)  # lets a call that should not happen arrive
        assert app.calls == [], "observe mode called the pod's application"
        assert reported()
        assert c.events() == []
        assert visible_files(vol) == {"level": b"2"}
    finally:
        app.stop()


def test_cluster_self_ownership_creates_no_dir_and_mounts_nothing(cluster):
    c = cluster
    c.put_configmap("app", {"level": "1"})
    c.put_secret("tls", {"key": SECRET_MARKER + "-self"})
    uid = c.create_pod("web", [{"name": "cfg", "configMap": {"name": "app"}},
                               {"name": "tls", "secret": {"secretName": "tls"}}])
    c.start("--observe", "--volume-ownership", "self")
    probe, debug = addresses_since(c, 0)
    for volume, added in (("cfg", ["level"]), ("tls", ["key"])):
        seen = wait_for(lambda: observed(debug).get((uid, volume), {}).get("reason") and
                        observed(debug)[(uid, volume)], timeout=30, what=volume)
        assert seen["reason"] == "not_set_up" and seen["added"] == added, seen
    assert differing_metric(probe)["not_set_up"] == 2
    assert list(c.root.iterdir()) == [] and not c.state.exists()
    assert mounts_under(c.root) == []
    assert c.stop() == 0
    assert list(c.root.iterdir()) == [] and not c.state.exists()
    assert c.events() == []
