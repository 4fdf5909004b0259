"""Permanent API failures are errors, transient ones are retried (issue 44, item 3), against
kube-test-apiserver.

A permanent failure (the server's certificate not trusted, 401, an unusable client certificate)
before the server was ever reached ends the daemon at start: exit 1, one line naming the server,
the file and what is wrong, as the kubelet does with bad bootstrap credentials. An unreachable
server at start is transient: the daemon keeps retrying, not Ready, and says the identity only once
the server confirmed it. After a good start a permanent failure (a revoked token) is an error line
(one, not one per retry), the metric volumemanager_api_permanent_error, and /readyz's api-server
check failing with the reason; the server accepting the credentials again clears all three.
"""
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from api_servers import DAEMON_TOKEN, DAEMON_USER, NODE, SERVERS, api_server
from conftest import wait_for
from test_cluster import Cluster, free_port
from test_node_identity import NODE_MODE_LINE, NodeCluster


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(c, line_start):
    probe, _ = c.admin_addresses()
    _, text = get(probe + "/metrics")
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(line_start)]
    return values[0] if values else None


def readyz(c):
    probe, _ = c.admin_addresses()
    return get(probe + "/readyz?verbose")



@pytest.fixture(params=SERVERS)
def server_kind(request):
    """The API server the test runs against (api_servers.py)."""
    return request.param


@pytest.fixture
def cluster(tmp_path, server_kind):
    with api_server(server_kind, tmp_path) as server:
        c = Cluster(tmp_path, server)
        try:
            yield c
        finally:
            if c.proc is not None:
                c.stop(timeout=20)
        c.assert_no_secret_leaked()


def run_to_exit(c):
    c.start()
    rc = c.proc.wait(timeout=60)
    c.proc = None
    c._log.close()
    return rc


def exit_line(c):
    lines = [line for line in c.log().splitlines() if line.startswith("volumemanager: ")]
    assert lines, c.log()
    return lines[-1]


def test_a_ca_that_does_not_verify_the_server_ends_the_start(cluster, tmp_path):
    c = cluster
    wrong_ca = tmp_path / "wrong-ca.crt"
    # A certificate the test CA issued, not the CA: the server's chain does not verify.
    wrong_ca.write_text((Path(c.server.pki) / "client.crt").read_text())
    config = yaml.safe_load(c.kubeconfig.read_text())
    for cl in config["clusters"]:
        cl["cluster"].pop("certificate-authority-data", None)
        cl["cluster"]["certificate-authority"] = str(wrong_ca)
    c.kubeconfig.write_text(yaml.safe_dump(config))
    assert run_to_exit(c) == 1
    line = exit_line(c)
    assert f"API server https://127.0.0.1:{c.server.port}" in line, line
    assert f"the server is not trusted (CA file {wrong_ca})" in line, line
    assert "is not trusted" in line.split(")", 1)[1], line
    assert "API identity" not in c.log(), c.log()
    assert "retry 1 in" not in c.log()


