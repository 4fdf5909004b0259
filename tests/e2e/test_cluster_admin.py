"""The admin endpoints of the real binary in cluster mode, against the test API server beside a
simulated kubelet: readiness waits for the API pod source, liveness ignores an API outage, the
source metrics (API requests, the pod reflector, object reads and watches) pass promtool, and
/debug/state shows the objects' resourceVersions as the API server gave them."""
import json
import time

from conftest import visible_files, wait_for
from test_admin import get, metrics, sample
from test_cluster import CM, Cluster, cluster, cm_volume  # noqa: F401 (the fixture)


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
    assert sample(families, "volumemanager_watches", resource="pods") == 1
    assert sample(families, "volumemanager_watches", resource="configmaps_and_secrets") == 1
    assert sample(families, "volumemanager_object_reads_total", kind="get") == 0  # Watch
    assert sample(families, "volumemanager_reconciler_outcomes_total",
                  outcome="foreign_swap") == 0
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
