"""The admin endpoints of the real binary in cluster mode, against the test API server beside a
simulated kubelet: readiness waits for the API pod source, liveness ignores an API outage, the
source metrics (API requests, the pod reflector, object reads and watches) pass promtool, and
/debug/state shows the objects' resourceVersions as the API server gave them; an API server
restart is a reconnect, then a relist after a 410, both counted; an object the
daemon may not read is a visible failure (Event, metrics, /debug/state) that changes nothing on
disk and ends when the read is allowed."""
import json
import signal
import time

import pytest

from conftest import snapshot, visible_files, wait_for
from test_admin import get, metrics, sample
from test_cluster import (CM, DAEMON_USER, RECOVERY_BOUND_S, Cluster, TestApiServer,  # noqa
                          cluster, cm_volume)


@pytest.fixture
def direct_cluster(tmp_path):
    """The daemon talking to the test server itself (HTTP/1.1). Through the HTTP/2 front a server
    that went away is answered for by the proxy (502), which is an answer, not an outage."""
    with TestApiServer() as server:
        c = Cluster(tmp_path, server, "http1")
        try:
            yield c
            c.assert_no_secret_leaked()
        finally:
            if c.proc is not None:
                c.stop(signal.SIGKILL)


@pytest.mark.test_server_only("503s for the daemon (fault hook) while /healthz and /readyz hold")
def test_cluster_endpoints(cluster):
    created = cluster.put_configmap("app", {"level": "1"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app")])
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    cluster.start_and_sync()
    probe, debug = cluster.admin_addresses()
    wait_for(lambda: get(probe + "/readyz")[0] == 200, what="ready")
    assert "[+]pod-source-api ok\n" in get(probe + "/readyz?verbose")[1]

    updated = cluster.put_configmap("app", {"level": "2"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"2"},
             what="the refresh")
    rv = updated["metadata"]["resourceVersion"]
    assert rv != created["metadata"]["resourceVersion"]

    def debug_rv():
        state = json.loads(get(debug + "/debug/state")[1])
        cfg = [v for v in state["volumes"] if v["volume"] == "cfg"][0]
        return cfg["objects"][0].get("resourceVersion")
    wait_for(lambda: debug_rv() == rv, what="the object's resourceVersion in /debug/state")

    families, _ = metrics(probe)
    assert sample(families, "volumemanager_api_requests_total", method="GET", code="200") >= 2
    assert sample(families, "volumemanager_reflector_lists_total", resource="pods") >= 1
    assert sample(families, "volumemanager_reflector_relists_total", resource="pods") == 0
    assert sample(families, "volumemanager_reflector_watches_total", resource="pods") >= 1
    assert sample(families, "volumemanager_reflector_expired_total", resource="pods") == 0
    assert sample(families, "volumemanager_reflector_expired_total",
                  resource="configmaps_and_secrets") == 0
    assert sample(families, "volumemanager_api_reconnects_total") == 0
    assert sample(families, "volumemanager_object_refusals_retried_total", after="reconnect") == 0
    assert sample(families, "volumemanager_watches", resource="pods") == 1
    assert sample(families, "volumemanager_watches", resource="configmaps_and_secrets") == 1
    assert sample(families, "volumemanager_object_reads_total", kind="get") == 0  # Watch
    assert sample(families, "volumemanager_reconciler_outcomes_total",
                  outcome="foreign_swap") == 0
    # Beside the kubelet the daemon sets nothing up (issue 42, item 6d): its first write into the
    # kubelet's volume is said once, and each write is a refresh, none counted as mounted.
    assert cluster.records(msg="Volume set up by the kubelet: refreshed from now on",
                           volume="cfg", podUID=uid)
    assert not cluster.records(msg="MountVolume.SetUp succeeded")
    assert sample(families, "volumemanager_reconciler_outcomes_total", outcome="mounted") == 0
    assert sample(families, "volumemanager_reconciler_outcomes_total", outcome="refreshed") >= 2
    assert sample(families, "volumemanager_propagation_duration_seconds", "_count",
                  volume_plugin="kubernetes.io/configmap") >= 1
    configz = json.loads(get(debug + "/configz")[1])
    assert configz["volumemanager"]["kubeconfig"] == str(cluster.kubeconfig)
    assert configz["volumemanager"]["volumeOwnership"] == "kubelet"
    assert configz["sources"]["kubeconfig"] == "flag"

    # An API outage: every request answered 503, every watch cut. Liveness does not care, and the
    # failed requests are counted.
    cluster.server.admin("POST", "faults", {"status": 503, "times": 1000})
    cluster.server.admin("POST", "drop-watches", {"abort": True})
    wait_for(lambda: (sample(metrics(probe)[0], "volumemanager_api_requests_total",
                             method="GET", code="503") or 0) >= 1,
             what="503s counted")
    time.sleep(2.5)  # longer than the liveness limit
    assert get(probe + "/healthz")[:2] == (200, "ok")
    assert get(probe + "/readyz")[0] == 200  # the last pod list stays valid
    cluster.server.admin("DELETE", "faults")
    assert cluster.stop() == 0


@pytest.mark.test_server_only("an outage that answers nothing, then the history compacted (fault "
                              "hooks); the real server's restart: test_real_kube.py")
def test_an_api_server_restart_is_a_reconnect_then_a_relist_after_410(direct_cluster):
    """The API server goes away (nothing answered, its /version neither) and comes back with the
    old resourceVersions compacted away: the daemon notices the return through its probe, counts
    the reconnect and the 410s of the pod reflector and the object's, and changes flow again."""
    cluster = direct_cluster
    cluster.put_configmap("app", {"level": "1"})
    uid = cluster.create_pod("web", [cm_volume("cfg", "app")])
    cluster.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    cluster.start_and_sync()
    probe, _ = cluster.admin_addresses()
    wait_for(lambda: get(probe + "/readyz")[0] == 200, what="ready")

    def count(family, **labels):
        return sample(metrics(probe)[0], family, **labels) or 0
    cluster.server.admin("POST", "outage", {"down": True})
    wait_for(lambda: count("volumemanager_api_reachability_probes_total",
                           outcome="unanswered") >= 1, what="a probe unanswered")
    assert get(probe + "/healthz")[:2] == (200, "ok")
    # Back, with the history gone: each reflector's re-watch gets 410 Expired.
    cluster.server.admin("POST", "faults", {"verb": "watch", "compact": True, "times": 2})
    cluster.server.admin("POST", "outage", {"down": False})
    wait_for(lambda: (count("volumemanager_api_reconnects_total") >= 1
                      and count("volumemanager_reflector_expired_total", resource="pods") >= 1
                      and count("volumemanager_reflector_expired_total",
                                resource="configmaps_and_secrets") >= 1),
             what="the reconnect and both 410s counted", timeout=RECOVERY_BOUND_S)
    cluster.put_configmap("app", {"level": "2"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "cfg")) == {"level": b"2"},
             what="a change after the restart", timeout=RECOVERY_BOUND_S)
    assert count("volumemanager_reflector_relists_total", resource="pods") >= 1
    assert cluster.stop() == 0


@pytest.mark.parametrize("strategy", ["Watch", "Cache", "Get"])
def test_a_refused_object_is_a_visible_failure_that_keeps_the_disk_and_ends_when_allowed(
        cluster, strategy):
    cluster.put_configmap("closed", {"k": "1"})
    rules = [{"verbs": ["get", "list", "watch"], "resources": ["pods"]},
             {"verbs": ["create", "patch", "update"], "resources": ["events"]},
             {"verbs": ["get", "list", "watch"], "resources": ["configmaps"],
              "names": ["missing"]}]
    cluster.server.admin("POST", "acl", {"user": DAEMON_USER, "rules": rules})
    uid = cluster.create_pod("web", [cm_volume("b", "closed"), cm_volume("gone", "missing")])
    # The kubelet set both up (the second before its object was deleted).
    cluster.kubelet_sets_up(uid, CM, "b", {"k": "0"})
    cluster.kubelet_sets_up(uid, CM, "gone", {"x": "0"})
    before = snapshot(cluster.volume_dir(uid, CM, "b"))
    cluster.start("--config-map-and-secret-change-detection-strategy", strategy)
    probe, debug = cluster.admin_addresses()

    def failed_mounts(volume):
        return [e for e in cluster.events() if e["reason"] == "FailedMount"
                and e["involvedObject"]["uid"] == uid and f'volume "{volume}"' in e["message"]]
    event = wait_for(lambda: failed_mounts("b"), what="a FailedMount Event for the refused volume",
                     timeout=30)[0]
    verb = "list" if strategy == "Watch" else "get"
    assert event["type"] == "Warning"
    assert event["message"] == (
        f'MountVolume.SetUp failed for volume "b" : configmaps "closed" is forbidden: User '
        f'"{DAEMON_USER}" cannot {verb} resource "configmaps" in API group "" in the namespace '
        '"default"')
    wait_for(lambda: failed_mounts("gone"), what="a FailedMount Event for the missing object")

    def failing():
        families, _ = metrics(probe)
        return (sample(families, "volumemanager_volumes", state="failing"),
                sample(families, "volumemanager_failing_volumes_by_api_status", code="403",
                       reason="Forbidden"),
                sample(families, "volumemanager_failing_volumes_by_api_status", code="404",
                       reason="NotFound"))
    wait_for(lambda: failing() == (2, 1, 1), what="both volumes failing, by API status")
    families, _ = metrics(probe)
    assert sample(families, "volumemanager_object_read_errors_total", code="403",
                  reason="Forbidden") >= 1

    def volume_state(name):
        state = json.loads(get(debug + "/debug/state")[1])
        return [v for v in state["volumes"] if v["volume"] == name][0]
    b = volume_state("b")
    assert b["apiStatus"] == {"code": 403, "reason": "Forbidden"}, b
    assert b["lastError"].startswith('configmaps "closed" is forbidden'), b
    assert b["objects"][0]["apiStatus"] == {"code": 403, "reason": "Forbidden"}, b
    assert "timed out" not in json.dumps(b)
    assert volume_state("gone")["apiStatus"] == {"code": 404, "reason": "NotFound"}

    # Retried under backoff: the refusal itself is one warning, not one per retry.
    wait_for(lambda: len(failed_mounts("b")) == 1 and failed_mounts("b")[0]["count"] >= 3,
             what="three failed attempts", timeout=30)
    refused = [r for r in cluster.records(msg=lambda m: m.startswith("Object read failed"))
               if r.get("level") == "warning" and r.get("object") == "configmap/default/closed"]
    assert len(refused) == 1, refused
    relists = [r for r in cluster.records(msg="Relisting after a delay")
               if r.get("level") == "warning" and r.get("object") == "configmap/default/closed"]
    assert len(relists) <= 1, relists
    assert snapshot(cluster.volume_dir(uid, CM, "b")) == before, "the kubelet's content changed"

    # The read is allowed: the volume is refreshed and no longer failing.
    rules[2]["names"] = ["missing", "closed"]
    cluster.server.admin("POST", "acl", {"user": DAEMON_USER, "rules": rules})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, CM, "b")) == {"k": b"1"},
             timeout=RECOVERY_BOUND_S, what="the volume refreshed once the read is allowed")
    wait_for(lambda: failing() == (1, None, 1), what="only the missing object's volume failing")
    b = volume_state("b")
    assert "apiStatus" not in b and b["lastError"] == "", b
