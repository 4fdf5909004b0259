"""`volumemanager preflight` and the daemon agree on the credentials and the node (issue 44):
preflight takes the daemon's own flags and reads no $KUBECONFIG; a --node-name with no Node
fails preflight, is "not checked" (exit status 3) without the right to get nodes, and has the
daemon warn and report not ready until the Node appears; credentials with rights no mode needs
(an admin's) get a warning from both. Against the test server and the real kube-apiserver, with
the chart's rights (its ClusterRole: the test server's ACL, or on the real server the chart's
RBAC as `helm install` creates it).
"""
import os
import shutil
import subprocess

import pytest

from conftest import BIN, killed_after, readyz, wait_for
from test_cluster import DAEMON_USER, NODE, Cluster
from api_servers import SERVERS, api_server, render_chart

# The chart's ClusterRole (helm/volumemanager/templates/clusterrole.yaml, default values) as the
# test server's ACL.
CHART_RULES = [{"verbs": ["get", "list", "watch"], "resources": ["pods", "configmaps", "secrets"]},
               {"verbs": ["create", "patch"], "resources": ["events"]},
               {"verbs": ["get"], "resources": ["nodes"]}]
EXCESS = "may do anything to any resource (* on *); create pods: rights no mode of the daemon " \
         "needs"


@pytest.fixture(params=SERVERS)
def cluster(request, tmp_path):
    """The daemon's kubeconfig (its service account's token) with the chart's rights, and the
    Node NODE registered."""
    with api_server(request.param, tmp_path) as server, \
            killed_after(Cluster(tmp_path, server, request.param)) as c:
        chart_rights(c)
        yield c


def chart_rights(c, nodes=True):
    """The chart's rights for the daemon's account; without `get` on nodes when not `nodes`."""
    if c.server.kind == "test":
        rules = [r for r in CHART_RULES if nodes or r["resources"] != ["nodes"]]
        c.server.admin("POST", "acl", {"user": DAEMON_USER, "rules": rules})
        return
    role = next(o for o in render_chart() if o["kind"] == "ClusterRole")
    if not nodes:
        role["rules"] = [r for r in role["rules"] if "nodes" not in r["resources"]]
    status, body = c.server.apply(role)
    assert status == 200, body


def preflight(*args, env=None):
    return subprocess.run([BIN, "preflight", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_preflight_takes_the_daemons_credentials_never_kubeconfig_env(cluster):
    c = cluster
    admin = {"KUBECONFIG": c.server.kubeconfig}
    # $KUBECONFIG alone (an admin's, which would pass every check): not read.
    # The daemon's parser refuses a start with no source of pods, as the daemon would (exit 2).
    r = preflight("--node-name", NODE, env=admin)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == "volumemanager preflight: no pod source: give --pod-manifest-path DIR " \
        "and/or --manifest-url URL (standalone), or --kubeconfig FILE / --in-cluster (cluster " \
        f"mode); $KUBECONFIG ({c.server.kubeconfig}) is ignored, as by the daemon: pass the " \
        "file the daemon will use with --kubeconfig (see --help)\n", r.stderr
    assert r.stdout == ""
    # With the daemon's --kubeconfig the first line names that file and the identity checked,
    # whatever $KUBECONFIG says.
    r = preflight("--kubeconfig", str(c.kubeconfig), "--node-name", NODE, env=admin)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"credentials kubeconfig {c.kubeconfig} context "), first
    if c.server.kind == "test":
        assert f", identity {DAEMON_USER} (groups system:authenticated; from " \
               "SelfSubjectReview)" in first, first
    else:  # 1.20: no SelfSubjectReview, and a token has no subject of its own
        assert ", identity unknown (the server does not serve SelfSubjectReview" in first, first
    assert "ok    rights beyond need: none of: " in r.stdout


def test_preflight_fails_on_a_node_that_does_not_exist(cluster):
    r = preflight("--kubeconfig", str(cluster.kubeconfig), "--node-name", NODE + "e")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f'\nFAIL  node {NODE}e exists: node "{NODE}e" does not exist: no pod is ever bound ' \
           "to it, so the daemon serves nothing; --node-name (else $NODE_NAME, else the host " \
           "name) must be the name the kubelet registered (kubectl get nodes)\n" in r.stdout


def test_preflight_without_the_right_to_get_nodes_says_not_checked(cluster):
    chart_rights(cluster, nodes=False)
    r = preflight("--kubeconfig", str(cluster.kubeconfig), "--node-name", NODE + "e")
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"\nSKIP  node {NODE}e exists: not checked: no right to get nodes (" in r.stdout
    assert "FAIL" not in r.stdout


def test_preflight_warns_of_rights_no_mode_needs(cluster):
    r = preflight("--kubeconfig", cluster.server.kubeconfig, "--node-name", NODE)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "\nWARN  rights beyond need: " in r.stdout and EXCESS in r.stdout, r.stdout


def test_the_daemon_warns_while_its_node_is_missing_and_recovers(cluster):
    c = cluster
    c.api("DELETE", f"/api/v1/nodes/{NODE}")
    c.start()
    missing = f'node "{NODE}" does not exist'
    wait_for(lambda: c.records(level="warning", msg=lambda m: m.startswith(missing)),
             timeout=30, what="the missing node's warning")
    wait_for(lambda: f"[-]node-exists failed: {missing}\n" in readyz(c)[1], timeout=30,
             what="/readyz naming the missing node")
    assert readyz(c)[0] != 200
    c.create_node(NODE)
    wait_for(lambda: readyz(c)[0] == 200, timeout=30, what="ready once the node exists")
    assert c.records(level="info", msg=f'node "{NODE}" exists now: serving its pods')
    # One warning, not one per check (every 5 s; at most one a minute).
    assert len(c.records(level="warning", msg=lambda m: m.startswith(missing))) == 1
    assert c.stop() == 0


def test_the_daemon_warns_once_of_rights_no_mode_needs(cluster):
    c = cluster
    c.start()
    wait_for(lambda: readyz(c)[0] == 200, timeout=30, what="ready")
    assert not c.records(msg=lambda m: EXCESS in m)
    assert c.stop() == 0
    # An admin's kubeconfig for the daemon.
    shutil.copy(c.server.kubeconfig, c.kubeconfig)
    c.start()
    wait_for(lambda: c.records(level="warning", msg=lambda m: EXCESS in m), timeout=30,
             what="the warning about rights beyond need")
    wait_for(lambda: readyz(c)[0] == 200, timeout=30, what="ready")
    assert len(c.records(level="warning", msg=lambda m: EXCESS in m)) == 1
    assert c.stop() == 0
