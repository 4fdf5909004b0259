"""The daemon in cluster mode under a node's identity (the kubelet's credentials: user
system:node:<node>, group system:nodes), against kube-test-apiserver's Node authorizer
(tests/apiserver/kubetestserver/node_authorizer.py).

In each change-detection strategy the daemon reads everything it needs, in two namespaces, with
no 403; a pod deleted or moved revokes the node's grant and the server answers the daemon 403,
which it survives keeping the disk as it is; and what a node may not do is refused at start:
another node's name, the Lease lock, dynamic config. The identity comes from a token (mapped to
the node user) or from the client certificate (CN system:node:<node>, O system:nodes), through
SelfSubjectReview or, where the server does not serve it, from the certificate itself.
"""
import signal
import subprocess
import time

import pytest
import yaml
from pathlib import Path

from conftest import BIN, killed_after, visible_files, wait_for
from test_cluster import CM, DAEMON_USER, NODE, PROJECTED, SECRET, Cluster, cm_volume, \
    secret_volume
from api_servers import NODE_TOKEN, NODE_USER, SERVERS, api_server

NODE_MODE_LINE = f'node mode for node "{NODE}"'
# Variants the real kube-apiserver (1.20.2) cannot serve: it has no SelfSubjectReview (1.28+), so
# a node's bearer token cannot be told from another user's; its client certificate can.
REAL_SERVER_EXCLUDES = {("node_cluster", "token"): "1.20 has no SelfSubjectReview",
                        ("review", "served"): "1.20 has no SelfSubjectReview"}


