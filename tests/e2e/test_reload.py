"""Reload actions end to end (volumemanager.io/reload): the real binary, real HTTP listeners
standing in for each pod's application, in standalone mode (on 127.0.0.x: the manifests are the
node administrator's) and in cluster mode beside the simulated kubelet, where the daemon and its
API server run in a node network of the test's own and each pod's listener in a network namespace
of its own at its own address (`node_network`, conftest.py): a pod is never on loopback there.
Each listener records every call and, at that moment, reads the volumes: what the application
would read when told to reload."""
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import (NEEDS_ROOT, NODE_IP, configmap, killed_after, pod, secret, visible_files,
                      wait_for)
import kubelet_writer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cluster import CM, PROJECTED, SECRET, Cluster  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from api_servers import SERVERS, api_server  # noqa: E402

SHIM = os.environ.get("VM_IO_ERROR_SHIM", "build/lib/libio_error_shim.so")
RELOAD = "volumemanager.io/reload"
VOLUMES = "volumemanager.io/reload-volumes"
DELAY = "volumemanager.io/reload-delay"


class App:
    """A pod's application: answers `code` (or holds the request until stopped with `hang`) and
    records each call with what its volumes held when the call arrived."""

    def __init__(self, host="127.0.0.1", volumes=None, code=200, hang=False, probe=None,
                 port=0, pod_networks=None):
        """Listens on host:port, in the namespace of the pod network with address `host` when
        `pod_networks` (netns.PodNetworks) is given."""
        self.calls = []
        self.volumes = volumes or {}
        self.probe = probe  # called at each call too (e.g. to read a subPath file)
        self.code = code
        self.hang = hang
        self.stopping = threading.Event()
        app = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                seen = {name: visible_files(d) for name, d in app.volumes.items()}
                probed = app.probe() if app.probe else None
                app.calls.append({"method": self.command, "path": self.path,
                                  "headers": dict(self.headers), "seen": seen, "probe": probed,
                                  "time": time.monotonic()})
                if app.hang:
                    app.stopping.wait(30)
                try:
                    self.send_response(app.code)
                    self.send_header("Content-Length", "11")
                    self.end_headers()
                    self.wfile.write(b"SECRET-BODY")  # never to reach a log or an Event
                except OSError:
                    pass  # the daemon reads the status line and closes

            do_POST = do_PUT = do_GET = _serve

            def log_message(self, *args):
                pass

        if pod_networks is None:
            self.server = ThreadingHTTPServer((host, port), Handler)
        else:
            self.server = ThreadingHTTPServer((host, port), Handler, bind_and_activate=False)
            self.server.socket.close()
            self.server.socket = pod_networks.listen(host, port)
            self.server.server_address = self.server.socket.getsockname()
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path="/-/reload"):
        return f"http://:{self.port}{path}"

    def stop(self):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def apps():
    made = []

    def make(**kw):
        a = App(**kw)
        made.append(a)
        return a
    yield make
    for a in made:
        a.stop()


def quiet(seconds):
    """Lets the daemon run; tests then check that something did NOT happen."""
    time.sleep(seconds)


def debug_state(daemon):
    _, debug = daemon.admin_addresses()
    with urllib.request.urlopen(debug + "/debug/state", timeout=10) as r:
        return json.loads(r.read())


def metrics(daemon):
    probe, _ = daemon.admin_addresses()
    with urllib.request.urlopen(probe + "/metrics", timeout=10) as r:
        return r.read().decode()


def reload_pod(name, uid, volumes, reload, delay="0", extra=None):
    annotations = {RELOAD: reload, DELAY: delay, **(extra or {})}
    return pod(name, volumes, uid=uid, annotations=annotations)


def cm_volume(name, cm):
    return {"name": name, "configMap": {"name": cm}}


# --- standalone ----------------------------------------------------------------------------

