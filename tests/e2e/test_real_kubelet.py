"""The daemon beside the real kubelet (v1.20.2), on a node of the test's own.

The real-kubelet tier (ctest `realkubelet`, tests/realkube/kubelet_tier.py) runs this module in a
mount and network namespace of its own (node_namespace.py): the real kube-apiserver and etcd on
its loopback, the real kubelet with the fake container runtime (fakecri.py) registering node
e2e-node at 10.77.0.1, pod sandboxes in network namespaces of their own. The kubelet sets up,
refreshes (at its pod syncs, Watch strategy, --sync-frequency 1m) and tears down its pods'
volumes and binds their subPath mounts itself; the daemon runs beside it in kubelet ownership under
the kubelet's own credentials (its kubeconfig: system:node:e2e-node), as the chart's node mode
runs it.

What is checked: both writers refreshing one volume under a reader that never sees a torn or
mixed payload, with a daemon restart in between; the kubelet's teardown when the pod goes,
unopposed; a subPath bind the kubelet made, updated in place; a reload call to the pod IP the
kubelet reported; observe mode reading the kubelet's volumes. Each reads the kubelet's log for
errors about its volumes only after finding the kubelet's own `MountVolume.SetUp succeeded` line
for them.
"""
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import DaemonProcess, find_markers, killed_after, wait_for
from api_servers import NODE, REAL_TOKENS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "realkube"))
import realkubelet  # noqa: E402

pytestmark = pytest.mark.real_kubelet

CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"


class Beside(DaemonProcess):
    """The daemon beside the kubelet: its root dir, its kubeconfig (the node's credentials),
    kubelet ownership (cluster mode's default)."""

    def __init__(self, tmp, node):
        super().__init__(tmp / "daemon.log")
        self.node = node
        self.state = tmp / "state"

    def start(self, *extra):
        return self.run(["--kubeconfig", str(self.node.kubelet.kubeconfig),
                         "--root-dir", str(self.node.kubelet.root),
                         "--state-dir", str(self.state), "--node-name", self.node.node_name,
                         "-v", "1", *extra])

    def start_and_sync(self, *extra):
        self.start(*extra)
        wait_for(lambda: "pod source api delivered its first state" in self.log(),
                 timeout=30, what="the daemon's first list of pods")

    def errors(self):
        return self.records(level="error")

    def assert_no_secret_leaked(self):
        """No secret value (the tests' begin with SECRET-MARKER) in its log, in what was scraped
        from its admin endpoints, or in an Event."""
        assert self.leaked_markers() == []
        events = json.dumps(self.node.api("GET", "/api/v1/events")["items"]).encode()
        assert find_markers(events) == [], "a secret value in an Event"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    missing = realkubelet.available()
    if missing:
        pytest.fail(missing, pytrace=False)
    if not realkubelet.in_node_namespace():
        pytest.fail("beside the real kubelet the tests run only in the node namespace of "
                    "tests/realkube/kubelet_tier.py (ctest realkubelet)", pytrace=False)
    with realkubelet.KubeletNode(tmp_path_factory.mktemp("node"), NODE, REAL_TOKENS) as n:
        yield n


@pytest.fixture
def daemon(tmp_path, node):
    with killed_after(Beside(tmp_path, node)) as d:
        yield d
    node.delete_all_pods()


def test_both_writers_refresh_one_volume_and_no_reader_sees_a_torn_or_mixed_payload(node, daemon):
    keys = ("a.conf", "b.conf", "c.conf")
    node.put_configmap("storm", realkubelet.payload(0, keys))
    pod = node.run_pod("storm", [{"name": "cfg", "configMap": {"name": "storm"}}],
                       [{"name": "cfg", "mountPath": "/etc/app"}])
    uid = pod["metadata"]["uid"]
    since = node.mounted(uid, "cfg")
    volume = node.kubelet.volume_dir(uid, CM, "cfg")
    daemon.start_and_sync()
    storm_began = node.kubelet.offset()
    last = 0
    with realkubelet.VolumeReader(volume, keys) as reader:
        # About 12 s: a change every 200 ms, a pod update (a kubelet pod sync, which rewrites
        # the volume from the kubelet's cache) every second, and the daemon stopped and started
        # again half way.
        for n in range(1, 61):
            node.put_configmap("storm", realkubelet.payload(n, keys))
            last = n
            if n % 5 == 0:
                node.touch_pod("storm", n)
            if n == 30:
                assert daemon.stop() == 0
                daemon.start_and_sync()
            time.sleep(0.2)
        wait_for(lambda: reader.seen and reader.seen[-1] == last, timeout=10,
                 what=f"version {last} in the volume (seen last: "
                      f"{reader.seen[-1:] if reader.seen else None})")
        time.sleep(1.0)  # and it stays
    assert reader.torn == [], f"torn files read: {reader.torn[:3]}"
    assert reader.mixed == [], f"versions mixed within one version dir: {reader.mixed[:3]}"
    assert reader.seen[-1] == last, f"the volume went back to {reader.seen[-1]} after {last}"
    assert len(set(reader.seen)) >= 20, f"only {len(set(reader.seen))} versions seen: " \
                                        f"{reader.seen}"
    assert reader.reads > 1000
    # The kubelet took part: its writer compared (and wrote where its cache differed) at its
    # pod syncs all along.
    kubelet_writes = [line for line in node.kubelet.lines(storm_began)
                      if str(volume) in line and "required for target directory" in line]
    assert len(kubelet_writes) >= 5, kubelet_writes
    print(f"reads {reader.reads}, versions seen {len(set(reader.seen))} of {last}, kubelet "
          f"writer runs {len(kubelet_writes)} (wrote "
          f"{sum('write required' in w for w in kubelet_writes)}), back to an older version "
          f"{len(reader.went_back())} times")
    assert node.kubelet.errors(since, '"cfg"', uid) == []
    assert daemon.errors() == []