class NodeCluster(Cluster):
    """The Cluster of test_cluster.py with the daemon's kubeconfig holding a node credential:
    `token` (NODE_TOKEN, mapped to NODE_USER in system:nodes) or `certificate` (the test
    server's client certificate, whose CN is NODE_USER)."""

    def __init__(self, tmp, server, credential):
        self.credential = credential
        super().__init__(tmp, server)
        server.admin("POST", "tokens", {"token": NODE_TOKEN, "user": NODE_USER,
                                        "groups": ["system:nodes"]})
        self.markers.add(NODE_TOKEN)

    def write_kubeconfig(self, port=None, token_file=False):
        config = yaml.safe_load(Path(self.server.kubeconfig).read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{port or self.api_port}"
        pki = Path(self.server.pki)
        for user in config["users"]:
            if self.credential == "token":
                user["user"] = {"token": NODE_TOKEN}
            else:
                user["user"] = {"client-certificate": str(pki / "client.crt"),
                                "client-key": str(pki / "client.key")}
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def answered_403(self, since=0.0):
        """The daemon's requests refused with 403, but SelfSubjectReview on a server that does
        not serve it: Kubernetes 1.20 authorizes before it routes, so an unserved resource is
        403 (RBAC grants no one the unknown group), where the test server stands for an old
        server with a 404."""
        return [r for r in self.daemon_requests(since) if r.get("code") == 403 and not (
            self.server.kind == "real" and r["path"].endswith("/selfsubjectreviews"))]


@pytest.fixture(params=SERVERS)
def server_kind(request):
    """The API server the test runs against (api_servers.py)."""
    return request.param


@pytest.fixture
def node_cluster(request, tmp_path, server_kind):
    credential = getattr(request, "param", "certificate" if server_kind == "real" else "token")
    with api_server(server_kind, tmp_path, client_cert_user=NODE_USER) as server, \
            killed_after(NodeCluster(tmp_path, server, credential)) as c:
        yield c


def identity_line(c):
    """How the daemon says it learnt its identity: from SelfSubjectReview where the server serves
    it (the test server; Kubernetes 1.28+), else from the client certificate."""
    if c.server.kind == "real":
        return (f"API identity {NODE_USER} (groups system:nodes; from client certificate (the "
                "server does not serve SelfSubjectReview")
    return (f"API identity {NODE_USER} (groups system:nodes, system:authenticated; from "
            "SelfSubjectReview)")


def strategy_args(strategy):
    args = ["--config-map-and-secret-change-detection-strategy", strategy]
    if strategy != "Watch":
        # Get and Cache see a change at the next per-pod resync.
        args += ["--object-cache-ttl", "0s", "--sync-frequency", "500ms"]
    return args


def set_up_pods(c):
    """web (default) reads configmap default/app; api (shop) reads secret shop/tls and, projected,
    configmap shop/app; a pod of another node reads shop/theirs, which this node may not read.
    Returns the uids of web and api, their volumes set up by the kubelet."""
    c.put_configmap("app", {"level": "info"})
    c.put_configmap("app", {"mode": "a"}, namespace="shop")
    c.put_secret("tls", {"tls.key": "SECRET-MARKER-NODE-1"}, namespace="shop")
    c.put_secret("theirs", {"k": "SECRET-MARKER-NODE-THEIRS"}, namespace="shop")
    web = c.create_pod("web", [cm_volume("cfg", "app")])
    api = c.create_pod("api", [secret_volume("tls", "tls"), {"name": "all", "projected": {
        "sources": [{"configMap": {"name": "app"}}]}}], namespace="shop")
    c.create_pod("elsewhere", [secret_volume("s", "theirs")], node="other-node", namespace="shop")
    c.kubelet_sets_up(web, CM, "cfg", {"level": "info"})
    c.kubelet_sets_up(api, SECRET, "tls", {"tls.key": "SECRET-MARKER-NODE-1"})
    c.kubelet_sets_up(api, PROJECTED, "all", {"mode": "a"})
    return web, api


@pytest.mark.parametrize("strategy,node_cluster", [("Watch", "certificate"), ("Cache", "token"),
                                                   ("Cache", "certificate"),
                                                   ("Get", "certificate")],
                         indirect=["node_cluster"])
def test_node_identity_reads_what_its_pods_reference_in_every_strategy(node_cluster, strategy):
    c = node_cluster
    web, api = set_up_pods(c)
    c.start(*strategy_args(strategy))
    wait_for(lambda: NODE_MODE_LINE in c.log(), what="the node-mode line")
    assert identity_line(c) in c.log()
    c.put_configmap("app", {"level": "debug"})
    c.put_configmap("app", {"mode": "b"}, namespace="shop")
    c.put_secret("tls", {"tls.key": "SECRET-MARKER-NODE-2"}, namespace="shop")
    wait_for(lambda: visible_files(c.volume_dir(web, CM, "cfg")) == {"level": b"debug"},
             what="configmap default/app current")
    wait_for(lambda: visible_files(c.volume_dir(api, PROJECTED, "all")) == {"mode": b"b"},
             what="configmap shop/app current")
    wait_for(lambda: visible_files(c.volume_dir(api, SECRET, "tls")) ==
             {"tls.key": b"SECRET-MARKER-NODE-2"}, what="secret shop/tls current")
    # Everything the daemon asked, it asked as the node, and the Node authorizer granted it.
    users = {r.get("user") for r in c.daemon_requests()}
    assert users == {NODE_USER}, users
    assert c.answered_403() == []
    assert c.stop() == 0


@pytest.mark.test_server_only("a stalled pod watch and reset pod lists for the node (fault hooks)")
@pytest.mark.parametrize("strategy", ["Watch", "Get"])
def test_a_pod_deleted_or_moved_revokes_access_and_the_daemon_keeps_the_disk(node_cluster,
                                                                             strategy):
    c = node_cluster
    web, api = set_up_pods(c)
    # The daemon's pod watch stalls, so it goes on serving both pods after the API has removed
    # them (as a daemon whose view lags would): its next read of their objects meets the revoked
    # grant.
    c.server.admin("POST", "faults", {"verb": "watch", "resource": "pods", "user": NODE_USER,
                                      "times": -1, "watch": {"stall": True}})
    c.start(*strategy_args(strategy))
    cm_paths = ("/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/configmaps/app")
    secret_paths = ("/api/v1/namespaces/shop/secrets", "/api/v1/namespaces/shop/secrets/tls")

    def answered(code, since, paths):
        return any(r["path"] in paths and r.get("code") == code for r in c.daemon_requests(since))
    wait_for(lambda: answered(200, 0.0, cm_paths) and answered(200, 0.0, secret_paths),
             what="the daemon's first reads of both objects")
    # ... and its relists of pods fail from now on (the connection reset), so its view of them
    # stays as it is.
    c.server.admin("POST", "faults", {"verb": "list", "resource": "pods", "user": NODE_USER,
                                      "times": -1, "reset": True})
    # Deleted: api. Moved: web, deleted here and created again on another node.
    c.delete("/api/v1/namespaces/shop/pods/api?gracePeriodSeconds=0")
    c.delete("/api/v1/namespaces/default/pods/web?gracePeriodSeconds=0")
    c.create_pod("web", [cm_volume("cfg", "app")], node="other-node")
    if strategy == "Watch":
        # Open watches go on after the grant goes (as on a real server, which authorizes a
        # request when it starts); the next ones are refused.
        c.server.admin("POST", "drop-watches", {})

    def refused(since, *paths):
        return answered(403, since, paths)

    def both_refused(since):
        wait_for(lambda: refused(since, *cm_paths), timeout=60,
                 what="a 403 on configmap default/app")
        wait_for(lambda: refused(since, *secret_paths), timeout=60,
                 what="a 403 on secret shop/tls")
    both_refused(0.0)
    # Changed now, the objects are refused to the daemon's next reads as well.
    changed = time.time()
    c.put_configmap("app", {"level": "debug"})
    c.put_secret("tls", {"tls.key": "SECRET-MARKER-NODE-3"}, namespace="shop")
    both_refused(changed)
    body = c.server.request("GET", "/api/v1/namespaces/shop/secrets/tls", token=NODE_TOKEN)[1]
    assert body["message"].endswith(f"no relationship found between node '{NODE}' and this "
                                    "object")
    # The daemon lives on and the disk stays as the kubelet left it.
    assert c.proc.poll() is None
    assert visible_files(c.volume_dir(web, CM, "cfg")) == {"level": b"info"}
    assert visible_files(c.volume_dir(api, SECRET, "tls")) == {"tls.key": b"SECRET-MARKER-NODE-1"}
    # Once the pod watch works again the daemon learns the pods are gone, and stops cleanly.
    c.server.admin("DELETE", "faults")
    c.server.admin("POST", "drop-watches", {})
    assert c.stop() == 0
    assert visible_files(c.volume_dir(web, CM, "cfg")) == {"level": b"info"}


def run_to_exit(c, *extra):
    c.start(*extra)
    rc = c.proc.wait(timeout=60)
    c.proc = None
    c._log.close()
    return rc


@pytest.mark.parametrize("extra,message", [
    (["--leader-elect-resource-lock", "leases"],
     f"--leader-elect-resource-lock leases: refused under the node identity {NODE_USER}: a node "
     f"may write no Lease but its own heartbeat (kube-node-lease/{NODE})"),
    (["--dynamic-config", "kube-system/volumemanager-config"],
     f"--dynamic-config kube-system/volumemanager-config: refused under the node identity "
     f"{NODE_USER}"),
], ids=["lease-lock", "dynamic-config"])
def test_what_a_node_may_not_do_is_refused_at_start(node_cluster, extra, message, tmp_path):
    if "--dynamic-config" in extra:
        extra = extra + ["--dynamic-config-dir", str(tmp_path / "dynamic")]
    assert run_to_exit(node_cluster, *extra) == 2
    assert message in node_cluster.log()
    assert node_cluster.answered_403() == []


def test_another_nodes_credentials_are_refused(node_cluster, tmp_path):
    c = node_cluster
    c.started = True
    proc = subprocess.run([BIN, "--kubeconfig", str(c.kubeconfig), "--root-dir", str(c.root),
                           "--state-dir", str(c.state), "--node-name", "not-this-node",
                           "--healthz-bind-address", "127.0.0.1:0",
                           "--debug-bind-address", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert (f'--node-name "not-this-node": the credentials are node "{NODE}"\'s'
            in proc.stderr), proc.stderr
    assert NODE_TOKEN not in proc.stderr + proc.stdout


@pytest.mark.test_server_only("a 404 for SelfSubjectReview (fault hook; a real 1.20 server "
                              "has none: every real-server test of node mode shows it)")
@pytest.mark.parametrize("node_cluster", ["certificate"], indirect=True)
def test_without_self_subject_review_the_certificate_names_the_node(node_cluster):
    c = node_cluster
    c.server.admin("POST", "faults", {"resource": "selfsubjectreviews", "status": 404,
                                      "times": -1})
    web, _ = set_up_pods(c)
    c.start()
    wait_for(lambda: NODE_MODE_LINE in c.log(), what="the node-mode line")
    assert (f"API identity {NODE_USER} (groups system:nodes; from client certificate (the "
            "server does not serve SelfSubjectReview") in c.log()
    c.put_configmap("app", {"level": "debug"})
    wait_for(lambda: visible_files(c.volume_dir(web, CM, "cfg")) == {"level": b"debug"},
             what="configmap default/app current")
    assert c.stop() == 0


@pytest.mark.parametrize("review", ["served", "not-served"])
def test_a_service_account_runs_as_before(tmp_path, server_kind, review):
    """A service account's token: SelfSubjectReview names it where the server serves it; where
    it does not (Kubernetes before 1.28: the real 1.20 server answers 403, the test server is
    told to answer 404) a token cannot be told from another user's, and the daemon says so at
    info, not as a warning: nothing for the user to do."""
    with api_server(server_kind, tmp_path) as server:
        if review == "not-served" and server_kind == "test":
            server.admin("POST", "faults", {"resource": "selfsubjectreviews", "status": 404,
                                            "times": -1})
        c = Cluster(tmp_path, server, server_kind)
        try:
            c.start()
            wait_for(lambda: "service-account mode" in c.log() or
                     "running as for a service account" in c.log(), what="the mode line")
            if review == "served":
                assert f"API identity {DAEMON_USER} (groups system:authenticated; from " \
                    "SelfSubjectReview): service-account mode" in c.log()
            else:
                lines = c.records(msg=lambda m: m.startswith("API identity unknown (the server "
                                                             "does not serve SelfSubjectReview"))
                assert len(lines) == 1, c.log()
                assert lines[0]["level"] == "info", lines
                assert "the credentials hold no client certificate" in lines[0]["msg"]
            assert c.stop() == 0
        finally:
            if c.proc is not None:
                c.stop(signal.SIGKILL)