def test_one_call_after_a_change_with_the_new_content_in_full_none_at_set_up(env, apps):
    env.put_object(configmap("cfg", {"a": "1", "b": "1"}))
    vol = env.volume_dir("u1", CM, "config")
    app = apps(volumes={"config": vol})
    env.put_pod(reload_pod("web", "u1", [cm_volume("config", "cfg")], app.url("/-/reload?x=1")))
    env.start()
    wait_for(lambda: visible_files(vol) == {"a": b"1", "b": b"1"}, what="first set-up")
    quiet(1.0)
    assert app.calls == [], "no action at first set-up: the application reads its files at start"

    env.put_object(configmap("cfg", {"a": "2", "b": "2"}))
    wait_for(lambda: app.calls, what="the reload call")
    call = app.calls[0]
    assert call["method"] == "POST" and call["path"] == "/-/reload?x=1"
    assert call["headers"].get("Content-Length") == "0"
    assert call["seen"] == {"config": {"a": b"2", "b": b"2"}}
    quiet(1.0)
    assert len(app.calls) == 1

    rec = wait_for(lambda: env.records(msg="Reloaded"), what="the Reloaded log line")[0]
    assert rec["result"] == "HTTP 200" and rec["volumes"] == "config"
    assert "SECRET-BODY" not in env.log()
    state = debug_state(env)
    [r] = [r for r in state["reloads"] if r["podUID"] == "u1"]
    assert r["last"]["ok"] is True and r["last"]["volumes"] == ["config"]
    assert r["last"]["results"] == [f"POST http://:{app.port}/-/reload?x=1: HTTP 200"]
    assert 'volumemanager_reload_actions_total{action="http",result="success"} 1' in metrics(env)


def test_a_burst_inside_the_window_is_one_call_for_the_final_content(env, apps):
    env.put_object(configmap("cfg", {"n": "0"}))
    vol = env.volume_dir("u1", CM, "config")
    app = apps(volumes={"config": vol})
    env.put_pod(reload_pod("web", "u1", [cm_volume("config", "cfg")], app.url(), delay="3s"))
    env.start()
    wait_for(lambda: visible_files(vol) == {"n": b"0"}, what="first set-up")
    for i in range(1, 21):
        env.put_object(configmap("cfg", {"n": str(i)}))
        time.sleep(0.02)
    wait_for(lambda: app.calls, what="the reload call", timeout=20)
    assert app.calls[0]["seen"] == {"config": {"n": b"20"}}
    quiet(1.5)
    assert len(app.calls) == 1


def test_a_projected_volume_whose_two_objects_change_together_gives_one_call(env, apps):
    env.put_object(configmap("one", {"a": "1"}))
    env.put_object(configmap("two", {"b": "1"}))
    vol = env.volume_dir("u1", PROJECTED, "both")
    app = apps(volumes={"both": vol})
    projected = {"name": "both", "projected": {"sources": [{"configMap": {"name": "one"}},
                                                           {"configMap": {"name": "two"}}]}}
    env.put_pod(reload_pod("web", "u1", [projected], app.url(), delay="2s"))
    env.start()
    wait_for(lambda: visible_files(vol) == {"a": b"1", "b": b"1"}, what="first set-up")
    env.put_object(configmap("one", {"a": "2"}))
    env.put_object(configmap("two", {"b": "2"}))
    wait_for(lambda: app.calls, what="the reload call", timeout=20)
    assert app.calls[0]["seen"] == {"both": {"a": b"2", "b": b"2"}}
    quiet(1.0)
    assert len(app.calls) == 1


def test_only_annotated_pods_and_their_named_volumes(env, apps):
    env.put_object(configmap("cfg", {"k": "1"}))
    env.put_object(configmap("other", {"k": "1"}))
    told = apps()
    untold = apps()
    env.put_pod(reload_pod("told", "u1", [cm_volume("config", "cfg"), cm_volume("misc", "other")],
                           told.url(), extra={VOLUMES: "config"}))
    env.put_pod(pod("untold", [cm_volume("config", "cfg")], uid="u2"))
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("u2", CM, "config")), what="set-up")
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "misc")), what="set-up")
    env.put_object(configmap("other", {"k": "2"}))  # not a trigger of "told"
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "misc")) == {"k": b"2"},
             what="misc refreshed")
    env.put_object(configmap("cfg", {"k": "2"}))
    wait_for(lambda: told.calls, what="the reload call")
    quiet(1.0)
    assert len(told.calls) == 1
    assert untold.calls == []


