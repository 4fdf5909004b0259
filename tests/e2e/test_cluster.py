"""End-to-end tests of the volumemanager binary in cluster mode, beside a (simulated) kubelet.

The real binary runs with --kubeconfig against tests/apiserver/kube-test-apiserver; the test plays
the kubelet: it sets volumes up with the kubelet's writer algorithm (kubelet_writer.py) and
rewrites them as the kubelet's pod sync would. The daemon must refresh exactly those volumes, at
once, and create, remove or touch nothing else.

Every test that uses the `cluster` fixture runs twice against the test server: `http1`, the
daemon talking to it directly (HTTP/1.1 over TLS, text logs), and `h2`, through nghttpx (Debian
nghttp2-proxy) as an HTTP/2 TLS front (ALPN h2, the test server its TLS backend; the daemon logs
with --log-format json); and once as `real`, against the real kube-apiserver v1.20.2 (HTTP/2 by
ALPN, the chart's RBAC for the daemon's service account) when VM_API_SERVERS names it
(api_servers.py; tests/realkube/README.md), unless marked `test_server_only`. Every Secret
value a test writes is a marker: after each test it must appear in no daemon log line and in no
Event, neither as is nor base64-encoded.
"""
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import BIN, DaemonProcess, snapshot, visible_files, wait_for
from netns import relay
import kubelet_writer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from harness import TestApiServer, free_port  # noqa: E402
from api_servers import DAEMON_TOKEN, DAEMON_USER, NODE, NODE_TOKEN, SERVERS, \
    api_server  # noqa: E402,F401
CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
PROJECTED = "kubernetes.io~projected"
DOWNWARD = "kubernetes.io~downward-api"
NGHTTPX = shutil.which("nghttpx") or "/usr/sbin/nghttpx"

# The reflectors' retry delay (kubeclient/backoff.h, client-go's): doubling up to a 30 s cap, each
# wait drawn from [d, d + jitter * d) with jitter 1.0. Once an outage ends, a change made during it
# must be on disk within the longest such wait plus 1 s. A bound for wait_for, not a measurement:
# the tests pass in a second or two after the fault ends.
BACKOFF_CAP_S = 30.0
BACKOFF_JITTER = 1.0
RECOVERY_BOUND_S = BACKOFF_CAP_S * (1 + BACKOFF_JITTER) + 1



def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def answered(code):
    return lambda r: r.get("code") == code


def is_watch(r):
    return r["query"].get("watch") in ("true", "1")


