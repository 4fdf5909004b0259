"""Fidelity proof: kubectl (Debian kubernetes-client, or $KUBECTL) against the test server.

Manifests go through `create -f`/`replace -f`, which send JSON with every kubectl version; the
built-in generators of kubectl >= 1.32 (`kubectl create configmap`) send protobuf, which the test
server answers with 415 like any server without protobuf. `--validate=false` because the server
publishes no OpenAPI document.
"""

import json
import os
import shutil
import subprocess
import time

import pytest

from harness import TestApiServer

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl")


def help_mentions(binary, command, text):
    """Whether `binary command --help` mentions `text`: what a newer kubectl has (`auth whoami`
    since 1.26, `--subresource` since 1.24) and Debian 12's kubernetes-client (1.20) lacks."""
    if not binary or not os.access(binary, os.X_OK):
        return False
    help_text = subprocess.run([binary, *command, "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    return text in help_text


def kubectl_with(command, text):
    """$KUBECTL or the kubectl on PATH when its help of `command` mentions `text`, else the
    chart's kubectl 1.34 (`make chart-tools`, which `make test` runs first, installs it into the
    build dir; ctest names that dir in VM_CHART_TOOLS)."""
    tools = os.environ.get("VM_CHART_TOOLS")
    for binary in (KUBECTL, tools and os.path.join(tools, "bin", "kubectl")):
        if help_mentions(binary, command, text):
            return binary
    return None


@pytest.fixture
def kubectl(tmp_path):
    assert KUBECTL, "kubectl not found: install the Debian package kubernetes-client"
    with TestApiServer() as server:
        env = dict(os.environ, KUBECONFIG=server.kubeconfig, HOME=str(tmp_path))

        def run(*args, stdin=None, check=True, binary=None):
            result = subprocess.run([binary or KUBECTL, *args], env=env, input=stdin, text=True,
                                    capture_output=True, timeout=60)
            if check:
                assert result.returncode == 0, result.stderr
            return result

        run.env = env
        run.server = server
        yield run


def manifest(kind, name, **fields):
    api_version = "coordination.k8s.io/v1" if kind == "Lease" else "v1"
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
    obj.update(fields)
    return json.dumps(obj)


def test_version_reaches_server(kubectl):
    out = kubectl("version", "-o", "json").stdout
    assert json.loads(out)["serverVersion"]["gitVersion"] == "v1.36.3"


@pytest.mark.parametrize("kind,resource,first,second", [
    ("ConfigMap", "configmaps", {"data": {"a": "1"}}, {"data": {"a": "2"}}),
    ("Secret", "secrets", {"data": {"k": "MQ=="}}, {"data": {"k": "Mg=="}}),
])
def test_create_get_list_replace_delete(kubectl, kind, resource, first, second):
    out = kubectl("create", "--validate=false", "-f", "-", "-o", "json",
                  stdin=manifest(kind, "obj", **first)).stdout
    created = json.loads(out)
    assert created["metadata"]["uid"]
    got = json.loads(kubectl("get", resource, "obj", "-o", "json").stdout)
    assert {k: got[k] for k in first} == first
    listed = json.loads(kubectl("get", resource, "-o", "json").stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["obj"]
    got.update(second)
    kubectl("replace", "--validate=false", "-f", "-", stdin=json.dumps(got))
    again = json.loads(kubectl("get", resource, "obj", "-o", "json").stdout)
    assert {k: again[k] for k in second} == second
    assert int(again["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    kubectl("delete", resource, "obj")
    missing = kubectl("get", resource, "obj", check=False)
    assert missing.returncode == 1 and "NotFound" in missing.stderr


def test_watch_receives_changes_in_order(kubectl):
    proc = subprocess.Popen([KUBECTL, "get", "configmaps", "--watch", "--output-watch-events",
                             "-o", "json"], env=kubectl.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        server = kubectl.server
        deadline = time.monotonic() + 20
        while server.admin("GET", "state")["watches"] == 0:
            assert time.monotonic() < deadline, "kubectl never started its watch"
            time.sleep(0.05)
        kubectl("create", "--validate=false", "-f", "-", stdin=manifest("ConfigMap", "a",
                                                                          data={"k": "1"}))
        kubectl("create", "--validate=false", "-f", "-", stdin=manifest("ConfigMap", "b"))
        obj = json.loads(kubectl("get", "configmap", "a", "-o", "json").stdout)
        obj["data"]["k"] = "2"
        kubectl("replace", "--validate=false", "-f", "-", stdin=json.dumps(obj))
        kubectl("delete", "configmap", "b")
        decoder = json.JSONDecoder()
        buffer, events = "", []
        while len(events) < 4:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.strip())
            except ValueError:
                continue
            events.append(event)
            buffer = ""
    finally:
        proc.kill()
        proc.wait()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs)


def test_lease_replace_with_stale_resource_version_conflicts(kubectl):
    lease = json.loads(kubectl("create", "--validate=false", "-f", "-", "-o", "json",
                               stdin=manifest("Lease", "volumemanager-node-1", spec={
                                   "holderIdentity": "a", "leaseDurationSeconds": 15})).stdout)
    lease["spec"]["holderIdentity"] = "b"
    kubectl("replace", "--validate=false", "-f", "-", stdin=json.dumps(lease))
    lease["spec"]["holderIdentity"] = "c"  # still carries the first resourceVersion
    stale = kubectl("replace", "--validate=false", "-f", "-", stdin=json.dumps(lease),
                    check=False)
    assert stale.returncode == 1
    assert "Conflict" in stale.stderr and "the object has been modified" in stale.stderr
    now = json.loads(kubectl("get", "leases", "volumemanager-node-1", "-o", "json").stdout)
    assert now["spec"]["holderIdentity"] == "b"


def test_get_pods_by_node_field_selector(kubectl):
    for name, node in (("web-0", "node-1"), ("web-1", "node-2"), ("web-2", "node-1")):
        kubectl("create", "--validate=false", "-n", "shop", "-f", "-", stdin=manifest(
            "Pod", name, spec={"nodeName": node, "containers": [{"name": "a", "image": "b"}]}))
    out = kubectl("get", "pods", "--all-namespaces", "--field-selector", "spec.nodeName=node-1",
                  "-o", "name").stdout
    assert out.split() == ["pod/web-0", "pod/web-2"]
    bad = kubectl("get", "pods", "--field-selector", "spec.color=red", check=False)
    assert bad.returncode == 1 and "field label not supported" in bad.stderr


def test_auth_whoami_and_the_node_authorizer(kubectl):
    """`kubectl auth whoami` (SelfSubjectReview) names the caller; as a node (its token mapped
    to system:node:n1 in system:nodes) kubectl reads what n1's pods reference and gets
    kube-apiserver's 403 for the rest."""
    whoami = kubectl_with(["auth"], "whoami")
    if whoami is None:
        pytest.skip(f"{KUBECTL} has no `auth whoami` (kubectl 1.26 and later), and no newer kubectl "
                    "was found: `make chart-tools` installs kubectl 1.34")
    out = json.loads(kubectl("auth", "whoami", "-o", "json", binary=whoami).stdout)
    assert out["status"]["userInfo"]["username"] == "test-admin"
    server = kubectl.server
    server.admin("POST", "tokens", {"token": "node-token", "user": "system:node:n1",
                                    "groups": ["system:nodes"]})
    kubectl("create", "--validate=false", "-f", "-", stdin=manifest("Secret", "mine", data={"k": "MQ=="}))
    kubectl("create", "--validate=false", "-f", "-", stdin=manifest("Secret", "theirs", data={"k": "MQ=="}))
    kubectl("create", "--validate=false", "-f", "-", stdin=manifest(
        "Pod", "p", spec={"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
                          "volumes": [{"name": "s", "secret": {"secretName": "mine"}}]}))
    out = json.loads(kubectl("--token", "node-token", "auth", "whoami", "-o", "json",
                             binary=whoami).stdout)
    assert out["status"]["userInfo"]["username"] == "system:node:n1"
    assert "system:nodes" in out["status"]["userInfo"]["groups"]
    kubectl("--token", "node-token", "get", "secret", "mine")
    refused = kubectl("--token", "node-token", "get", "secret", "theirs", check=False)
    assert refused.returncode != 0
    assert ('secrets "theirs" is forbidden: User "system:node:n1" cannot get resource "secrets" '
            'in API group "" in the namespace "default": no relationship found between node '
            "'n1' and this object") in refused.stderr


def test_pod_status_through_the_status_subresource(kubectl):
    """`kubectl create` of a pod with a status gets it reset to Pending; `kubectl patch
    --subresource=status` (kubectl 1.24 and later) writes it and leaves the spec, and `kubectl
    get --subresource=status` reads it; a patch of the pod itself leaves the status."""
    newer = kubectl_with(["patch"], "--subresource")
    if newer is None:
        pytest.skip(f"{KUBECTL} has no --subresource (kubectl 1.24 and later), and no newer "
                    "kubectl was found: `make chart-tools` installs kubectl 1.34")
    created = json.loads(kubectl("create", "--validate=false", "-f", "-", "-o", "json",
                                 stdin=manifest("Pod", "p", spec={
                                     "nodeName": "n1",
                                     "containers": [{"name": "c", "image": "busybox"}]},
                                     status={"phase": "Running", "podIP": "10.0.0.5"})).stdout)
    assert created["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    out = kubectl("patch", "pod", "p", "--subresource=status", "--type=merge", "-o", "json", "-p",
                  json.dumps({"status": {"phase": "Running", "podIP": "10.0.0.5"},
                              "spec": {"nodeName": "n2"}}), binary=newer).stdout
    patched = json.loads(out)
    assert patched["status"]["phase"] == "Running" and patched["status"]["podIP"] == "10.0.0.5"
    assert patched["spec"]["nodeName"] == "n1"
    got = json.loads(kubectl("get", "pod", "p", "--subresource=status", "-o", "json",
                             binary=newer).stdout)
    assert got["status"] == patched["status"]
    kubectl("patch", "pod", "p", "--type=merge", "-p", json.dumps(
        {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Failed"}}))
    now = json.loads(kubectl("get", "pod", "p", "-o", "json").stdout)
    assert now["metadata"]["labels"] == {"a": "b"} and now["status"] == patched["status"]