def test_a_host_in_the_annotation_is_refused_never_called_and_the_volume_still_kept(env, apps):
    victim = apps(host="127.0.0.2")
    env.put_object(configmap("cfg", {"k": "1"}))
    vol = env.volume_dir("u1", CM, "config")
    env.put_pod(reload_pod("web", "u1", [cm_volume("config", "cfg")],
                           f"http://127.0.0.2:{victim.port}/-/reload"))
    env.start()
    wait_for(lambda: visible_files(vol) == {"k": b"1"}, what="first set-up")
    [rec] = wait_for(lambda: env.records(msg=lambda m: m.startswith("Reload annotation refused")),
                     what="the refusal")
    assert rec["pod"] == "default/web-e2e-node" and "the host must be empty" in rec["err"]
    env.put_object(configmap("cfg", {"k": "2"}))
    wait_for(lambda: visible_files(vol) == {"k": b"2"}, what="the volume kept current")
    quiet(1.0)
    assert victim.calls == []
    assert "volumemanager_reload_annotation_errors 1" in metrics(env)
    [r] = [r for r in debug_state(env)["reloads"] if r["podUID"] == "u1"]
    assert "the host must be empty" in r["annotationError"]


def test_failing_listeners_are_retried_within_bounds_and_hung_ones_delay_no_other_pod(env, apps):
    env.put_object(configmap("cfg", {"k": "1"}))
    failing = apps(code=503)
    hung = apps(hang=True)
    quick = apps()
    env.put_pod(reload_pod("failing", "u1", [cm_volume("config", "cfg")], failing.url()))
    env.put_pod(reload_pod("hung", "u2", [cm_volume("config", "cfg")], hung.url()))
    env.put_pod(reload_pod("quick", "u3", [cm_volume("config", "cfg")], quick.url()))
    env.start()
    for uid in ("u1", "u2", "u3"):
        wait_for(lambda: visible_files(env.volume_dir(uid, CM, "config")), what="set-up")
    env.put_object(configmap("cfg", {"k": "2"}))
    wait_for(lambda: quick.calls and hung.calls, what="the calls")
    assert not env.records(msg="Reloaded", pod="default/hung-e2e-node"), "the hung call is still open"
    # 4 attempts, 1 s, 2 s and 4 s apart, then a ReloadFailed.
    [failed] = wait_for(lambda: env.records(msg="ReloadFailed", pod="default/failing-e2e-node"),
                        timeout=30, what="the failing pod's final result")
    assert failed["result"] == "HTTP 503" and int(failed["attempts"]) == 4
    assert len(failing.calls) == 4
    assert "SECRET-BODY" not in env.log()
    hung.stopping.set()


def test_a_volume_failing_since_its_secret_went_never_holds_back_the_reload_of_the_others(
        env, apps):
    """Issue 42, item 1: the pod's Secret is removed after the pod started; its volume fails, and
    keeps its last content, for as long as the Secret is missing. A change of the ConfigMap is
    told all the same, at once, and the run names the volume that fails."""
    env.put_object(configmap("cfg", {"k": "1"}))
    env.put_object(secret("creds", string_data={"token": "SECRET-MARKER-42"}))
    cfg = env.volume_dir("u1", CM, "config")
    creds = env.volume_dir("u1", SECRET, "creds")
    app = apps(volumes={"config": cfg})
    env.put_pod(reload_pod("web", "u1", [cm_volume("config", "cfg"),
                                         {"name": "creds", "secret": {"secretName": "creds"}}],
                           app.url()))
    env.start()
    wait_for(lambda: visible_files(cfg) == {"k": b"1"} and bool(visible_files(creds)),
             what="first set-up")
    (env.objects / "secret-creds.yaml").unlink()
    wait_for(lambda: env.records(msg="FailedMount: MountVolume.SetUp failed", volume="creds"),
             what="the Secret's volume failing")

    env.put_object(configmap("cfg", {"k": "2"}))
    wait_for(lambda: app.calls, what="the reload call (not held back by the failing volume)")
    assert app.calls[0]["seen"] == {"config": {"k": b"2"}}
    [rec] = wait_for(lambda: env.records(msg="Reloaded"), what="the Reloaded log line")
    assert rec["volumes"] == "config" and rec["failingVolumes"] == "creds", rec
    [r] = [r for r in debug_state(env)["reloads"] if r["podUID"] == "u1"]
    assert r["pendingVolumes"] == [] and r["last"]["failingVolumes"] == ["creds"], r
    assert visible_files(creds) == {"token": b"SECRET-MARKER-42"}, \
        "the failing volume keeps its last good content"
    quiet(1.0)
    assert len(app.calls) == 1


