"""What only the real kube-apiserver (v1.20.2, tests/realkube) shows: a 410 Expired on a watch
resumed past an etcd compaction, bookmarks, a restart and the refusals after it (RBAC's, and the
Node authorizer's while its graph fills), the chart's namespaced RBAC, and the chart in every
credential mode applied with a server-side dry run.

The cluster-mode tests that run against the test server run against the real one too
(parametrized by server: api_servers.py); these are the real server's own.
Run by ctest's `realkube` entry with VM_API_SERVERS=real (deselected otherwise).
"""
import json
import time
from pathlib import Path

import pytest

from api_servers import (DAEMON_TOKEN, NODE_USER, api_server, render_chart)
from conftest import killed_after, visible_files, wait_for
from test_cluster import CM, Cluster, TcpForwarder, cm_volume, free_port
from test_node_identity import NodeCluster

pytestmark = pytest.mark.real_server_only("the real kube-apiserver's own behaviour")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def real_cluster(tmp_path):
    with api_server("real", tmp_path) as server, \
            killed_after(Cluster(tmp_path, server, "real")) as c:
        yield c


@pytest.fixture
def real_node_cluster(tmp_path):
    with api_server("real", tmp_path, client_cert_user=NODE_USER) as server, \
            killed_after(NodeCluster(tmp_path, server, "certificate")) as c:
        yield c


def readable_again(c, path, **credentials):
    """Polls GET `path` with the daemon's credentials every 100 ms until it answers 200 (at most
    120 s); returns the time (time.time()) of that answer and the codes seen before it."""
    codes = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            status, _ = c.server.request("GET", path, **credentials)
        except OSError:
            status = "refused"
        if status == 200:
            return time.time(), codes
        codes.append(status)
        time.sleep(0.1)
    raise AssertionError(f"{path} not readable with the daemon's credentials in 120 s: {codes[-5:]}")


def watches_of(c, name, since=0.0):
    """The daemon's watch requests of configmap default/`name` since `since`: the
    resourceVersion each resumed from, oldest first (from the server's audit log)."""
    return [int(r["query"]["resourceVersion"]) for r in c.daemon_requests(since)
            if r["query"].get("watch") in ("true", "1") and r["path"].endswith("/configmaps")
            and r["query"].get("fieldSelector") == f"metadata.name={name}"
            and r["query"].get("resourceVersion", "").isdigit()]


def expired_lines(c):
    return [line for line in c.log().splitlines()
            if "too old resource version" in line or "Expired" in line]


def churn(c, seconds, names=5):
    """Changes other ConfigMaps (`names` of them, in turn) once a second for `seconds`."""
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        c.put_configmap(f"churn-{i % names}", {"i": str(i)})
        i += 1
        time.sleep(1.0)


@pytest.fixture
def etcd_watch_cluster(tmp_path):
    """The daemon behind a TCP forwarder the test can cut, against a server that serves
    ConfigMap watches from etcd (no watch cache for them: 1.20 sizes its caches to keep 75 s of
    events whatever --watch-cache-sizes says): a watch resumed from a revision etcd has compacted
    away is answered 410."""
    with api_server("real", tmp_path, watch_cache_sizes="configmaps#0") as server, \
            killed_after(Cluster(tmp_path, server, "real")) as c:
        yield c


def test_a_watch_resumed_from_a_compacted_revision_is_answered_410_and_relisted(
        etcd_watch_cluster):
    """The daemon's connection is cut while other ConfigMaps change and etcd compacts: the
    watch it resumes from its resourceVersion is answered 410 Expired, the daemon relists, and a
    change made after it lands."""
    c = etcd_watch_cluster
    forward_port = free_port()
    forwarder = TcpForwarder(forward_port, c.server.port)
    forwarder.start()
    c.write_kubeconfig(port=forward_port)
    c.put_configmap("app", {"level": "1"})
    uid = c.create_pod("web", [cm_volume("cfg", "app")])
    c.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    c.start()
    c.wait_synced("configmap default/app")
    c.wait_watches_settled(watches=2)
    forwarder.stop()
    wait_for(lambda: "Watch broke" in c.log(), what="the daemon's watches cut")
    for i in range(5):
        c.put_configmap(f"churn-{i}", {"i": str(i)})
    c.server.etcd_compact()
    forwarder = TcpForwarder(forward_port, c.server.port)
    forwarder.start()
    try:
        wait_for(lambda: expired_lines(c), timeout=60,
                 what="the resumed watch answered 410 Expired")
        c.put_configmap("app", {"level": "2"})
        wait_for(lambda: visible_files(c.volume_dir(uid, CM, "cfg")) == {"level": b"2"},
                 timeout=60, what="the change after the relist")
        assert c.stop() == 0
    finally:
        forwarder.stop()


def restart(c, outage=3.0):
    """Kills the server, waits `outage` seconds, starts it again without waiting for it."""
    c.server.kill()
    time.sleep(outage)
    c.server.start(wait=False)


