"""End-to-end tests of subPath copies (pods annotated volumemanager.io/update-subpaths: "true"):
the real binary, standalone with self ownership and in cluster mode beside the simulated kubelet.

The test plays the kubelet's subPath set-up exactly: it resolves `<volume>/<key>` through `..data`
to the live version's file, opens it without following links (O_PATH | O_NOFOLLOW) and bind-mounts
/proc/<pid>/fd/<fd> onto `pods/<uid>/volume-subpaths/<volume>/<container>/<index>`; a second bind
of that path stands in for the container's view. Every mount is undone after each test, whatever
happened (the fixtures' finally).
"""
import ctypes
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from conftest import (configmap, mounts_under, needs_root, pod, secret, skip_unless_root,
                      visible_files, wait_for)
import kubelet_writer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from api_servers import SERVERS, api_server  # noqa: E402
from test_cluster import CM, Cluster  # noqa: E402

pytestmark = needs_root("bind-mounts files as the kubelet does for subPath mounts")

ANNOTATION = "volumemanager.io/update-subpaths"
SECRET_PLUGIN = "kubernetes.io~secret"
MS_BIND = 4096
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_void_p]


def bind(source, target):
    if _libc.mount(str(source).encode(), str(target).encode(), None, MS_BIND, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount --bind {source} {target}: {os.strerror(err)}")


def unmount(target):
    subprocess.run(["umount", str(target)], check=True)


def kubelet_binds(root, uid, plugin, volume, container, index, sub_path):
    """The kubelet's subPath bind at container start; returns the bind's path."""
    vol = root / "pods" / uid / "volumes" / plugin / volume
    source = vol / os.readlink(vol / "..data") / sub_path
    target = root / "pods" / uid / "volume-subpaths" / volume / container / str(index)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.touch()
    fd = os.open(source, os.O_PATH | os.O_NOFOLLOW)
    try:
        bind(f"/proc/{os.getpid()}/fd/{fd}", target)
    finally:
        os.close(fd)
    return target


def container_view(tmp, bound, name):
    """A second bind of the subPath bind: what the container reads."""
    view = tmp / f"view-{name}"
    view.touch()
    bind(bound, view)
    return view


def unmount_all(path):
    for m in mounts_under(path):
        subprocess.run(["umount", "-l", m], check=False)


def subpath_pod(name, uid, volumes, annotation=None, sub_path="app.conf"):
    """A pod whose container "app" mounts the whole first volume at index 0 and `sub_path` of it
    at index 1 (as /etc/app.conf)."""
    p = pod(name, volumes, uid=uid,
            annotations={ANNOTATION: annotation} if annotation is not None else None)
    v = volumes[0]["name"]
    p["spec"]["containers"][0]["volumeMounts"] = [
        {"name": v, "mountPath": "/mnt/all"},
        {"name": v, "mountPath": "/etc/app.conf", "subPath": sub_path},
    ]
    return p


def metric(probe_url, name, labels):
    with urllib.request.urlopen(probe_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    want = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return None


def debug_state(debug_url):
    with urllib.request.urlopen(debug_url + "/debug/state", timeout=10) as r:
        return json.loads(r.read())


def skip_unless_mount_listed(path):
    """The daemon finds a volume's filesystem in /proc/self/mountinfo (a bind's root is checked
    against the volume dir's path in it), and refuses a copy when it cannot: so the tests need
    the mount holding `path` listed there. In a chroot it is not (the kernel lists only mounts
    below the process's root): then skipped, saying why."""
    path = os.path.realpath(path)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4].replace("\\040", " ")
        if path == mount_point or path.startswith(mount_point.rstrip("/") + "/"):
            return
    pytest.skip(f"the mount holding {path} is not listed in /proc/self/mountinfo (a chroot?): "
                "the daemon refuses subPath copies there, as it must")


@pytest.fixture
def env_unmounted(env):
    """`env`, with every mount below its dir undone even when the test fails."""
    skip_unless_mount_listed(env.tmp)
    try:
        yield env
    finally:
        if env.proc is not None:
            env.stop()
        unmount_all(env.tmp)


@pytest.mark.parametrize("kind", ["configmap", "secret"])
def test_standalone_self_owned_subpath_follows_swaps_restarts_and_removed_keys(env_unmounted, kind):
    env = env_unmounted
    # A secret volume is a tmpfs of its own (its bind roots are "/<version>/<key>"), a configMap
    # one a dir of the root's filesystem.
    if kind == "configmap":
        plugin, volume = CM, {"name": "cfg", "configMap": {"name": "app"}}

        def put(data):
            env.put_object(configmap("app", data))
    else:
        plugin, volume = SECRET_PLUGIN, {"name": "cfg", "secret": {"secretName": "app"}}

        def put(data):
            env.put_object(secret("app", {k: "SECRET-MARKER-" + v for k, v in data.items()}))

    def content(v):
        return (v if kind == "configmap" else "SECRET-MARKER-" + v).encode()

    put({"app.conf": "listen 80;", "other": "x"})
    env.put_pod(subpath_pod("web", "uid-web", [volume], annotation="true"))
    env.put_pod(subpath_pod("plain", "uid-plain", [volume]))  # no annotation: as the kubelet
    env.start()
    web_vol = env.volume_dir("uid-web", plugin, "cfg")
    plain_vol = env.volume_dir("uid-plain", plugin, "cfg")
    for vol in (web_vol, plain_vol):
        wait_for(lambda vol=vol: visible_files(vol).get("app.conf") == content("listen 80;"),
                 what=f"{vol} set up")
    web = kubelet_binds(env.root, "uid-web", plugin, "cfg", "app", 1, "app.conf")
    plain = kubelet_binds(env.root, "uid-plain", plugin, "cfg", "app", 1, "app.conf")
    web_view = container_view(env.tmp, web, "web")
    plain_view = container_view(env.tmp, plain, "plain")
    first_version = os.readlink(web_vol / "..data")

    put({"app.conf": "listen 8080; # longer", "other": "x"})
    wait_for(lambda: web_view.read_bytes() == content("listen 8080; # longer"),
             what="the new bytes in the annotated pod's subPath file")
    wait_for(lambda: visible_files(plain_vol).get("app.conf") == content("listen 8080; # longer"),
             what="the unannotated pod's volume updated")
    assert plain_view.read_bytes() == content("listen 80;")  # the kubelet's semantics
    # The old version dir is gone (no other writer: at once); the bind still shows the new bytes.
    wait_for(lambda: not (web_vol / first_version).exists(), what="the old version removed")
    assert web_view.read_bytes() == content("listen 8080; # longer")
    assert web.read_bytes() == content("listen 8080; # longer")

    probe, debug = env.admin_addresses()
    wait_for(lambda: (metric(probe, "volumemanager_subpath_copies_total",
                             {"result": "updated"}) or 0) >= 1,
             what="the updated copy counted")
    state = debug_state(debug)
    [entry] = [v for v in state["volumes"] if v["podUID"] == "uid-web"]
    [copy] = entry["subPathCopies"]
    assert copy["container"] == "app" and copy["index"] == 1 and copy["subPath"] == "app.conf"
    # The last write's: the one that updated it, or a later one that found it current.
    assert copy["result"] in ("updated", "current")
    assert copy["version"] == os.readlink(web_vol / "..data")
    # The removal queue renames a version before removing it; the bind's root follows.
    assert (copy["boundVersion"] == first_version
            or copy["boundVersion"].startswith("..volumemanager_removing.")), copy
    [plain_entry] = [v for v in state["volumes"] if v["podUID"] == "uid-plain"]
    assert "subPathCopies" not in plain_entry

    # The container restarts: the kubelet binds the live file. The next change reaches it too.
    unmount(web_view)
    unmount(web)
    web = kubelet_binds(env.root, "uid-web", plugin, "cfg", "app", 1, "app.conf")
    web_view = container_view(env.tmp, web, "web2")
    put({"app.conf": "short", "other": "x"})
    wait_for(lambda: web_view.read_bytes() == content("short"),
             what="the new bytes after a container restart")

    # A key removed: the bound file keeps its bytes, and the refusal is said.
    put({"other": "x2"})
    wait_for(lambda: env.records(msg="FailedSubPathUpdate",
                                 err=lambda e: "no longer in the volume" in e),
             what="the removed key reported")
    assert web_view.read_bytes() == content("short")
    line = env.records(msg="FailedSubPathUpdate")[0]
    assert line["pod"] == "default/web-e2e-node" and line["volume"] == "cfg" and line["container"] == "app"
    assert (metric(probe, "volumemanager_subpath_copies_total", {"result": "refused"}) or 0) >= 1


def test_standalone_hostile_subpath_targets_are_left_alone(env_unmounted):
    env = env_unmounted
    env.put_object(configmap("app", {"app.conf": "v1", "other": "o1"}))
    p = subpath_pod("web", "uid-web", [{"name": "cfg", "configMap": {"name": "app"}}],
                    annotation="true")
    # index 1: app.conf; index 2: other; index 3: app.conf again; index 4: subPathExpr.
    p["spec"]["containers"][0]["volumeMounts"] += [
        {"name": "cfg", "mountPath": "/etc/other", "subPath": "other"},
        {"name": "cfg", "mountPath": "/etc/third", "subPath": "app.conf"},
        {"name": "cfg", "mountPath": "/etc/expr", "subPathExpr": "$(POD_NAME)"},
    ]
    env.put_pod(p)
    env.start()
    vol = env.volume_dir("uid-web", CM, "cfg")
    wait_for(lambda: visible_files(vol).get("app.conf") == b"v1", what="set up")
    victim = env.tmp / "victim"
    victim.write_text("victim")
    subpaths = env.root / "pods" / "uid-web" / "volume-subpaths" / "cfg" / "app"
    subpaths.mkdir(parents=True)
    (subpaths / "1").symlink_to(victim)  # a symlink to a victim file
    (subpaths / "2").touch()
    bind(victim, subpaths / "2")  # an unrelated file bound there
    # a file of the volume, but another key than index 3 names (an index that does not match)
    kubelet_binds(env.root, "uid-web", CM, "cfg", "app", 3, "other")
    env.put_object(configmap("app", {"app.conf": "v2", "other": "o2"}))
    def said():
        text = "\n".join(r["subPath"] + "@" + r["err"]
                         for r in env.records(msg="FailedSubPathUpdate"))
        return ("a symlink, not the kubelet's bind; not followed" in text
                and re.search(r"other@.*2: bound to .*victim", text)
                and re.search(r"app\.conf@.*3: bound to .*other", text)
                and "subPathExpr is not updated" in text)
    wait_for(said, what="each refusal said, with why")
    # (index 3 is the live file of "other" until the change; the check of its bind fails all the
    # same: it is not the file "app.conf".)
    assert victim.read_text() == "victim"
    assert (subpaths / "3").read_bytes() == b"o1"


@pytest.fixture(params=SERVERS)
def cluster_unmounted(request, tmp_path):
    skip_unless_mount_listed(tmp_path)
    with api_server(request.param, tmp_path) as server:
        c = Cluster(tmp_path, server, request.param)
        try:
            yield c
        finally:
            if c.proc is not None:
                c.stop()
            unmount_all(tmp_path)


def test_cluster_mode_beside_the_kubelet_subpath_gets_the_new_bytes_and_events(cluster_unmounted):
    skip_unless_root("bind-mounts files as the kubelet does for subPath mounts")
    cluster = cluster_unmounted
    cluster.put_configmap("app", {"app.conf": "v1"})
    uids = {}
    for name, annotation in (("web", "true"), ("plain", None), ("bad", "yes")):
        p = subpath_pod(name, None, [{"name": "cfg", "configMap": {"name": "app"}}],
                        annotation=annotation)
        p["metadata"].pop("uid", None)
        p["metadata"]["namespace"] = "default"
        p["spec"]["nodeName"] = "e2e-node"
        uids[name] = cluster.api("POST", "/api/v1/namespaces/default/pods", p)["metadata"]["uid"]
        cluster.kubelet_sets_up(uids[name], CM, "cfg", {"app.conf": "v1"})
    views = {}
    for name, uid in uids.items():
        bound = kubelet_binds(cluster.root, uid, CM, "cfg", "app", 1, "app.conf")
        views[name] = container_view(cluster.tmp, bound, name)
    cluster.start()
    cluster.wait_synced("configmap default/app")
    cluster.put_configmap("app", {"app.conf": "v2"})
    wait_for(lambda: views["web"].read_bytes() == b"v2", what="the subPath file updated")
    for name in ("plain", "bad"):
        wait_for(lambda name=name: visible_files(cluster.volume_dir(uids[name], CM, "cfg")) ==
                 {"app.conf": b"v2"}, what=f"{name}'s volume kept current")
    assert views["plain"].read_bytes() == b"v1"
    assert views["bad"].read_bytes() == b"v1"
    event = wait_for(lambda: [e for e in cluster.events() if e["reason"] == "FailedSubPathUpdate"],
                     what="a FailedSubPathUpdate event")[0]
    assert event["involvedObject"]["name"] == "bad"
    assert event["type"] == "Warning"
    assert 'annotation volumemanager.io/update-subpaths: "yes" is neither' in event["message"]

    # The kubelet's pod sync gets to a change first (the daemon is down): at its start the
    # daemon's write publishes nothing (the bytes are there), and the bound file follows all the
    # same.
    assert cluster.stop() == 0
    cluster.put_configmap("app", {"app.conf": "v3"})
    kubelet_writer.write(cluster.volume_dir(uids["web"], CM, "cfg"), {"app.conf": "v3"})
    assert views["web"].read_bytes() == b"v2"
    cluster.start()
    wait_for(lambda: views["web"].read_bytes() == b"v3", what="v3 in the subPath file")
    assert views["plain"].read_bytes() == b"v1"


def test_cluster_mode_a_container_not_started_yet_is_no_failure(cluster_unmounted):
    """Issue 42, item 6c: the kubelet binds a subPath file when the container starts, to the
    version live then. Before that (an init container still running, an image being pulled)
    nothing is bound: no FailedSubPathUpdate Warning, no warning line; the copy is counted
    `not_bound`. Once the container has started, the next change reaches its bound file."""
    skip_unless_root("bind-mounts files as the kubelet does for subPath mounts")
    cluster = cluster_unmounted
    cluster.put_configmap("app", {"app.conf": "v1"})
    p = subpath_pod("web", None, [{"name": "cfg", "configMap": {"name": "app"}}],
                    annotation="true")
    p["metadata"].pop("uid", None)
    p["metadata"]["namespace"] = "default"
    p["spec"]["nodeName"] = "e2e-node"
    uid = cluster.api("POST", "/api/v1/namespaces/default/pods", p)["metadata"]["uid"]
    # The kubelet has set the volume up; the container waits (pulling its image): no bind yet.
    cluster.kubelet_sets_up(uid, CM, "cfg", {"app.conf": "v1"})
    cluster.kubelet_reports_status("web", {
        "phase": "Pending",
        "containerStatuses": [{"name": "app", "ready": False, "restartCount": 0,
                               "image": "busybox", "imageID": "",
                               "state": {"waiting": {"reason": "ContainerCreating"}}}]})
    cluster.start()
    cluster.wait_synced("configmap default/app")
    cluster.put_configmap("app", {"app.conf": "v2"})
    vol = cluster.volume_dir(uid, CM, "cfg")
    wait_for(lambda: visible_files(vol) == {"app.conf": b"v2"}, what="the volume kept current")
    probe, debug = cluster.admin_addresses()
    wait_for(lambda: (metric(probe, "volumemanager_subpath_copies_total",
                             {"result": "not_bound"}) or 0) >= 1,
             what="the copy counted not_bound")
    [entry] = [v for v in debug_state(debug)["volumes"] if v["podUID"] == uid]
    [copy] = entry["subPathCopies"]
    assert copy["result"] == "not_bound", copy
    assert not [e for e in cluster.events() if e["reason"] == "FailedSubPathUpdate"], \
        cluster.events()
    assert not cluster.records(msg="FailedSubPathUpdate")
    assert (metric(probe, "volumemanager_subpath_copies_total", {"result": "refused"}) or 0) == 0

    # The container starts: the kubelet binds the live file (v2). The next change reaches it.
    bound = kubelet_binds(cluster.root, uid, CM, "cfg", "app", 1, "app.conf")
    view = container_view(cluster.tmp, bound, "web")
    assert view.read_bytes() == b"v2"
    cluster.put_configmap("app", {"app.conf": "v3"})
    wait_for(lambda: view.read_bytes() == b"v3", what="v3 in the subPath file")
    assert not [e for e in cluster.events() if e["reason"] == "FailedSubPathUpdate"]


def test_a_reload_action_fires_only_after_the_subpath_copy(env_unmounted):
    """Both annotations: the application, told to reload, reads its subPath file and finds the
    new bytes there (the copy runs inside the write, before the action)."""
    from test_reload import App  # a listener that reads at each call
    env = env_unmounted
    env.put_object(configmap("app", {"app.conf": "listen 80;"}))
    p = subpath_pod("web", "uid-web", [{"name": "cfg", "configMap": {"name": "app"}}],
                    annotation="true")
    app = App()
    try:
        p["metadata"]["annotations"].update({"volumemanager.io/reload": app.url(),
                                             "volumemanager.io/reload-delay": "0"})
        env.put_pod(p)
        env.start()
        vol = env.volume_dir("uid-web", CM, "cfg")
        wait_for(lambda: visible_files(vol).get("app.conf") == b"listen 80;", what="set up")
        bound = kubelet_binds(env.root, "uid-web", CM, "cfg", "app", 1, "app.conf")
        view = container_view(env.tmp, bound, "web")
        app.probe = view.read_bytes  # what the container reads when told
        env.put_object(configmap("app", {"app.conf": "listen 8080;"}))
        wait_for(lambda: app.calls, what="the reload call")
        assert app.calls[0]["probe"] == b"listen 8080;"
    finally:
        app.stop()