class Http2Front:
    """nghttpx in front of the test server: TLS with the test server's own certificate (so the
    daemon's kubeconfig keeps its CA), HTTP/2 by ALPN, the test server as a TLS backend (not
    verified: it is a test server). Watches stream through it: no read timeout can end a quiet
    stream. Its access log has one line per request as the front received it, written as soon as
    the response headers arrive (so watches appear while they run)."""

    def __init__(self, tmp: Path, server: TestApiServer, port=None):
        self.tmp = tmp
        self.server = server
        self.port = port or free_port()
        self.access_log = tmp / "nghttpx-access.log"
        self.proc = None

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def start(self):
        pki = Path(self.server.pki)
        self.proc = subprocess.Popen(
            [NGHTTPX, "--conf=/dev/null", f"--frontend=127.0.0.1,{self.port}",
             f"--backend=127.0.0.1,{self.server.port};;tls", "--insecure",
             "--single-process", "--workers=1", "--no-ocsp",
             "--frontend-http2-read-timeout=1h", "--frontend-read-timeout=1h",
             "--backend-read-timeout=1h", "--stream-read-timeout=0", "--stream-write-timeout=0",
             f"--accesslog-file={self.access_log}", "--accesslog-write-early",
             "--accesslog-format=$protocol_version $alpn $status $method $path",
             f"--errorlog-file={self.tmp / 'nghttpx-error.log'}",
             str(pki / "server.key"), str(pki / "server.crt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: self.proc.poll() is not None or port_open(self.port),
                 what="nghttpx listening")
        assert self.proc.poll() is None, (self.tmp / "nghttpx-error.log").read_text()

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def requests(self):
        """(protocol, alpn, status, method, path) of every request the front received."""
        if not self.access_log.exists():
            return []
        return [tuple(line.split(" ", 4)) for line in self.access_log.read_text().splitlines()]


class TcpForwarder:
    """Listens on 127.0.0.1:`port` once started and pipes each connection to `target_port`
    (TLS and ALPN pass through untouched): an API server address that is closed until then."""

    def __init__(self, port, target_port):
        self.port = port
        self.target_port = target_port
        self.listener = None
        self.sockets = []
        self.stopping = False

    def start(self):
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.listener.settimeout(0.1)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping:
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.sockets += [client, upstream]
            relay(client, upstream)

    def stop(self):
        self.stopping = True
        if self.listener is not None:
            self.listener.close()
        for s in self.sockets:
            try:
                # shutdown() ends the connection at once (close() alone leaves it to the piping
                # thread blocked in recv() on it).
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass


class Sampler:
    """Records each change of content (visible_files) of some volumes, every few ms, while it
    runs: what a container could have read, in order (a flap back shows as a repeat)."""

    def __init__(self, *volumes):
        self.volumes = volumes
        self.seen = {v: [] for v in volumes}
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stopping:
            self._sample()
            time.sleep(0.003)

    def _sample(self):
        for v in self.volumes:
            files = visible_files(v)
            if not self.seen[v] or self.seen[v][-1] != files:
                self.seen[v].append(files)

    def add(self, volume):
        self.seen[volume] = []
        self.volumes += (volume,)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping = True
        self.thread.join()
        self._sample()  # the last state, whenever the thread last looked


class Cluster(DaemonProcess):
    def __init__(self, tmp: Path, server: TestApiServer, protocol="http1"):
        super().__init__(tmp / "daemon.log")
        self.tmp = tmp
        self.server = server
        self.protocol = protocol
        self.root = tmp / "root"
        self.state = tmp / "state"
        self.root.mkdir()
        self.started = False
        # Secret values written by the test, and the daemon's token: none may reach a log line
        # or an Event.
        self.markers = {DAEMON_TOKEN}
        self.front = None
        self.kubelet_token_added = False
        if protocol == "h2":
            self.front = Http2Front(tmp, server)
            self.front.start()
        # The daemon's own user, so that ACLs can be set for it alone.
        server.admin("POST", "tokens", {"token": DAEMON_TOKEN, "user": DAEMON_USER})
        # The Node the kubelet registers (none runs here): the daemon checks that it exists.
        self.create_node(NODE)
        self.kubeconfig = tmp / "daemon.kubeconfig"
        self.token_file = tmp / "daemon.token"
        self.write_kubeconfig()

    @property
    def api_port(self):
        """Where the daemon reaches the API: the front with h2, else the test server."""
        return self.front.port if self.front else self.server.port

    def write_kubeconfig(self, port=None, token_file=False):
        """The daemon's kubeconfig: the test server's cluster and CA, the daemon's token (inline,
        or in a `tokenFile` the daemon re-reads as it rotates), the server at `port` (default:
        api_port)."""
        config = yaml.safe_load(Path(self.server.kubeconfig).read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{port or self.api_port}"
        for user in config["users"]:
            if token_file:
                self.rotate_token_file(DAEMON_TOKEN)
                user["user"] = {"tokenFile": str(self.token_file)}
            else:
                user["user"] = {"token": DAEMON_TOKEN}
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def rotate_token_file(self, token):
        """As a projected service-account token rotates: the new file replaces the old at once."""
        tmp = self.token_file.with_suffix(".new")
        tmp.write_text(token + "\n")
        os.replace(tmp, self.token_file)

    # --- the API ---------------------------------------------------------------------------
    def api(self, method, path, body=None, expect=(200, 201)):
        status, data = self.server.request(method, path, body)
        assert status in expect, f"{method} {path}: {status} {data}"
        return data

    def create_node(self, name):
        """A Node object named `name`, as a kubelet registers it (already there: kept)."""
        self.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                            "metadata": {"name": name}}, expect=(201, 409))

    def put_configmap(self, name, data, namespace="default", immutable=None):
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": namespace}, "data": data}
        if immutable is not None:
            obj["immutable"] = immutable
        return self._put(f"/api/v1/namespaces/{namespace}/configmaps", name, obj)

    def put_secret(self, name, string_data, namespace="default"):
        self.markers.update(string_data.values())
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
        if any("serviceAccountToken" in source for v in volumes
               for source in v.get("projected", {}).get("sources", [])):
            # As ServiceAccount admission sets it (a real server refuses a token source without
            # it; the tier runs without that admission plugin).
            pod["spec"]["serviceAccountName"] = "default"
        created = self.api("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
        return created["metadata"]["uid"]

    def events(self, namespace="default"):
        return self.api("GET", f"/api/v1/namespaces/{namespace}/events")["items"]

    def daemon_requests(self, since=0.0):
        """The requests the test server got from the daemon (its user agent) since `since`
        (time.time()), oldest first: method, path, query, code (or reset)."""
        return [r for r in self.server.admin("GET", "requests")["requests"]
                if r["user_agent"].startswith("volumemanager/") and r["time"] >= since]

    # --- the node --------------------------------------------------------------------------
    def volume_dir(self, uid, plugin, volume):
        return self.root / "pods" / uid / "volumes" / plugin / volume

    def kubelet_sets_up(self, uid, plugin, volume, payload):
        kubelet_writer.set_up(self.volume_dir(uid, plugin, volume), payload)

    def kubelet_reports_status(self, name, status, namespace="default"):
        """The kubelet reports a pod's status as its status manager does: a PATCH of
        pods/{name}/status under the node's identity (system:node:<NODE> in system:nodes), which
        NodeRestriction allows for pods bound to this node. A pod is created without one (the
        server resets it to Pending): this is how it becomes Running, with its IP. Returns the
        pod."""
        from harness import set_pod_status
        if not self.kubelet_token_added:
            self.server.admin("POST", "tokens", {"token": NODE_TOKEN,
                                                 "user": f"system:node:{NODE}",
                                                 "groups": ["system:nodes"]})
            self.kubelet_token_added = True
        return set_pod_status(self.server, namespace, name, status, token=NODE_TOKEN)

    def start(self, *extra):
        log_format = ["--log-format", "json"] if self.protocol == "h2" else []
        self.started = True
        return self.run(["--kubeconfig", str(self.kubeconfig), "--root-dir", str(self.root),
                         "--state-dir", str(self.state), "--node-name", NODE, "-v", "1",
                         *log_format, *extra])

    def start_and_sync(self, *extra):
        """Starts the daemon and waits until it has listed this node's pods and its objects."""
        self.start(*extra)
        wait_for(lambda: "pod source api delivered its first state" in self.log(),
                 what="the first list of pods")
        time.sleep(0.3)  # the per-object lists follow at once

    def wait_synced(self, *objects):
        """Waits until the daemon has listed this node's pods and each of `objects` ("configmap
        default/app"): from then on it sees every change of them at once."""
        def listed():
            done = {r["reflector"] for r in self.records(msg="Listed")}
            return f"pods on node {NODE}" in done and all(o in done for o in objects)
        wait_for(listed,
                 what=f"the daemon's lists of pods and {objects}")

    def wait_watches_settled(self, watches=3):
        """Waits until the daemon has `watches` watches open and the newest is older than the
        reflector's short-watch limit (1 s, client-go's): a watch that ends from then on is
        resumed from its resourceVersion, not replaced by a relist."""
        if self.server.kind == "real":
            # The real server's audit log records a watch once it ends, not when it starts:
            # the daemon's own count of its running watches says it.
            def running():
                probe, _ = self.admin_addresses()
                with urllib.request.urlopen(probe + "/metrics", timeout=10) as r:
                    return sum(float(line.rsplit(" ", 1)[1])
                               for line in r.read().decode().splitlines()
                               if line.startswith("volumemanager_watches{"))
            wait_for(lambda: running() >= watches, what=f"{watches} watches of the daemon")
            time.sleep(1.1)
            return

        def newest():
            open_watches = {(r["path"], r["query"].get("fieldSelector"))
                            for r in self.daemon_requests() if is_watch(r)}
            if len(open_watches) < watches:
                return None
            return max(r["time"] for r in self.daemon_requests() if is_watch(r))
        started = wait_for(newest, what=f"{watches} watches of the daemon")
        time.sleep(max(0.0, started + 1.1 - time.time()))

    def log(self):
        """The daemon's log as text: with --log-format json, each line must be a JSON object and
        its message is what is returned."""
        if not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace")
        if self.protocol != "h2":
            return text
        lines = []
        for line in text.splitlines():
            if line.startswith("{"):
                try:
                    lines.append(json.loads(line)["msg"])
                except ValueError:
                    if not line.endswith("}"):  # still being written
                        continue
                    raise AssertionError(f"log line is not JSON: {line!r}")
            else:
                lines.append(line)
        return "\n".join(lines) + "\n"

    def assert_no_secret_leaked(self):
        raw = self.log_path.read_bytes() if self.log_path.exists() else b""
        events = json.dumps(self.api("GET", "/api/v1/events")["items"]).encode()
        for marker in self.markers:
            for form in (marker.encode(), base64.b64encode(marker.encode())):
                assert form not in raw, f"secret value {form!r} in the daemon's log"
                assert form not in events, f"secret value {form!r} in an Event"

    def assert_spoke_http2(self):
        """Every request the daemon sent went through the front as HTTP/2 (ALPN h2)."""
        requests = self.front.requests()
        assert requests, "the daemon sent nothing through the HTTP/2 front"
        assert all(r[0] == "HTTP/2" and r[1] == "h2" for r in requests), requests[:5]


# The `cluster` fixture's variants: the test server directly and through the HTTP/2 front, and
# the real kube-apiserver.
CLUSTER_PARAMS = (["http1", "h2"] if "test" in SERVERS else []) + \
    (["real"] if "real" in SERVERS else [])


@pytest.fixture(params=CLUSTER_PARAMS)
def cluster(request, tmp_path):
    with api_server("real" if request.param == "real" else "test", tmp_path) as server:
        c = Cluster(tmp_path, server, request.param)
        try:
            yield c
            if c.proc is not None:
                c.stop(signal.SIGKILL)
            c.assert_no_secret_leaked()
            if c.front is not None and c.started:
                c.assert_spoke_http2()
        finally:
            if c.proc is not None:
                c.stop(signal.SIGKILL)
            if c.front is not None:
                c.front.stop()


def cm_volume(name, cm, **extra):
    return {"name": name, "configMap": {"name": cm, **extra}}


def secret_volume(name, secret, **extra):
    return {"name": name, "secret": {"secretName": secret, **extra}}


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
    cluster.start()
    cluster.wait_synced("configmap default/app")
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
    cluster.start()
    wait_for(lambda: "is left to the kubelet" in cluster.log(), what="left-to-kubelet lines")
    cluster.wait_synced("configmap default/app", "secret default/tls")
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
    left = {r["volume"] for r in cluster.records(pod="default/web")
            if r["msg"].startswith("Volume is left to the kubelet")}
    assert left == {"kube-api-access", "info"}
    for marker in ("SECRET-MARKER-2", "SECRET-MARKER-3"):
        assert marker not in log


def test_optional_missing_object_then_created(cluster):
    uid = cluster.create_pod("web", [cm_volume("cfg", "late", optional=True)])
    cluster.kubelet_sets_up(uid, CM, "cfg", {})
    cluster.start()
    cluster.wait_synced("configmap default/late")
    cluster.put_configmap("late", {"k": "v"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"k": b"v"},
             what="content of the object created after the pod")


def test_deleted_object_keeps_the_content_and_a_failure_posts_a_failed_mount_event(cluster):
    cluster.put_configmap("app", {"level": "info"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app", items=[{"key": "level",
                                                                     "path": "level"}])])
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "info"})
    cluster.start()
    cluster.wait_synced("configmap default/app")
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
    cluster.start()
    cluster.wait_synced("configmap default/open")
    cluster.put_configmap("open", {"k": "2"})
    cluster.put_configmap("closed", {"k": "2"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "a")) == {"k": b"2"},
             what="the readable object's volume current")
    time.sleep(0.5)
    assert visible_files(cluster.volume_dir(uid, CM, "b")) == {"k": b"1"}