def test_a_volume_made_current_without_a_write_lets_the_waiting_reload_run(env, apps):
    """Issue 42, item 2: under the Get strategy each resync marks every volume of the pod for a
    remount. One that comes while the write of a change runs is left for after it: the write's
    end finds a remount still due, and the reload waits for it. That remount reads the inputs the
    write just wrote and ends on the loop, with no operation: the reload must run then, not at
    the volume's disk check 10 minutes later. The I/O shim keeps the write running (each unlink
    below the root dir sleeps 3 s, and the write unlinks the link of the key the change removed)
    while resyncs come every 1 to 1.5 s."""
    shim = Path(SHIM).resolve()
    assert shim.is_file(), f"{shim}: the I/O-error shim is not built (make test-build)"
    env.wrapper = ["/usr/bin/env", f"LD_PRELOAD={shim}", f"VM_IO_ERROR_DIR={env.root}",
                   "VM_IO_SLOW_UNLINK_MS=3000"]
    env.put_object(configmap("cfg", {"a": "1", "b": "1"}))
    vol = env.volume_dir("u1", CM, "config")
    app = apps(volumes={"config": vol})
    env.put_pod(reload_pod("web", "u1", [cm_volume("config", "cfg")], app.url()))
    env.start("--config-map-and-secret-change-detection-strategy", "Get", "--sync-frequency", "1s")
    wait_for(lambda: visible_files(vol) == {"a": b"1", "b": b"1"}, what="first set-up")

    env.put_object(configmap("cfg", {"a": "2"}))  # found by the next resync
    wait_for(lambda: visible_files(vol) == {"a": b"2"}, what="the new version published")
    assert (vol / "b").is_symlink(), "the write should still be removing b's link"
    wait_for(lambda: env.records(msg="Volume updated", volume="config"), what="the write's end")
    wait_for(lambda: app.calls, timeout=5,
             what="the reload call once the remount after the write found nothing to write")
    assert app.calls[0]["seen"] == {"config": {"a": b"2"}}
    quiet(2.5)  # resyncs meanwhile change nothing: no other call
    assert len(app.calls) == 1


class HungListeners:
    """Listening sockets on 127.0.0.1, one per pod, that accept each connection and never answer,
    all served by one thread; `accepted[i]` lists when socket i accepted each connection (a call
    made), by time.monotonic(). A connection is closed once the daemon closes it (its deadline)."""

    def __init__(self, count):
        self.selector = selectors.DefaultSelector()
        self.sockets = []
        self.accepted = [[] for _ in range(count)]
        for i in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(16)
            s.setblocking(False)
            self.selector.register(s, selectors.EVENT_READ, ("listen", i))
            self.sockets.append(s)
        self.ports = [s.getsockname()[1] for s in self.sockets]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping.is_set():
            for key, _ in self.selector.select(timeout=0.1):
                kind, i = key.data
                if kind == "listen":
                    try:
                        conn, _ = key.fileobj.accept()
                    except BlockingIOError:
                        continue
                    self.accepted[i].append(time.monotonic())
                    conn.setblocking(False)
                    self.selector.register(conn, selectors.EVENT_READ, ("conn", i))
                    continue
                try:
                    data = key.fileobj.recv(4096)  # the request: read, never answered
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.selector.unregister(key.fileobj)
                    key.fileobj.close()

    def stop(self):
        self.stopping.set()
        self.thread.join()
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()