def test_the_kubelets_teardown_is_unopposed(node, daemon):
    node.put_configmap("bye", {"k": "1"})
    node.put_secret("bye-secret", {"token": "SECRET-MARKER-TEARDOWN-1"})
    pod = node.run_pod("bye", [{"name": "cfg", "configMap": {"name": "bye"}},
                               {"name": "creds", "secret": {"secretName": "bye-secret"}}],
                       [{"name": "cfg", "mountPath": "/etc/app"},
                        {"name": "creds", "mountPath": "/etc/creds"}])
    uid = pod["metadata"]["uid"]
    since = node.mounted(uid, "cfg")
    node.mounted(uid, "creds")
    daemon.start_and_sync()
    # The daemon refreshes both (the kubelet would at its next pod sync).
    node.put_configmap("bye", {"k": "2"})
    node.put_secret("bye-secret", {"token": "SECRET-MARKER-TEARDOWN-2"})
    cfg = node.kubelet.volume_dir(uid, CM, "cfg")
    creds = node.kubelet.volume_dir(uid, SECRET, "creds")
    wait_for(lambda: (cfg / "k").read_text() == "2", what="the configMap volume refreshed")
    wait_for(lambda: (creds / "token").read_text() == "SECRET-MARKER-TEARDOWN-2",
             what="the secret volume refreshed")
    deleted = node.kubelet.offset()
    node.delete_pod("bye")
    node.kubelet.wait_log(rf'UnmountVolume\.TearDown succeeded for volume .*"creds".*{uid}',
                          since=since)
    wait_for(lambda: not cfg.exists() and not creds.exists(), timeout=30,
             what="the kubelet's teardown of both volumes")
    # Nothing comes back: the daemon set up neither, so it neither recreates nor removes them.
    time.sleep(2.0)
    assert not cfg.exists() and not creds.exists()
    assert not any(m.startswith(str(node.kubelet.pod_dir(uid))) for m in node.kubelet.mounts())
    # After the delete, the kubelet's pod worker may still try to create the container while
    # its own volume manager tears the volumes down (upstream kubernetes#88766, unfixed in
    # 1.20): its "cannot find volume" then is the kubelet's race with itself. Any other error,
    # and any error at all before the delete, is one the daemon could have caused.
    after = node.kubelet.errors(deleted, '"cfg"', '"creds"')
    before = node.kubelet.errors(since, '"cfg"', '"creds"')[:-len(after) or None]
    assert before == []
    race = "CreateContainerConfigError: cannot find volume"
    assert [line for line in after if race not in line] == []
    assert daemon.errors() == []


def test_a_subpath_bind_the_kubelet_made_is_updated_in_place(node, daemon):
    node.put_configmap("sub", {"app.conf": "level=info\n"})
    pod = node.run_pod("sub", [{"name": "cfg", "configMap": {"name": "sub"}}],
                       [{"name": "cfg", "mountPath": "/etc/app/app.conf", "subPath": "app.conf"}],
                       annotations={"volumemanager.io/update-subpaths": "true"})
    uid = pod["metadata"]["uid"]
    since = node.mounted(uid, "cfg")
    # The kubelet's own bind of the file, made before it created the container.
    bound = node.kubelet.pod_dir(uid) / "volume-subpaths" / "cfg" / "app" / "0"
    wait_for(lambda: str(bound) in node.kubelet.mounts(), what="the kubelet's subPath bind")
    assert bound.read_text() == "level=info\n"
    daemon.start_and_sync()
    node.put_configmap("sub", {"app.conf": "level=debug\n"})
    wait_for(lambda: bound.read_text() == "level=debug\n", timeout=10,
             what="the subPath file updated in place")
    assert str(bound) in node.kubelet.mounts(), "the bind itself is the kubelet's, kept"
    assert node.kubelet.errors(since, '"cfg"', uid) == []
    assert daemon.errors() == []