def test_bookmarks_then_a_restart_then_a_change_as_soon_as_the_daemon_may_read(real_cluster):
    """The daemon's watch of one ConfigMap moves on with the server's bookmarks (1.20 sends one
    about every minute) while only other ConfigMaps change. The server is killed and started
    again: the daemon resumes from the bookmark's resourceVersion; its reads are refused while
    the RBAC authorizer fills its caches; a change made as soon as its identity may read the
    object again reaches the disk, and no FailedMount Event is posted."""
    c = real_cluster
    created = c.put_configmap("app", {"level": "1"})
    first_rv = int(created["metadata"]["resourceVersion"])
    uid = c.create_pod("web", [cm_volume("cfg", "app")])
    c.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    c.start()
    c.wait_synced("configmap default/app")
    churn(c, 70)
    killed = time.time()
    restart(c)
    readable, codes = readable_again(c, "/api/v1/namespaces/default/configmaps/app",
                                     token=DAEMON_TOKEN)
    c.put_configmap("app", {"level": "2"})
    wait_for(lambda: visible_files(c.volume_dir(uid, CM, "cfg")) == {"level": b"2"},
             timeout=60, what="the change made right after the restart")
    print(f"change on disk {time.time() - readable:.3f} s after the daemon's identity could "
          f"read again (the probe saw {codes.count(403)} refusals)")
    resumed = watches_of(c, "app", since=killed)
    assert resumed, "no watch of configmap default/app after the restart"
    # The first watch after the restart resumed past the object's own resourceVersion: a
    # bookmark had moved the daemon on.
    assert resumed[0] > first_rv, (resumed, first_rv)
    assert [e for e in c.events() if e["reason"] == "FailedMount"] == []
    assert c.stop() == 0


def test_the_node_authorizer_refuses_after_a_restart_and_the_disk_waits(real_node_cluster):
    """Under the node's identity: after a restart the Node authorizer answers 403 until its graph
    has the node's pods; the daemon keeps the disk as it is and posts no FailedMount Event, and
    a change made as soon as the node may read again lands."""
    c = real_node_cluster
    c.put_configmap("app", {"level": "1"})
    uid = c.create_pod("web", [cm_volume("cfg", "app")])
    c.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    c.start()
    c.wait_synced("configmap default/app")
    wait_for(lambda: visible_files(c.volume_dir(uid, CM, "cfg")) == {"level": b"1"},
             what="the volume current")
    restarted = time.time()
    restart(c)
    readable, codes = readable_again(c, "/api/v1/namespaces/default/configmaps/app",
                                     client_cert=True)
    assert visible_files(c.volume_dir(uid, CM, "cfg")) == {"level": b"1"}
    c.put_configmap("app", {"level": "2"})
    wait_for(lambda: visible_files(c.volume_dir(uid, CM, "cfg")) == {"level": b"2"},
             timeout=60, what="the change once the node may read again")
    refused = [r for r in c.daemon_requests(restarted) if r.get("code") == 403]
    print(f"change on disk {time.time() - readable:.3f} s after the node could read again; "
          f"the probe saw {codes.count(403)} refusals, the daemon {len(refused)}")
    assert [e for e in c.events() if e["reason"] == "FailedMount"] == []
    assert c.stop() == 0


CHART_VALUES = sorted(p.name for p in (ROOT / "tests" / "chart" / "values").glob("*.yaml"))
# Kinds a bare kube-apiserver does not serve: the ServiceMonitor and the PrometheusRule are
# prometheus-operator's (tests/chart checks them against its published schema instead, and the
# rules with promtool).
NOT_SERVED = {"ServiceMonitor", "PrometheusRule"}


@pytest.fixture(scope="module")
def bare_server(tmp_path_factory):
    with api_server("real", tmp_path_factory.mktemp("chart")) as server:
        yield server


@pytest.mark.parametrize("values", [None] + CHART_VALUES)
def test_the_rendered_chart_is_accepted_by_the_server(bare_server, values):
    """Every object the chart renders for 1.20.2 (defaults, and each values file: every
    credential mode) passes the real server's validation and admission in a server-side dry
    run; nothing is stored."""
    args = ["-f", str(ROOT / "tests" / "chart" / "values" / values)] if values else []
    objects = [o for o in render_chart(*args) if o["kind"] not in NOT_SERVED]
    assert any(o["kind"] == "DaemonSet" for o in objects)
    for obj in objects:
        status, body = bare_server.apply(obj, dry_run=True, field_manager="helm")
        assert status in (200, 201), \
            f"{obj['kind']} {obj['metadata']['name']}: {status} {json.dumps(body)[:800]}"
        if obj["kind"] == "DaemonSet":
            # What the server would store is what was asked: no field dropped as unknown.
            assert body["spec"]["updateStrategy"] == obj["spec"]["updateStrategy"], body