def test_a_token_the_server_refuses_ends_the_start(cluster):
    c = cluster
    config = yaml.safe_load(c.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": "a-token-the-server-never-issued"}
    c.kubeconfig.write_text(yaml.safe_dump(config))
    assert run_to_exit(c) == 1
    line = exit_line(c)
    assert f"API server https://127.0.0.1:{c.server.port}" in line, line
    assert "the server refused the credentials (the token in the kubeconfig): 401" in line, line
    assert "API identity" not in c.log(), c.log()


def test_an_unreachable_server_at_start_is_retried_and_not_ready(cluster):
    c = cluster
    port = free_port()
    c.write_kubeconfig(port=port)
    c.start()
    wait_for(lambda: f"API server https://127.0.0.1:{port}" in c.log() and
             "not reached at start" in c.log(), what="the warning that the server is not reached")
    start = [r for r in c.records() if "not reached at start" in r.get("msg", "")]
    assert start and start[0]["level"] == "warning", start
    code, body = wait_for(lambda: (lambda r: r if "[-]api-server" in r[1] else None)(readyz(c)),
                          what="/readyz naming the API failure")
    assert code == 503, body
    assert "transient API failure (unreachable)" in body, body
    time.sleep(2)
    assert c.proc.poll() is None, c.log()  # still retrying
    # Not a confirmed identity: at most that it is unknown.
    assert not re.search(r"API identity \S+ \(groups", c.log()), c.log()
    assert metric(c, 'volumemanager_api_failures_total{class="transient",reason="unreachable"}') > 0
    assert metric(c, 'volumemanager_api_permanent_error{reason="unauthorized"}') == 0


@pytest.mark.test_server_only("an outage that answers nothing (fault hook)")
def test_the_identity_is_said_once_the_server_confirmed_it(tmp_path):
    with api_server("test", tmp_path, client_cert_user=f"system:node:{NODE}") as server:
        c = NodeCluster(tmp_path, server, "certificate")
        try:
            server.admin("POST", "outage", {"down": True})
            c.start()
            wait_for(lambda: "not reached at start" in c.log(), what="the start without answer")
            time.sleep(1)
            assert NODE_MODE_LINE not in c.log()
            server.admin("POST", "outage", {"down": False})
            wait_for(lambda: NODE_MODE_LINE in c.log(), timeout=30,
                     what="the identity line once the server answered")
            wait_for(lambda: "[+]api-server" in readyz(c)[1] or readyz(c)[0] == 200,
                     what="the api-server check passing")
        finally:
            if c.proc is not None:
                c.stop(timeout=20)


@pytest.mark.test_server_only("a token revoked and restored while the server runs (the real "
                              "server's token file is read at its start)")
def test_a_revoked_token_after_a_good_start_is_an_error_until_it_is_accepted_again(tmp_path):
    with api_server("test", tmp_path) as server:
        c = Cluster(tmp_path, server)
        try:
            revoke_and_restore(c)
        finally:
            if c.proc is not None:
                c.stop(timeout=20)
        c.assert_no_secret_leaked()


def revoke_and_restore(c):
    c.start_and_sync()
    assert f"API identity {DAEMON_USER}" in c.log()
    wait_for(lambda: readyz(c)[0] == 200, what="ready")
    c.server.admin("POST", "tokens", {"token": DAEMON_TOKEN})  # revoked
    c.server.admin("POST", "drop-watches", {})  # the re-watches meet the 401
    wait_for(lambda: metric(c, 'volumemanager_api_permanent_error{reason="unauthorized"}') == 1,
             what="the permanent-error metric")
    code, body = readyz(c)
    assert code == 503, body
    assert "[-]api-server failed: permanent API failure (unauthorized)" in body, body
    time.sleep(3)  # several retries
    errors = c.records(msg=lambda m: m.startswith("API requests fail"))
    assert len(errors) == 1, errors
    assert errors[0]["level"] == "error" and errors[0]["reason"] == "unauthorized", errors
    assert f"127.0.0.1:{c.server.port}" in errors[0]["server"], errors
    assert c.proc.poll() is None  # reached once: no exit
    c.server.admin("POST", "tokens", {"token": DAEMON_TOKEN, "user": DAEMON_USER})
    wait_for(lambda: readyz(c)[0] == 200, timeout=60, what="ready again")
    assert metric(c, 'volumemanager_api_permanent_error{reason="unauthorized"}') == 0
    assert c.records(msg="The API server answers again"), c.log()
    assert metric(c, 'volumemanager_api_failures_total{class="permanent",reason="unauthorized"}') >= 1


@pytest.mark.test_server_only("an outage that answers nothing, then a revoked token (fault hook, "
                              "token revoked while the server runs)")
def test_a_permanent_failure_at_the_first_answer_after_an_unreachable_start_ends_it(tmp_path):
    with api_server("test", tmp_path) as server:
        c = Cluster(tmp_path, server)
        try:
            server.admin("POST", "outage", {"down": True})
            c.start()
            wait_for(lambda: "not reached at start" in c.log(), what="the start without answer")
            server.admin("POST", "tokens", {"token": DAEMON_TOKEN})  # revoked
            server.admin("POST", "outage", {"down": False})
            assert c.proc.wait(timeout=60) == 1, c.log()
            c.proc = None
            errors = [r for r in c.records() if r.get("level") == "error" and
                      "the server was never reached with these credentials: stopping" in r["msg"]]
            assert len(errors) == 1, c.log()
            assert f"API server https://127.0.0.1:{server.port}" in errors[0]["msg"], errors
            assert "the server refused the credentials (the token in the kubeconfig): 401" in \
                errors[0]["msg"], errors
        finally:
            if c.proc is not None:
                c.stop(timeout=20)