LISTENER = """
import http.server, socketserver, sys
class S(http.server.HTTPServer):
    def server_bind(self):  # no name lookup of the address (no resolver in a pod network)
        socketserver.TCPServer.server_bind(self)
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        with open(sys.argv[2], "a") as f:
            f.write(self.command + " " + self.path + " " + self.client_address[0] + "\\n")
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *args):
        pass
S(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
"""


def test_a_reload_call_reaches_the_pod_ip_the_kubelet_reported(node, daemon, tmp_path):
    node.put_configmap("web", {"site.conf": "v1\n"})
    pod = node.run_pod("web", [{"name": "cfg", "configMap": {"name": "web"}}],
                       [{"name": "cfg", "mountPath": "/etc/web"}],
                       annotations={"volumemanager.io/reload": "POST http://:9090/-/reload",
                                    "volumemanager.io/reload-delay": "0s"})
    uid = pod["metadata"]["uid"]
    pod_ip = pod["status"]["podIP"]
    assert pod_ip != node.node_ip
    since = node.mounted(uid, "cfg")
    calls = tmp_path / "calls"
    calls.touch()
    # The application: a listener inside the pod's network namespace, on every address there.
    listener = subprocess.Popen([*node.networks.enter(pod_ip), sys.executable, "-c", LISTENER,
                                 "9090", str(calls)])
    try:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no HTTP_PROXY

        def listening():
            try:
                with direct.open(urllib.request.Request(f"http://{pod_ip}:9090/ready",
                                                        method="POST", data=b""), timeout=1):
                    return True
            except OSError:
                return False
        wait_for(listening, what="the pod's listener")
        calls.write_text("")
        daemon.start_and_sync()
        node.put_configmap("web", {"site.conf": "v2\n"})
        volume = node.kubelet.volume_dir(uid, CM, "cfg")
        wait_for(lambda: (volume / "site.conf").read_text() == "v2\n", what="the refresh")
        wait_for(lambda: calls.read_text(), what="the reload call")
        call = calls.read_text().splitlines()
        assert call[0].split()[:2] == ["POST", "/-/reload"], call
        wait_for(lambda: [e for e in node.events("web") if e["reason"] == "Reloaded"],
                 what="the Reloaded Event")
    finally:
        listener.kill()
        listener.wait()
    assert node.kubelet.errors(since, '"cfg"', uid) == []
    assert daemon.errors() == []


def observe_differing(daemon):
    probe, _ = daemon.admin_addresses()
    with urllib.request.urlopen(probe + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("volumemanager_observe_volumes_differing"):
                return float(line.rsplit(" ", 1)[1])
    return None


def versions_not_the_kubelets(node, volume):
    """Version directories in `volume` that the kubelet's log does not say it wrote."""
    written = node.kubelet.versions_written()
    return [name for name in os.listdir(volume)
            if name.startswith("..") and name != "..data" and name not in written]


def test_observe_mode_reports_what_the_kubelet_has_not_written_yet_and_writes_nothing(
        node, daemon):
    node.put_configmap("watched", {"k": "1"})
    pod = node.run_pod("watched", [{"name": "cfg", "configMap": {"name": "watched"}}],
                       [{"name": "cfg", "mountPath": "/etc/app"}])
    uid = pod["metadata"]["uid"]
    since = node.mounted(uid, "cfg")
    volume = node.kubelet.volume_dir(uid, CM, "cfg")
    # The kubelet syncs a pod again as its containers are seen started and its status posted,
    # and such a sync writes a change made meanwhile: the window below starts after them.
    node.kubelet.wait_quiet(uid)
    daemon.start_and_sync("--observe")
    wait_for(lambda: observe_differing(daemon) == 0, what="nothing differing at first")
    before = sorted(os.listdir(volume))
    node.put_configmap("watched", {"k": "2"})
    wait_for(lambda: observe_differing(daemon) == 1, what="the volume reported differing")
    # Should a pod sync of the kubelet's own still fall in this window and write the change,
    # every version the volume holds must be one the kubelet's log names as its own. A version
    # it names nowhere is a write of the daemon's.
    wait_for(lambda: not versions_not_the_kubelets(node, volume), timeout=5,
             what="every version in the volume named in the kubelet's log")
    if sorted(os.listdir(volume)) == before:
        assert (volume / "k").read_text() == "1"
    # A pod update: the kubelet's pod sync writes the change, and observe mode sees it done.
    node.touch_pod("watched", 1)
    wait_for(lambda: (volume / "k").read_text() == "2", timeout=30,
             what="the kubelet's own refresh at its pod sync")
    wait_for(lambda: observe_differing(daemon) == 0, what="nothing differing once it wrote")
    assert node.kubelet.errors(since, '"cfg"', uid) == []
    assert daemon.errors() == []
