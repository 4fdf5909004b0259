"""Fidelity proof: the official Python client (Debian python3-kubernetes) against the test server."""

import threading
import time

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from harness import TestApiServer


@pytest.fixture
def api():
    with TestApiServer() as server:
        api_client = config.new_client_from_config(config_file=server.kubeconfig)
        yield server, api_client
        api_client.close()


def test_configmap_and_secret_lifecycle(api):
    _, api_client = api
    core = client.CoreV1Api(api_client)
    created = core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="app-config"), data={"app.yaml": "port: 8080\n"}))
    assert created.metadata.uid and created.metadata.resource_version
    got = core.read_namespaced_config_map("app-config", "default")
    assert got.data == {"app.yaml": "port: 8080\n"}
    got.data["app.yaml"] = "port: 9090\n"
    replaced = core.replace_namespaced_config_map("app-config", "default", got)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    listed = core.list_namespaced_config_map("default")
    assert [cm.metadata.name for cm in listed.items] == ["app-config"]
    core.delete_namespaced_config_map("app-config", "default")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("app-config", "default")
    assert err.value.status == 404

    secret = core.create_namespaced_secret("default", client.V1Secret(
        metadata=client.V1ObjectMeta(name="web-tls"), string_data={"tls.key": "secret"}))
    assert secret.type == "Opaque" and secret.data == {"tls.key": "c2VjcmV0"}
    secret.data["tls.key"] = "b3RoZXI="
    assert core.replace_namespaced_secret("web-tls", "default", secret).data["tls.key"] == "b3RoZXI="
    assert [s.metadata.name for s in core.list_namespaced_secret("default").items] == ["web-tls"]
    core.delete_namespaced_secret("web-tls", "default")
    assert core.list_namespaced_secret("default").items == []


def test_watch_stream_receives_changes_in_order(api):
    _, api_client = api
    core = client.CoreV1Api(api_client)
    start_rv = core.list_namespaced_config_map("default").metadata.resource_version
    received = []

    def run_watch():
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_config_map, "default",
                              resource_version=start_rv, timeout_seconds=10):
            received.append((event["type"], event["object"].metadata.name,
                             event["object"].metadata.resource_version))
            if len(received) == 4:
                w.stop()

    thread = threading.Thread(target=run_watch)
    thread.start()
    time.sleep(0.3)
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="a"), data={"k": "1"}))
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="b"), data={"k": "1"}))
    core.patch_namespaced_config_map("a", "default", {"data": {"k": "2"}})
    core.delete_namespaced_config_map("b", "default")
    thread.join(15)
    assert [(t, n) for t, n, _ in received] == [
        ("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    rvs = [int(rv) for _, _, rv in received]
    assert rvs == sorted(rvs) and len(set(rvs)) == 4


def test_lease_update_conflict_on_stale_resource_version(api):
    _, api_client = api
    coordination = client.CoordinationV1Api(api_client)
    lease = coordination.create_namespaced_lease("default", client.V1Lease(
        metadata=client.V1ObjectMeta(name="volumemanager-node-1"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15,
                                lease_transitions=0)))
    stale_rv = lease.metadata.resource_version
    lease.spec.holder_identity = "b"
    lease.spec.lease_transitions = 1
    updated = coordination.replace_namespaced_lease("volumemanager-node-1", "default", lease)
    assert updated.spec.holder_identity == "b"
    lease.metadata.resource_version = stale_rv
    lease.spec.holder_identity = "c"
    with pytest.raises(ApiException) as err:
        coordination.replace_namespaced_lease("volumemanager-node-1", "default", lease)
    assert err.value.status == 409
    assert '"reason":"Conflict"' in err.value.body.replace(" ", "")
    assert coordination.read_namespaced_lease("volumemanager-node-1",
                                              "default").spec.holder_identity == "b"


def test_pods_by_node_field_selector_and_discovery(api):
    _, api_client = api
    core = client.CoreV1Api(api_client)
    for name, node in (("web-0", "node-1"), ("web-1", "node-2")):
        core.create_namespaced_pod("shop", client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(node_name=node, containers=[
                client.V1Container(name="app", image="web:1")])))
    pods = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-1")
    assert [p.metadata.name for p in pods.items] == ["web-0"]
    assert client.VersionApi(api_client).get_code().minor == "36"
    groups = client.ApisApi(api_client).get_api_versions().groups
    assert [g.name for g in groups] == ["coordination.k8s.io", "authentication.k8s.io"]


def test_pod_status_only_through_the_status_subresource(api):
    """create resets the status, replace of the pod keeps it, patch_namespaced_pod_status and
    replace_namespaced_pod_status write it (a strategic merge patch, a PUT) and keep the spec."""
    _, api_client = api
    core = client.CoreV1Api(api_client)
    limits = {"cpu": "250m", "memory": "64Mi"}
    created = core.create_namespaced_pod("shop", client.V1Pod(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1PodSpec(node_name="node-1", containers=[client.V1Container(
            name="app", image="web:1", resources=client.V1ResourceRequirements(limits=limits))]),
        status=client.V1PodStatus(phase="Running", pod_ip="10.0.0.5")))
    assert (created.status.phase, created.status.qos_class, created.status.pod_ip) == (
        "Pending", "Guaranteed", None)
    assert created.spec.containers[0].resources.requests == limits

    created.status.phase = "Running"
    created.metadata.labels = {"tier": "web"}
    replaced = core.replace_namespaced_pod("web", "shop", created)
    assert replaced.metadata.labels == {"tier": "web"} and replaced.status.phase == "Pending"

    patched = core.patch_namespaced_pod_status("web", "shop", {
        "status": {"phase": "Running", "podIP": "10.0.0.5"}, "spec": {"nodeName": "node-2"}})
    assert (patched.status.phase, patched.status.pod_ip) == ("Running", "10.0.0.5")
    assert [ip.ip for ip in patched.status.pod_i_ps] == ["10.0.0.5"]
    assert patched.spec.node_name == "node-1"

    patched.status.conditions = [client.V1PodCondition(type="Ready", status="True")]
    patched.spec.active_deadline_seconds = 30
    written = core.replace_namespaced_pod_status("web", "shop", patched)
    assert [(c.type, c.status) for c in written.status.conditions] == [("Ready", "True")]
    assert written.spec.active_deadline_seconds is None
    assert core.read_namespaced_pod_status("web", "shop").status.conditions[0].type == "Ready"
    assert int(written.metadata.resource_version) > int(patched.metadata.resource_version)

    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod_status("gone", "shop", {"status": {"phase": "Running"}})
    assert err.value.status == 404