def test_a_healthy_pods_call_is_made_before_any_hung_pods_second_attempt(env, apps):
    """Issue 42: with a first come, first served queue, the retries of pods whose listener accepts
    and never answers waited ahead of a pod that answers. One slot (so no two calls start at
    once and their order is plain) and a 500 ms deadline: 12 hung pods' first attempts take 6 s;
    the first has run out of time and its second attempt is due before the healthy pod's object
    changes. The healthy pod's call must still be made before any hung pod's second attempt.
    Asserted on the order of the calls, not on their times."""
    hung = HungListeners(12)
    try:
        env.put_object(configmap("shared", {"k": "1"}))
        env.put_object(configmap("own", {"k": "1"}))
        healthy = apps()
        uids = [f"h{i}" for i in range(len(hung.ports))]
        for uid, port in zip(uids, hung.ports):
            env.put_pod(reload_pod(f"hung-{uid}", uid, [cm_volume("config", "shared")],
                                   f"http://:{port}/-/reload"))
        env.put_pod(reload_pod("healthy", "ok", [cm_volume("config", "own")], healthy.url()))
        env.start("--reload-max-concurrent", "1", "--reload-timeout", "500ms")
        for uid in uids + ["ok"]:
            wait_for(lambda: visible_files(env.volume_dir(uid, CM, "config")), timeout=30,
                     what=f"the set-up of {uid}")

        env.put_object(configmap("shared", {"k": "2"}))
        # A second hung pod's first attempt is made once the first one ran out of time; that
        # one's second attempt is due 1 s later (the first retry's delay).
        wait_for(lambda: sum(1 for a in hung.accepted if a) >= 2, timeout=30,
                 what="a hung pod's first attempt out of time")
        quiet(1.5)
        assert not any(len(a) > 1 for a in hung.accepted), \
            "no second attempt made before all 12 first attempts (the test's premise)"
        env.put_object(configmap("own", {"k": "2"}))

        wait_for(lambda: healthy.calls, timeout=60, what="the healthy pod's call")
        made = healthy.calls[0]["time"]
        wait_for(lambda: any(len(a) > 1 for a in hung.accepted), timeout=60,
                 what="a hung pod's second attempt")
        second_attempts = sorted(a[1] for a in hung.accepted if len(a) > 1)
        first_attempts = sum(1 for a in hung.accepted if a and a[0] < made)
        assert made < second_attempts[0], (
            f"the healthy pod's call came after {sum(1 for t in second_attempts if t < made)} "
            f"hung pods' second attempts (and after {first_attempts} first attempts)")
    finally:
        hung.stop()


# --- cluster mode ----------------------------------------------------------------------------

@pytest.fixture(params=SERVERS)
def cluster(request, tmp_path, node_network):
    """The daemon against the test server, or the real kube-apiserver (api_servers.py), both in
    the test's node network; `cluster.pods` gives pods their own addresses."""
    with api_server(request.param, tmp_path) as server, \
            killed_after(Cluster(tmp_path, server, request.param)) as c:
        c.pods = node_network.pods
        yield c


def pod_app(c, apps, name, **kw):
    """A pod network for pod `name` and its application listening there: (ip, app)."""
    ip = c.pods.set_up(name)
    return ip, apps(host=ip, pod_networks=c.pods, **kw)


def create_running_pod(c, name, reload, ip, host_ip="192.0.2.10", host_network=False,
                       delay="0", container="app", container_id="a" * 64):
    """Creates a pod of the node with a configMap volume of ConfigMap `app` and a reload action,
    then reports it running at `ip` as its kubelet would (the status subresource: a created pod
    is Pending with no IP). The daemon is started after this, so it sees the pod running from its
    first list. Returns the pod's uid."""
    pod_obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "default",
                            "annotations": {RELOAD: reload, DELAY: delay}},
               "spec": {"nodeName": "e2e-node", "hostNetwork": host_network,
                        "containers": [{"name": container, "image": "busybox",
                                        "volumeMounts": [{"name": "config",
                                                          "mountPath": "/etc/app"}]}],
                        "volumes": [cm_volume("config", "app")]}}
    uid = c.api("POST", "/api/v1/namespaces/default/pods", pod_obj)["metadata"]["uid"]
    reported = c.kubelet_reports_status(name, {
        "phase": "Running", "podIP": ip, "hostIP": host_ip,
        "containerStatuses": [{"name": container, "containerID": "containerd://" + container_id,
                               "state": {"running": {"startedAt": "2020-01-01T00:00:00Z"}}}]})
    assert (reported["status"]["phase"], reported["status"]["podIP"]) == ("Running", ip)
    return uid


def start_beside_one_app(c, apps):
    """ConfigMap `app` at level 1, a running pod `web` at an address of its own whose application
    reads its volume at each call, the kubelet's set-up, the daemon started and synced. Returns
    (uid, app, vol)."""
    c.put_configmap("app", {"level": "1"})
    ip, app = pod_app(c, apps, "web")
    uid = create_running_pod(c, "web", app.url(), ip)
    vol = c.volume_dir(uid, CM, "config")
    app.volumes = {"config": vol}
    c.kubelet_sets_up(uid, CM, "config", {"level": "1"})
    c.start()
    c.wait_synced("configmap default/app")
    return uid, app, vol