def test_mirror_pods_and_terminating_pods(cluster):
    cluster.put_configmap("app", {"level": "1"})
    mirror = cluster.create_pod("static-web", [cm_volume("cfg", "app")],
                                annotations={"kubernetes.io/config.mirror": "abc"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app")])
    cluster.kubelet_sets_up(mirror, CM, "cfg", {"level": "1"})
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    cluster.start()
    cluster.wait_synced("configmap default/app")
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


@pytest.mark.test_server_only("a stalled watch (fault hook)")
def test_swaps_by_a_kubelet_writer_older_are_corrected_newer_are_kept(cluster):
    cluster.put_configmap("app", {"level": "1"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app")])
    vol = cluster.volume_dir(uid, CM, "cfg")
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    cluster.start()
    cluster.wait_synced("configmap default/app")
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


# --- credentials and start-up ----------------------------------------------------------------

EXEC_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: SECRET-MARKER-EXEC,
                         exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/false}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_a_sigterm_while_the_identity_is_asked_is_a_clean_stop(tmp_path):
    """SIGTERM during start-up, while the daemon waits for the API server's answer about its
    identity (here a server that accepts and never answers), is a graceful stop with exit 0, not a
    death by the signal."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
    from kubetestserver import pki
    paths = pki.generate(str(tmp_path / "pki"))
    silent = socket.create_server(("127.0.0.1", 0))
    accepted = []
    threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {
            "server": f"https://127.0.0.1:{silent.getsockname()[1]}",
            "certificate-authority": paths["ca.crt"]}}],
        "users": [{"name": "u", "user": {"token": "SECRET-MARKER-SILENT"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    daemon = DaemonProcess(tmp_path / "daemon.log")
    (tmp_path / "root").mkdir()
    daemon.run(["--kubeconfig", str(kubeconfig), "--root-dir", str(tmp_path / "root"),
                "--state-dir", str(tmp_path / "state"), "--node-name", NODE])
    try:
        wait_for(lambda: accepted, what="the daemon connected to the silent server")
        assert daemon.stop(signal.SIGTERM, timeout=30) == 0
        assert "SIGTERM (during start-up): stopping" in daemon.log()
    finally:
        silent.close()
        if daemon.proc is not None:
            daemon.stop(signal.SIGKILL)


@pytest.mark.parametrize("case", ["missing-kubeconfig", "exec-plugin", "in-cluster-no-host"])
def test_credentials_that_cannot_be_loaded_exit_1_naming_the_flag(tmp_path, case):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    if case == "missing-kubeconfig":
        args, expected = ["--kubeconfig", str(tmp_path / "absent")], [
            f"--kubeconfig {tmp_path / 'absent'}", "cannot read file"]
    elif case == "exec-plugin":
        (tmp_path / "exec.kubeconfig").write_text(EXEC_KUBECONFIG)
        args, expected = ["--kubeconfig", str(tmp_path / "exec.kubeconfig")], [
            f"--kubeconfig {tmp_path / 'exec.kubeconfig'}",
            "interactiveMode must be set"]
    else:
        # The port is there, the host is not.
        env["KUBERNETES_SERVICE_PORT"] = "443"
        args, expected = ["--in-cluster"], ["--in-cluster", "KUBERNETES_SERVICE_HOST"]
    root = tmp_path / "root"
    done = subprocess.run([BIN, *args, "--root-dir", str(root), "--state-dir",
                           str(tmp_path / "state"), "--node-name", NODE],
                          capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 1, done
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("volumemanager: ")
    for text in expected:
        assert text in last, last
    assert "SECRET-MARKER-EXEC" not in done.stdout + done.stderr
    # Credentials are loaded before anything is created: no root dir, no state dir.
    assert not root.exists()
    assert not (tmp_path / "state").exists()


@pytest.mark.test_server_only("the server's clock moved on to expire a certificate (test hook)")
def test_the_kubelets_own_kubeconfig_with_a_certificate_rotated_in_place(tmp_path):
    """--kubeconfig naming the kubelet's client certificate as the kubelet writes it (certificate
    and key in kubelet-client-current.pem, a symlink swapped to each new file): after a rotation
    the daemon's requests carry the new certificate, and once the old one has expired (the test
    server's clock moved on, its watches dropped) changes still land, with no request refused.
    HTTP/1.1 only: the HTTP/2 front (nghttpx) would not pass a client certificate through."""
    with TestApiServer() as server:
        c = Cluster(tmp_path, server, "http1")
        try:
            pki = tmp_path / "kubelet-pki"
            pki.mkdir()
            current = pki / "kubelet-client-current.pem"

            def rotate(name, days):
                issued = server.admin("POST", "issue-client-cert",
                                      {"path": str(pki / name), "user": f"system:node:{NODE}",
                                       "groups": ["system:nodes"], "days": days})
                link = pki / "kubelet-client-current.pem.tmp"
                link.unlink(missing_ok=True)
                link.symlink_to(pki / name)
                os.replace(link, current)
                return issued["serial"]

            first = rotate("kubelet-client-1.pem", 1)
            config = yaml.safe_load(Path(server.kubeconfig).read_text())
            for user in config["users"]:
                user["user"] = {"client-certificate": str(current), "client-key": str(current)}
            c.kubeconfig.write_text(yaml.safe_dump(config))
            c.put_configmap("app", {"level": "info"})
            uid = c.create_pod("web", [cm_volume("cfg", "app")])
            c.kubelet_sets_up(uid, CM, "cfg", {"level": "info"})
            c.start()
            c.wait_synced("configmap default/app")
            assert {r.get("cert_serial") for r in c.daemon_requests()} == {first}
            c.put_configmap("app", {"level": "debug"})
            wait_for(lambda: visible_files(c.volume_dir(uid, CM, "cfg")) == {"level": b"debug"},
                     what="a change with the first certificate")

            second = rotate("kubelet-client-2.pem", 3)
            # The daemon looks at the file every 30 s.
            wait_for(lambda: any(r.get("cert_serial") == second and is_watch(r)
                                 for r in c.daemon_requests()),
                     timeout=90, what="a watch with the rotated certificate")
            server.admin("POST", "clock", {"offset_seconds": 2 * 86400})
            since = time.time()
            server.admin("POST", "drop-watches", {"abort": False})
            c.put_configmap("app", {"level": "warn"})
            wait_for(lambda: visible_files(c.volume_dir(uid, CM, "cfg")) == {"level": b"warn"},
                     what="a change after the first certificate expired")
            later = c.daemon_requests(since)
            assert later and all(r.get("cert_serial") == second for r in later), later
            assert all(r.get("code") != 401 for r in c.daemon_requests()), \
                [r for r in c.daemon_requests() if r.get("code") == 401]
            assert "PRIVATE KEY" not in c.log()
            assert c.stop() == 0
        finally:
            if c.proc is not None:
                c.stop(signal.SIGKILL)


@pytest.mark.test_server_only("a 503 for the daemon alone (fault hook)")
@pytest.mark.parametrize("outage", ["503", "closed-port"])
def test_api_server_unreachable_at_start_nothing_touched_then_current(cluster, outage):
    cluster.put_configmap("app", {"level": "1"})
    cluster.put_secret("tls", {"key": "SECRET-MARKER-START-1"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app"), secret_volume("tls", "tls")])
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "0"})
    cluster.kubelet_sets_up(uid, SECRET, "tls", {"key": "SECRET-MARKER-START-0"})
    cluster.markers.add("SECRET-MARKER-START-0")
    before = snapshot(cluster.root)
    started = time.time()
    if outage == "503":
        cluster.server.admin("POST", "faults", {"user": DAEMON_USER, "status": 503, "times": -1})
    else:
        forwarder = TcpForwarder(free_port(), cluster.api_port)
        cluster.write_kubeconfig(port=forwarder.port)
    cluster.start("--sync-frequency", "200ms")
    # The daemon tries, and keeps trying, while nothing on disk changes.
    if outage == "503":
        wait_for(lambda: len([r for r in cluster.daemon_requests(started)
                              if r.get("code") == 503]) >= 2, what="two refused requests")
    else:
        wait_for(lambda: len([line for line in cluster.log().splitlines()
                              if "cannot connect to" in line
                              or "Couldn't connect" in line]) >= 2,
                 what="two refused connections")
    assert cluster.proc.poll() is None
    assert snapshot(cluster.root) == before
    if outage == "503":
        cluster.server.admin("DELETE", "faults")
    else:
        forwarder.start()
    try:
        wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"1"} and
                 visible_files(cluster.volume_dir(uid, SECRET, "tls")) ==
                 {"key": b"SECRET-MARKER-START-1"},
                 timeout=RECOVERY_BOUND_S, what="volumes current once the server answers")
    finally:
        if outage == "closed-port":
            cluster.stop()
            forwarder.stop()


# --- outages -----------------------------------------------------------------------------------

def is_list(r):
    return not is_watch(r) and r["path"].split("/")[-1] in ("configmaps", "secrets", "pods")


# Every outage the test server can stage. `rules`: its fault rules (for the daemon's requests)
# while the outage lasts; `abort`: the open watches are reset rather than ended; `hit`: a daemon
# request that ran into it, seen before the objects change; `hit_after`: one seen after (default
# `hit`; None: the outage ends at once; "idle": nothing reaches the server, a short hold instead);
# `pure`: the daemon cannot read the change before the outage ends (else, as after a cut watch,
# it relists and the change may land during the fault: never torn, never older). `settings`: the
# server's; `args`: the daemon's; `compact`: the history is compacted before the outage ends, so
# the watches resume from an expired resourceVersion; `expect`: what shows that the daemon took
# that path afterwards. Through the HTTP/2 front a reset by the server reaches the daemon as
# nghttpx's 502 with an HTML body, as from any proxy in front of a failing API server.
OUTAGES = {
    "503": dict(rules=[{"status": 503, "times": -1}], hit=answered(503)),
    "503-get-strategy": dict(rules=[{"status": 503, "times": -1}], hit=answered(503),
                             args=["--config-map-and-secret-change-detection-strategy", "Get"]),
    "429-retry-after": dict(rules=[{"status": 429, "retry_after": 1, "times": -1}],
                            hit=answered(429)),
    "connection-reset": dict(rules=[{"reset": True, "times": -1}], abort=True,
                             hit=lambda r: r.get("reset")),
    # 429s make the reflectors resume their watches (no relist), which then find the history
    # compacted: a 410 ERROR event.
    "410-expired": dict(rules=[{"status": 429, "times": -1}], hit=answered(429), hit_after=None,
                        compact=True,
                        expect=lambda c: c.records(err=lambda e: "watch ERROR event: 410" in e)),
    "stalled-watch": dict(rules=[{"verb": "watch", "watch": {"stall": True}, "times": -1}],
                          hit=is_watch, hit_after="idle"),
    "watch-cut-mid-event": dict(rules=[{"verb": "watch", "watch": {"close_after_bytes": 60},
                                        "times": -1}],
                                hit=is_watch, hit_after=is_list, pure=False),
    "token-rotated": dict(token=True, hit=answered(401)),
}


@pytest.mark.test_server_only("every fault of the test server's")
@pytest.mark.parametrize("outage", list(OUTAGES))
def test_an_outage_changes_nothing_on_disk_and_a_change_during_it_lands_after(cluster, outage):
    o = OUTAGES[outage]
    for key, value in o.get("settings", {}).items():
        cluster.server.admin("POST", "settings", {key: value})
    cluster.put_configmap("app", {"level": "1"})
    cluster.put_secret("tls", {"key": f"SECRET-MARKER-{outage}-1"})
    # Optional: an outage mistaken for "the object does not exist" would empty it.
    uid = cluster.create_pod("web", [cm_volume("cfg", "app", optional=True),
                                     secret_volume("tls", "tls")])
    volumes = (cluster.volume_dir(uid, CM, "cfg"), cluster.volume_dir(uid, SECRET, "tls"))
    old = ({"level": b"1"}, {"key": f"SECRET-MARKER-{outage}-1".encode()})
    new = ({"level": b"2"}, {"key": f"SECRET-MARKER-{outage}-2".encode()})
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    cluster.kubelet_sets_up(uid, SECRET, "tls", {"key": f"SECRET-MARKER-{outage}-1"})
    if o.get("token"):
        cluster.write_kubeconfig(token_file=True)
    # Resyncs every 300 ms: the daemon re-verifies its volumes all through the outage.
    cluster.start("--sync-frequency", "300ms", *o.get("args", []))
    if "args" in o:
        cluster.wait_synced()
        cluster.wait_watches_settled(watches=1)
    else:
        cluster.wait_synced("configmap default/app", "secret default/tls")
        cluster.wait_watches_settled(watches=3)
    before = snapshot(cluster.root)

    with Sampler(*volumes) as sampler:
        started = time.time()
        for rule in o.get("rules", []):
            cluster.server.admin("POST", "faults", dict(rule, user=DAEMON_USER))
        if o.get("token"):  # the server takes the next token; the daemon's file still has the old
            cluster.markers.add(f"{DAEMON_TOKEN}-rotated")
            cluster.server.admin("POST", "tokens", {"token": DAEMON_TOKEN})
            cluster.server.admin("POST", "tokens", {"token": f"{DAEMON_TOKEN}-rotated",
                                                    "user": DAEMON_USER})
        cluster.server.admin("POST", "drop-watches", {"abort": bool(o.get("abort"))})
        wait_for(lambda: any(o["hit"](r) for r in cluster.daemon_requests(started)),
                 what=f"the daemon running into the {outage}")
        changed = time.time()
        cluster.put_configmap("app", {"level": "2"})
        cluster.put_secret("tls", {"key": f"SECRET-MARKER-{outage}-2"})
        hit_after = o.get("hit_after", o["hit"])
        if hit_after == "idle":
            # Nothing more reaches the server: give the resyncs time to do harm.
            time.sleep(0.6)
        elif hit_after is not None:
            wait_for(lambda: any(hit_after(r) for r in cluster.daemon_requests(changed)),
                     what=f"the daemon running into the {outage} after the change")
        if o.get("pure", True):
            assert snapshot(cluster.root) == before
        assert cluster.proc.poll() is None
        if o.get("compact"):
            cluster.server.admin("POST", "compact")
        cluster.server.admin("DELETE", "faults")
        if hit_after == "idle":
            cluster.server.admin("POST", "drop-watches", {"abort": False})
        if o.get("token"):
            cluster.rotate_token_file(f"{DAEMON_TOKEN}-rotated")
        wait_for(lambda: tuple(visible_files(v) for v in volumes) == new,
                 timeout=RECOVERY_BOUND_S, what=f"the change made during the {outage} on disk")
    for volume, old_content, new_content in zip(volumes, old, new):
        assert all(seen in (old_content, new_content) for seen in sampler.seen[volume]), \
            sampler.seen[volume]
    if "expect" in o:
        assert o["expect"](cluster), f"the daemon did not take the {outage} path"


# --- immutable objects and Events ----------------------------------------------------------

def test_immutable_configmap_recreated_new_pods_get_the_new_content_nothing_goes_back(cluster):
    cluster.put_configmap("frozen", {"v": "1"})
    first = cluster.create_pod("first", [cm_volume("cfg", "frozen")])
    first_vol = cluster.volume_dir(first, CM, "cfg")
    cluster.kubelet_sets_up(first, CM, "cfg", {"v": "1"})
    cluster.start()
    cluster.wait_synced("configmap default/frozen")
    # Its last change makes it immutable: refreshed, then no longer watched (as the kubelet).
    cluster.put_configmap("frozen", {"v": "2"}, immutable=True)
    wait_for(lambda: visible_files(first_vol) == {"v": b"2"}, what="the immutable content")
    wait_for(lambda: cluster.records(object="configmap/default/frozen",
                                     msg=lambda m: m.startswith("Object is immutable")),
             what="the immutable object no longer watched")
    # Deleted and recreated under the same name with other content (another UID). The kubelet
    # sets a new pod's volume up from a fresh read: the new content, which must stay.
    cluster.delete("/api/v1/namespaces/default/configmaps/frozen")
    cluster.put_configmap("frozen", {"v": "3"}, immutable=True)
    with Sampler(first_vol) as sampler:
        second = cluster.create_pod("second", [cm_volume("cfg", "frozen")])
        second_vol = cluster.volume_dir(second, CM, "cfg")
        cluster.kubelet_sets_up(second, CM, "cfg", {"v": "3"})
        sampler.add(second_vol)
        wait_for(lambda: cluster.records(msg="Volume set up by the kubelet: refreshed from now on",
                                         volume="cfg", podUID=second),
                 what="the second pod's volume verified by the daemon")
        # The new reference makes the daemon read the object again: the recreated one replaces
        # the old in the daemon's cache, so the first pod's volume becomes current too (and a
        # daemon serving the stale copy would rewrite the second pod's volume with it first).
        wait_for(lambda: visible_files(first_vol) == {"v": b"3"} or
                 visible_files(second_vol) != {"v": b"3"}, what="the recreated content")
    assert sampler.seen[second_vol] == [{"v": b"3"}]
    # Forward only; the daemon may have picked the recreation up before the sampler's first look.
    assert sampler.seen[first_vol] in ([{"v": b"2"}, {"v": b"3"}], [{"v": b"3"}])


def test_repeated_failed_mounts_of_one_volume_are_one_event_with_a_count(cluster):
    cluster.put_secret("tls", {"tls.crt": "SECRET-MARKER-EVENT-1"})
    uid = cluster.create_pod("web", [secret_volume("tls", "tls", items=[
        {"key": "tls.crt", "path": "tls.crt"}])])
    cluster.kubelet_sets_up(uid, SECRET, "tls", {"tls.crt": "SECRET-MARKER-EVENT-1"})
    cluster.start()
    cluster.wait_synced("secret default/tls")
    # The item's key is gone: every retry of the volume fails the same way.
    cluster.put_secret("tls", {"other": "SECRET-MARKER-EVENT-2"})

    def failed_mounts():
        return [e for e in cluster.events() if e["reason"] == "FailedMount"
                and e["involvedObject"]["uid"] == uid]

    events = wait_for(lambda: [e for e in failed_mounts() if e["count"] > 1] and failed_mounts(),
                      what="a FailedMount event counted more than once")
    assert len(events) == 1, events
    assert events[0]["message"] == ('MountVolume.SetUp failed for volume "tls" : references '
                                    'non-existent secret key: tls.crt')
    assert events[0]["lastTimestamp"] >= events[0]["firstTimestamp"]
    patches = [r for r in cluster.daemon_requests()
               if r["method"] == "PATCH" and "/events/" in r["path"]]
    assert patches and all(r["code"] == 200 for r in patches), patches
    assert visible_files(cluster.volume_dir(uid, SECRET, "tls")) == \
        {"tls.crt": b"SECRET-MARKER-EVENT-1"}


def reconciler_outcome(cluster, outcome):
    probe, _ = cluster.admin_addresses()
    with urllib.request.urlopen(probe + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("volumemanager_reconciler_outcomes_total{") and \
                    f'outcome="{outcome}"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_waiting_for_the_kubelet_is_said_once_per_volume_and_object_changes_at_info(cluster):
    """With the kubelet's ownership, a volume it has not set up is said once at info (not at each
    recheck); each change of an object a volume reads is an info line naming it."""
    cluster.put_configmap("app", {"level": "info"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app"), cm_volume("more", "app")])
    cluster.start()
    cluster.wait_synced("configmap default/app")
    # Several rechecks of each volume (every 1 s) have run.
    wait_for(lambda: reconciler_outcome(cluster, "kubelet_setup_pending") >= 6, timeout=30,
             what="several rechecks of the volumes the kubelet has not set up")
    waiting = cluster.records(msg=lambda m: m.startswith("Waiting for the kubelet to set up"),
                              podUID=uid)
    assert sorted(r["volume"] for r in waiting) == ["cfg", "more"], waiting
    assert all(r["level"] == "info" and r["pod"] == "default/web" for r in waiting)

    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "info"})
    cluster.put_configmap("app", {"level": "debug"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"debug"},
             what="the refresh once the kubelet set the volume up")
    changed = cluster.records(msg="Object changed", object="configmap/default/app")
    assert len(changed) == 1 and changed[0]["level"] == "info", changed
    assert changed[0]["change"] == "updated" and changed[0]["resourceVersion"]
    assert len(cluster.records(msg=lambda m: m.startswith("Waiting for the kubelet"),
                               podUID=uid)) == 2