def test_cluster_mode_calls_the_pods_own_ip_once_the_kubelets_volume_is_refreshed(cluster, apps):
    c = cluster
    uid, app, vol = start_beside_one_app(c, apps)
    quiet(1.0)
    assert app.calls == []
    c.put_configmap("app", {"level": "2"})
    wait_for(lambda: app.calls, what="the reload call")
    assert app.calls[0]["seen"] == {"config": {"level": b"2"}}
    assert app.calls[0]["headers"]["Host"] == f"{app.server.server_address[0]}:{app.port}"
    events = wait_for(lambda: [e for e in c.events() if e["reason"] == "Reloaded"],
                      what="the Reloaded Event")
    assert events[0]["type"] == "Normal"
    assert events[0]["involvedObject"]["uid"] == uid
    assert "HTTP 200" in events[0]["message"] and "configmap/default/app@" in events[0]["message"]
    assert "SECRET-BODY" not in json.dumps(c.events())

    # The kubelet's sync writes older content: no call for it; the daemon corrects it, and the
    # one call that follows sees the final content.
    calls = len(app.calls)
    kubelet_writer.write(vol, {"level": "1"})
    wait_for(lambda: len(app.calls) > calls, what="the call after the correction")
    assert app.calls[calls]["seen"] == {"config": {"level": b"2"}}
    quiet(1.0)
    assert len(app.calls) == calls + 1


def test_cluster_mode_refuses_host_network_and_the_nodes_own_ip(cluster, apps):
    """A hostNetwork pod's own IP is the node's whatever its status says: its HTTP action is
    refused once, when the pod appears (issue 42, item 6b: it was refused only at the first
    change, a ReloadFailed Event per change). The daemon's own rule, so configured policy (issue
    44, item 5): one Normal Event, no Warning. Addresses that may change (a podIP that is the
    node's) are refused at each attempt."""
    c = cluster
    c.put_configmap("app", {"level": "1"})
    # The node's application, on the node's address in the daemon's network.
    node_app = apps(host=NODE_IP)
    uids = [create_running_pod(c, "hostnet", node_app.url(), NODE_IP, host_network=True),
            create_running_pod(c, "own-ip", node_app.url(), NODE_IP, host_ip=NODE_IP),
            create_running_pod(c, "node-net", node_app.url(), NODE_IP)]
    for uid in uids:
        c.kubelet_sets_up(uid, CM, "config", {"level": "1"})
    c.start()
    c.wait_synced("configmap default/app")

    def not_run():
        return [e for e in c.events() if e["reason"] == "ReloadActionsNotRun"]
    [refused] = wait_for(not_run, what="the hostNetwork pod's actions refused at its start")
    assert refused["involvedObject"]["name"] == "hostnet" and refused["type"] == "Normal"
    assert "hostNetwork" in refused["message"], refused
    assert "still kept current" in refused["message"], refused
    assert not [e for e in c.events() if e["type"] == "Warning"]

    c.put_configmap("app", {"level": "2"})
    for uid in uids:
        wait_for(lambda: visible_files(c.volume_dir(uid, CM, "config")) == {"level": b"2"},
                 what="the volume kept current")
    failed = wait_for(lambda: len([e for e in c.events() if e["reason"] == "ReloadFailed"]) == 2
                      and [e for e in c.events() if e["reason"] == "ReloadFailed"],
                      what="a ReloadFailed Event for each pod whose podIP is the node's")
    quiet(1.0)
    failed = [e for e in c.events() if e["reason"] == "ReloadFailed"]
    by_pod = {e["involvedObject"]["name"]: e["message"] for e in failed}
    assert set(by_pod) == {"own-ip", "node-net"}, by_pod
    assert f"status.podIP {NODE_IP} is the node's own IP (status.hostIP)" in by_pod["own-ip"], \
        by_pod
    assert f"status.podIP {NODE_IP} is an address of the node's own network" in \
        by_pod["node-net"], by_pod
    assert all(e["type"] == "Warning" for e in failed)
    # Said once: the change did not say it again; no Warning for the hostNetwork pod.
    assert [(e["involvedObject"]["name"], e.get("count", 1)) for e in not_run()] == [("hostnet", 1)]
    assert not [e for e in c.events() if e["type"] == "Warning"
                and e["involvedObject"]["name"] == "hostnet"]
    assert node_app.calls == []


def test_cluster_mode_never_calls_loopback_in_any_spelling(cluster, apps):
    """A pod status naming a loopback address, in IPv4 or any IPv6 form, is refused: the node's
    loopback-only services (and the daemon's own admin ports) are never called."""
    c = cluster
    c.put_configmap("app", {"level": "1"})
    first = apps(host="127.0.0.1")
    second = apps(host="127.0.0.2", port=first.port)
    spellings = {"mapped": "::ffff:127.0.0.1", "expanded": "0:0:0:0:0:ffff:7f00:1",
                 "other": "127.0.0.2", "mapped-other": "::ffff:127.0.0.2"}
    uids = [create_running_pod(c, name, first.url(), ip) for name, ip in spellings.items()]
    for uid in uids:
        c.kubelet_sets_up(uid, CM, "config", {"level": "1"})
    c.start()
    c.wait_synced("configmap default/app")
    c.put_configmap("app", {"level": "2"})
    failed = wait_for(lambda: len([e for e in c.events() if e["reason"] == "ReloadFailed"]) == 4
                      and [e for e in c.events() if e["reason"] == "ReloadFailed"],
                      what="four ReloadFailed Events")
    by_pod = {e["involvedObject"]["name"]: e["message"] for e in failed}
    for name, canonical in (("mapped", "127.0.0.1"), ("expanded", "127.0.0.1"),
                            ("other", "127.0.0.2"), ("mapped-other", "127.0.0.2")):
        assert f"status.podIP {canonical} is a loopback address" in by_pod[name], by_pod
    quiet(1.0)
    assert first.calls == [] and second.calls == []
    assert not [e for e in c.events() if e["reason"] == "Reloaded"]


@pytest.mark.test_server_only("the daemon's ConfigMap watch stalled (fault hook) so that the kubelet "
                              "is newer")
def test_cluster_mode_a_newer_kubelet_swap_the_daemon_confirms_is_one_call(cluster, apps):
    """The daemon's watch lags and the kubelet writes the newer content first: the daemon's fresh
    read confirms it and publishes nothing, and the application is told once, for that content."""
    c = cluster
    uid, app, vol = start_beside_one_app(c, apps)
    c.server.admin("POST", "faults", {"verb": "watch", "resource": "configmaps",
                                      "watch": {"stall": True}, "times": -1})
    c.server.admin("POST", "drop-watches", {"abort": True})
    time.sleep(0.5)
    c.put_configmap("app", {"level": "2"})
    kubelet_writer.write(vol, {"level": "2"})
    wait_for(lambda: app.calls, what="the call after the kubelet's swap was confirmed")
    assert app.calls[0]["seen"] == {"config": {"level": b"2"}}
    assert visible_files(vol) == {"level": b"2"}
    quiet(1.0)
    assert len(app.calls) == 1
    c.server.admin("DELETE", "faults")


def writable_cgroup_v1(tmp_path):
    """A cgroup v1 hierarchy mounted read-write (not cpuset, whose cgroups need cpus and mems
    first), else a named one mounted on a dir of the test's own: (mount point, mounted here)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, target, fstype, options = line.split()[:4]
        if fstype == "cgroup" and options.split(",")[0] == "rw" and "cpuset" not in options:
            return Path(target), False
    target = tmp_path / "cgroup"
    target.mkdir()
    done = subprocess.run(["mount", "-t", "cgroup", "-o", "none,name=vmtest", "cgroup",
                           str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"{NEEDS_ROOT}: mounting a cgroup v1 hierarchy: {done.stderr.strip()}")
    return target, True


@pytest.fixture
def container_process(tmp_path):
    """Starts, on demand, a container's main process as a runtime would: PID 1 of a new PID
    namespace, moved into `kubepods/burstable/pod<uid>/<container id>` of a cgroup v1 hierarchy
    (under a dir of the test's own), recording each SIGHUP it catches; `.cgroup(uid, id)` makes
    and returns such a cgroup for a process of the test's choice. Every process in them is killed
    and the cgroups removed after."""
    if os.geteuid() != 0:
        pytest.skip(f"{NEEDS_ROOT}: moves a process into a cgroup and a PID namespace")
    hierarchy, mounted = writable_cgroup_v1(tmp_path)
    base = hierarchy / f"vmtest-e2e-{os.getpid()}"
    started = []

    def container_cgroup(pod_uid, container_id):
        cgroup = base / "kubepods" / "burstable" / f"pod{pod_uid}" / container_id
        cgroup.mkdir(parents=True, exist_ok=True)
        return cgroup

    def start(pod_uid, container_id, record):
        cgroup = container_cgroup(pod_uid, container_id)
        script = (f"trap 'echo hup >> {record}' HUP; echo ready >> {record}; "
                  "while :; do sleep 0.1; done")
        proc = subprocess.Popen(["unshare", "--pid", "--fork", "/bin/sh", "-c", script])
        started.append(proc)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        pid = int(wait_for(lambda: children.read_text().split(), what="the namespace's PID 1")[0])
        (cgroup / "cgroup.procs").write_text(str(pid))
        wait_for(lambda: Path(record).exists() and "ready" in Path(record).read_text(),
                 what="the process's traps set")
        return pid

    start.cgroup = container_cgroup  # (pod uid, container id): that container's cgroup, made
    try:
        yield start
    finally:
        if base.exists():
            # Deepest first: a cgroup goes once it has no process and no child.
            for d in sorted((p for p in base.rglob("*") if p.is_dir()),
                            key=lambda p: len(p.parts), reverse=True) + [base]:
                for pid in (d / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                wait_for(lambda d=d: not (d / "cgroup.procs").read_text().strip(),
                         what=f"{d} emptied")
                d.rmdir()
        for proc in started:
            proc.kill()
            proc.wait()
        if mounted:
            subprocess.run(["umount", str(hierarchy)], check=False)


def test_cluster_mode_a_signal_action_reaches_the_containers_main_process(cluster, container_process,
                                                                         tmp_path):
    c = cluster
    c.put_configmap("app", {"level": "1"})
    container_id = "c" * 64
    uid = create_running_pod(c, "nginx", "signal:SIGHUP", c.pods.set_up("nginx"),
                             container="nginx", container_id=container_id)
    record = tmp_path / "signals"
    container_process(uid, container_id, record)
    c.kubelet_sets_up(uid, CM, "config", {"level": "1"})
    c.start("--reload-signals")
    c.wait_synced("configmap default/app")
    c.put_configmap("app", {"level": "2"})
    wait_for(lambda: "hup" in record.read_text(), what="the SIGHUP caught")
    events = wait_for(lambda: [e for e in c.events() if e["reason"] == "Reloaded"],
                      what="the Reloaded Event")
    assert "SIGHUP to PID 1" in events[0]["message"], events[0]["message"]
    assert record.read_text().count("hup") == 1


def test_cluster_mode_a_signal_never_reaches_a_container_of_the_daemons_own_pod(
        cluster, container_process, tmp_path):
    """The daemon in a private cgroup namespace rooted at its own container's cgroup (containerd's
    default on cgroup v2; here on the test's cgroup v1 hierarchy): a sibling container of its pod
    reads `/../<id>` in /proc/<pid>/cgroup, with no pod component. A pod whose containerStatuses
    name that ID gets a ReloadFailed saying why, and the sibling no signal."""
    c = cluster
    c.put_configmap("app", {"level": "1"})
    daemon_pod, sibling_id = "0d0d0d0d-0000-4000-8000-000000000001", "d" * 64
    record = tmp_path / "signals"
    sibling = container_process(daemon_pod, sibling_id, record)
    daemon_cgroup = container_process.cgroup(daemon_pod, "e" * 64)
    uid = create_running_pod(c, "nginx", "signal:SIGHUP", c.pods.set_up("nginx"),
                             container="nginx", container_id=sibling_id)
    c.kubelet_sets_up(uid, CM, "config", {"level": "1"})
    # Into its container's cgroup, then a cgroup namespace of its own rooted there.
    c.wrapper = ["/bin/sh", "-c",
                 f'echo $$ > {daemon_cgroup}/cgroup.procs && exec unshare --cgroup "$@"', "sh"]
    c.start("--reload-signals")
    c.wait_synced("configmap default/app")
    # What the daemon reads of the sibling: its container, no pod component above it.
    seen = subprocess.run(["nsenter", "-t", str(c.proc.pid), "-C", "cat",
                           f"/proc/{sibling}/cgroup"], capture_output=True, text=True, check=True)
    assert f":/../{sibling_id}\n" in seen.stdout, seen.stdout
    c.put_configmap("app", {"level": "2"})
    [outcome] = wait_for(lambda: [e for e in c.events()
                                  if e["reason"] in ("Reloaded", "ReloadFailed")],
                         what="the reload action's Event")
    assert outcome["reason"] == "ReloadFailed", outcome["message"]
    assert f'cgroup "/../{sibling_id}", under no pod\'s component' in outcome["message"], \
        outcome["message"]
    assert "a container of the daemon's own pod, which no action may signal; not sent" in \
        outcome["message"], outcome["message"]
    quiet(0.5)
    assert "hup" not in record.read_text()
    c.stop()
