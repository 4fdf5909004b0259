"""The Node authorizer and NodeRestriction of kube-test-apiserver (kubetestserver/node_authorizer.py)
and SelfSubjectReview: a node identity reads only what pods bound to it reference, and the grant
follows the pods."""

import urllib.parse

import pytest

from harness import TestApiServer, configmap

NODE = "node-a"
NODE_USER = f"system:node:{NODE}"
NODE_TOKEN = "node-a-token"


def q(selector):
    return urllib.parse.quote(selector, safe="")


def pod(name, namespace, node, volumes=(), **spec):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "volumes": list(volumes)}}
    if node:
        body["spec"]["nodeName"] = node
    body["spec"].update(spec)
    return body


def secret(name, namespace):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": {"k": "dg=="}}


def create(server, path, body):
    code, reply = server.request("POST", path, body)
    assert code == 201, reply
    return reply


@pytest.fixture
def server():
    """Pods: web (ns shop, on node-a) with a secret volume, a projected configmap and envFrom;
    db (ns shop, on node-b) with secret db-pass; job (ns ops, on node-a) with configmap job-cfg.
    NODE_TOKEN is node-a's (user system:node:node-a, group system:nodes)."""
    with TestApiServer() as s:
        for ns, names in (("shop", ("web-tls", "web-env", "db-pass", "unused")), ("ops", ("x",))):
            for name in names:
                create(s, f"/api/v1/namespaces/{ns}/secrets", secret(name, ns))
        for ns, name in (("shop", "web-cfg"), ("ops", "job-cfg"), ("shop", "job-cfg")):
            create(s, f"/api/v1/namespaces/{ns}/configmaps", configmap(name, {"a": "1"}, ns))
        create(s, "/api/v1/namespaces/shop/pods", pod(
            "web", "shop", NODE,
            [{"name": "tls", "secret": {"secretName": "web-tls"}},
             {"name": "all", "projected": {"sources": [{"configMap": {"name": "web-cfg"}}]}}],
            containers=[{"name": "c", "image": "busybox",
                         "envFrom": [{"secretRef": {"name": "web-env"}}]}]))
        create(s, "/api/v1/namespaces/shop/pods", pod(
            "db", "shop", "node-b", [{"name": "p", "secret": {"secretName": "db-pass"}}]))
        create(s, "/api/v1/namespaces/ops/pods", pod(
            "job", "ops", NODE, [{"name": "c", "configMap": {"name": "job-cfg"}}]))
        s.admin("POST", "tokens", {"token": NODE_TOKEN, "user": NODE_USER,
                                   "groups": ["system:nodes"]})
        yield s


NO_RELATION = f"no relationship found between node '{NODE}' and this object"

# (name, method, path, body, expected code, the 403 message's reason after ": ", or None)
CASES = [
    ("secret of a pod on the node", "GET", "/api/v1/namespaces/shop/secrets/web-tls", None, 200,
     None),
    ("envFrom secret", "GET", "/api/v1/namespaces/shop/secrets/web-env", None, 200, None),
    ("projected configmap", "GET", "/api/v1/namespaces/shop/configmaps/web-cfg", None, 200, None),
    ("configmap in a second namespace", "GET", "/api/v1/namespaces/ops/configmaps/job-cfg", None,
     200, None),
    ("same name, namespace of no pod of the node", "GET",
     "/api/v1/namespaces/shop/configmaps/job-cfg", None, 403, NO_RELATION),
    ("secret of a pod on another node", "GET", "/api/v1/namespaces/shop/secrets/db-pass", None,
     403, NO_RELATION),
    ("secret no pod references", "GET", "/api/v1/namespaces/shop/secrets/unused", None, 403,
     NO_RELATION),
    ("list pinned to one name", "GET",
     "/api/v1/namespaces/shop/secrets?fieldSelector=" + q("metadata.name=web-tls"), None, 200,
     None),
    ("watch pinned to one name", "GET", "/api/v1/namespaces/shop/configmaps?watch=1&timeoutSeconds=1"
     "&fieldSelector=" + q("metadata.name=web-cfg"), None, 200, None),
    ("list of the namespace", "GET", "/api/v1/namespaces/shop/secrets", None, 403,
     "No Object name found"),
    ("list pinned to an unrelated name", "GET",
     "/api/v1/namespaces/shop/secrets?fieldSelector=" + q("metadata.name=db-pass"), None, 403,
     NO_RELATION),
    ("list across namespaces", "GET", "/api/v1/secrets?fieldSelector=" + q("metadata.name=web-tls"),
     None, 403, "can only read namespaced object of this type"),
    ("secret write", "POST", "/api/v1/namespaces/shop/secrets", secret("new", "shop"), 403,
     "can only read resources of this type"),
    ("pods of the node", "GET", "/api/v1/pods?fieldSelector=" + q(f"spec.nodeName={NODE}"), None,
     200, None),
    ("pods of another node", "GET", "/api/v1/pods?fieldSelector=" + q("spec.nodeName=node-b"),
     None, 403, "can only list/watch pods with spec.nodeName field selector"),
    ("all pods", "GET", "/api/v1/pods", None, 403,
     "can only list/watch pods with spec.nodeName field selector"),
    ("pod bound to the node", "GET", "/api/v1/namespaces/shop/pods/web", None, 200, None),
    ("pod bound elsewhere", "GET", "/api/v1/namespaces/shop/pods/db", None, 403, NO_RELATION),
    ("event create", "POST", "/api/v1/namespaces/shop/events",
     {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1", "namespace": "shop"},
      "involvedObject": {"kind": "Pod", "namespace": "shop", "name": "web"},
      "reason": "FailedMount", "message": "m", "type": "Warning"}, 201, None),
    ("event list", "GET", "/api/v1/namespaces/shop/events", None, 403, ""),
    ("own node lease", "PUT", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}",
     {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
      "metadata": {"name": NODE, "namespace": "kube-node-lease"}, "spec": {}}, 201, None),
    ("another node's lease", "GET",
     "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-b", None, 403,
     "can only access node lease with the same name as the requesting node"),
    ("a lease elsewhere (the Lease lock)", "GET",
     f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{NODE}", None, 403,
     'can only access leases in the "kube-node-lease" system namespace'),
    ("leases listed", "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
     None, 403, "can only get, create, update, patch, or delete a node lease"),
]


@pytest.mark.parametrize("name,method,path,body,code,reason", CASES, ids=[c[0] for c in CASES])
def test_node_authorizer(server, name, method, path, body, code, reason):
    status, reply = server.request(method, path, body, token=NODE_TOKEN)
    assert status == code, reply
    if code == 403:
        assert reply["reason"] == "Forbidden"
        assert f'User "{NODE_USER}" cannot ' in reply["message"]
        if reason:
            assert reply["message"].endswith(": " + reason), reply["message"]
        else:
            assert reply["message"].endswith('"'), reply["message"]  # no reason appended


def test_forbidden_body_is_kube_apiservers(server):
    status, reply = server.request("GET", "/api/v1/namespaces/shop/secrets/db-pass",
                                   token=NODE_TOKEN)
    assert status == 403
    assert reply == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'secrets "db-pass" is forbidden: User "system:node:node-a" cannot get resource '
                   '"secrets" in API group "" in the namespace "shop": no relationship found '
                   "between node 'node-a' and this object",
        "reason": "Forbidden", "details": {"name": "db-pass", "kind": "secrets"}, "code": 403}


def test_grant_follows_pods_as_they_are_deleted_moved_and_bound(server):
    tls = "/api/v1/namespaces/shop/secrets/web-tls"
    job_cfg = "/api/v1/namespaces/ops/configmaps/job-cfg"
    db_pass = "/api/v1/namespaces/shop/secrets/db-pass"
    assert server.request("GET", tls, token=NODE_TOKEN)[0] == 200
    # Deleted: graceful first (still bound: still readable), then gone.
    assert server.request("DELETE", "/api/v1/namespaces/shop/pods/web")[0] == 200
    assert server.request("GET", tls, token=NODE_TOKEN)[0] == 200
    assert server.request("DELETE", "/api/v1/namespaces/shop/pods/web?gracePeriodSeconds=0")[0] \
        == 200
    assert server.request("GET", tls, token=NODE_TOKEN)[0] == 403
    # Moved to another node: nodeName cannot change, so the pod is deleted and created again
    # under the same name elsewhere (as a StatefulSet's pod is).
    assert server.request("DELETE", "/api/v1/namespaces/ops/pods/job?gracePeriodSeconds=0")[0] \
        == 200
    create(server, "/api/v1/namespaces/ops/pods", pod(
        "job", "ops", "node-b", [{"name": "c", "configMap": {"name": "job-cfg"}}]))
    assert server.request("GET", job_cfg, token=NODE_TOKEN)[0] == 403
    # Bound: a new pod of this node referencing db-pass grants it.
    assert server.request("GET", db_pass, token=NODE_TOKEN)[0] == 403
    create(server, "/api/v1/namespaces/shop/pods", pod(
        "db-2", "shop", NODE, [{"name": "p", "secret": {"secretName": "db-pass"}}]))
    assert server.request("GET", db_pass, token=NODE_TOKEN)[0] == 200


def test_node_restriction_on_writes(server):
    status, reply = server.request("POST", "/api/v1/namespaces/shop/pods",
                                   pod("p", "shop", NODE), token=NODE_TOKEN)
    assert status == 403 and "can only create mirror pods" in reply["message"], reply
    mirror = pod("p", "shop", NODE)
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    assert server.request("POST", "/api/v1/namespaces/shop/pods", mirror, token=NODE_TOKEN)[0] \
        == 201
    status, reply = server.request("DELETE", "/api/v1/namespaces/shop/pods/db", token=NODE_TOKEN)
    assert status == 403 and "can only delete pods" in reply["message"], reply
    status, reply = server.request(
        "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
         "metadata": {"name": "node-b"}, "spec": {}}, token=NODE_TOKEN)
    assert status == 403
    assert reply["message"] == ('leases.coordination.k8s.io "node-b" is forbidden: can only access '
                                "node lease with the same name as the requesting node")


MERGE = {"Content-Type": "application/merge-patch+json"}


def test_node_writes_the_status_of_its_own_pods_only(server):
    """The kubelet's status manager: pods/status update and patch of pods bound to the node
    (NodeRestriction), never their labels, never another node's pod; no get of the
    subresource (the node reads its pods through the pods resource)."""
    web = "/api/v1/namespaces/shop/pods/web"
    code, pod = server.request("PATCH", f"{web}/status", {"status": {"phase": "Running",
                                                                    "podIP": "10.0.0.5"}},
                               token=NODE_TOKEN, headers=MERGE)
    assert code == 200, pod
    assert pod["status"]["podIP"] == "10.0.0.5"
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    code, updated = server.request("PUT", f"{web}/status", pod, token=NODE_TOKEN)
    assert code == 200, updated
    assert updated["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert server.request("GET", web)[1] == updated

    code, reply = server.request("PATCH", "/api/v1/namespaces/shop/pods/db/status",
                                 {"status": {"phase": "Running"}}, token=NODE_TOKEN, headers=MERGE)
    assert code == 403
    assert reply == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "db" is forbidden: node "node-a" can only update pod status for pods '
                   "with spec.nodeName set to itself",
        "reason": "Forbidden", "details": {"name": "db", "kind": "pods"}, "code": 403}
    db = server.request("GET", "/api/v1/namespaces/shop/pods/db")[1]
    code, reply = server.request("PUT", "/api/v1/namespaces/shop/pods/db/status",
                                 dict(db, status={"phase": "Running"}), token=NODE_TOKEN)
    assert code == 403 and "can only update pod status" in reply["message"], reply
    assert db["status"]["phase"] == "Pending"

    code, reply = server.request("PATCH", f"{web}/status", {"metadata": {"labels": {"x": "y"}}},
                                 token=NODE_TOKEN, headers=MERGE)
    assert code == 403
    assert reply["message"] == ('pods "web" is forbidden: node "node-a" cannot update labels '
                                "through pod status")

    code, reply = server.request("GET", f"{web}/status", token=NODE_TOKEN)
    assert code == 403
    assert reply["message"] == ('pods "web" is forbidden: User "system:node:node-a" cannot get '
                                'resource "pods/status" in API group "" in the namespace "shop"')
    code, reply = server.request("PATCH", web, {"status": {"phase": "Failed"}}, token=NODE_TOKEN,
                                 headers=MERGE)
    assert code == 403, "the pod itself is not the node's to update"
    code, reply = server.request("PATCH", "/api/v1/namespaces/shop/pods/gone/status",
                                 {"status": {"phase": "Running"}}, token=NODE_TOKEN, headers=MERGE)
    assert (code, reply["reason"]) == (404, "NotFound")


def test_node_user_without_the_group_is_not_a_node(server):
    server.admin("POST", "tokens", {"token": "no-group", "user": NODE_USER})
    # Not a node identity: the server's default for a user without an ACL (everything).
    assert server.request("GET", "/api/v1/namespaces/shop/secrets/db-pass",
                          token="no-group")[0] == 200


def test_acl_adds_to_the_node_authorizer_as_rbac_does(server):
    server.admin("POST", "acl", {"user": NODE_USER, "rules": [
        {"verbs": ["get"], "resources": ["secrets"], "names": ["unused"]}]})
    assert server.request("GET", "/api/v1/namespaces/shop/secrets/unused",
                          token=NODE_TOKEN)[0] == 200
    assert server.request("GET", "/api/v1/namespaces/shop/secrets/web-tls",
                          token=NODE_TOKEN)[0] == 200
    assert server.request("GET", "/api/v1/namespaces/shop/secrets/db-pass",
                          token=NODE_TOKEN)[0] == 403


SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
SSR_BODY = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def test_self_subject_review_names_the_caller(server):
    status, reply = server.request("POST", SSR, SSR_BODY, token=NODE_TOKEN)
    assert status == 201, reply
    assert reply["kind"] == "SelfSubjectReview"
    assert reply["status"]["userInfo"] == {
        "username": NODE_USER, "groups": ["system:nodes", "system:authenticated"]}
    status, reply = server.request("POST", SSR, SSR_BODY)
    assert reply["status"]["userInfo"]["username"] == "test-admin"
    assert server.request("POST", SSR, SSR_BODY, token="wrong")[0] == 401
    groups = [g["name"] for g in server.request("GET", "/apis")[1]["groups"]]
    assert "authentication.k8s.io" in groups
    resources = server.request("GET", "/apis/authentication.k8s.io/v1")[1]["resources"]
    assert [r["name"] for r in resources] == ["selfsubjectreviews", "tokenreviews"]


def test_node_client_certificate_is_a_node_identity():
    with TestApiServer(client_cert_user=NODE_USER) as s:
        create(s, "/api/v1/namespaces/shop/secrets", secret("mine", "shop"))
        create(s, "/api/v1/namespaces/shop/secrets", secret("theirs", "shop"))
        create(s, "/api/v1/namespaces/shop/pods", pod(
            "p", "shop", NODE, [{"name": "s", "secret": {"secretName": "mine"}}]))
        status, reply = s.request("POST", SSR, SSR_BODY, token="", client_cert=True)
        assert reply["status"]["userInfo"]["username"] == NODE_USER
        assert "system:nodes" in reply["status"]["userInfo"]["groups"]
        assert s.request("GET", "/api/v1/namespaces/shop/secrets/mine", token="",
                         client_cert=True)[0] == 200
        assert s.request("GET", "/api/v1/namespaces/shop/secrets/theirs", token="",
                         client_cert=True)[0] == 403


def test_self_subject_review_fault_stands_for_an_old_server(server):
    server.admin("POST", "faults", {"resource": "selfsubjectreviews", "status": 404, "times": 1})
    # A catch-all rule is for the resources the daemon reads, not for SelfSubjectReview.
    server.admin("POST", "faults", {"status": 503, "times": 1})
    status, reply = server.request("POST", SSR, SSR_BODY, token=NODE_TOKEN)
    assert (status, reply["details"]["kind"]) == (404, "selfsubjectreviews")
    assert server.request("POST", SSR, SSR_BODY, token=NODE_TOKEN)[0] == 201
    assert server.request("GET", "/api/v1/namespaces/shop/secrets/web-tls",
                          token=NODE_TOKEN)[0] == 503


@pytest.mark.parametrize("method,path,body,code", [
    ("POST", "/api/v1/namespaces/shop/events?dryRun=All",
     {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
      "involvedObject": {"kind": "Pod", "name": "web"}}, 201),
    ("PATCH", "/api/v1/namespaces/shop/events/e?dryRun=All", {"count": 2}, 404),
    ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?dryRun=All",
     {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": NODE}},
     201),
    ("PUT", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}?dryRun=All",
     {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": NODE}},
     201),
])
def test_dry_run_writes_are_authorized_and_store_nothing(server, method, path, body, code):
    before = server.admin("GET", "state")["revision"]
    headers = {"Content-Type": "application/strategic-merge-patch+json"} \
        if method == "PATCH" else None
    status, reply = server.request(method, path, body, token=NODE_TOKEN, headers=headers)
    assert status == code, reply
    assert server.admin("GET", "state")["revision"] == before
    assert server.request("GET", "/api/v1/namespaces/shop/events")[1]["items"] == []
    # Refused as the write itself would be: another node's lease.
    if "leases" in path:
        other = path.replace(f"leases/{NODE}", "leases/node-b")
        assert server.request(method, other, dict(body, metadata={"name": "node-b"}),
                              token=NODE_TOKEN)[0] == 403
    assert server.request(method, path.replace("dryRun=All", "dryRun=Some"), body,
                          token=NODE_TOKEN, headers=headers)[0] == 400


def node_object(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def test_nodes_are_cluster_scoped_and_a_node_reads_only_its_own(server):
    created = create(server, "/api/v1/nodes", node_object(NODE))
    assert "namespace" not in created["metadata"]
    create(server, "/api/v1/nodes", node_object("node-b"))
    assert server.request("POST", "/api/v1/nodes", node_object(NODE))[0] == 409
    assert server.request("GET", "/api/v1/namespaces/shop/nodes/node-b")[0] == 404
    assert server.request("GET", "/api/v1/nodes/absent")[0] == 404
    assert server.request("GET", f"/api/v1/nodes/{NODE}", token=NODE_TOKEN)[0] == 200
    status, reply = server.request("GET", "/api/v1/nodes/node-b", token=NODE_TOKEN)
    assert status == 403
    assert reply["message"] == (
        'nodes "node-b" is forbidden: User "system:node:node-a" cannot get resource "nodes" in '
        "API group \"\" at the cluster scope: node 'node-a' cannot read 'node-b', only its own "
        "Node object")
    assert server.request("GET", "/api/v1/nodes", token=NODE_TOKEN)[0] == 403
    status, reply = server.request("DELETE", f"/api/v1/nodes/{NODE}")
    assert status == 200, reply
    # As kube-apiserver with AuthorizeNodeWithSelectors: by name, not by the graph, so that a
    # kubelet may look for its Node before creating it.
    assert server.request("GET", f"/api/v1/nodes/{NODE}", token=NODE_TOKEN)[0] == 404
    nodes = [r for r in server.request("GET", "/api/v1")[1]["resources"] if r["name"] == "nodes"]
    assert nodes and nodes[0]["namespaced"] is False


SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def access(server, token, verb, resource, group="", namespace=None):
    attributes = {"verb": verb, "group": group, "resource": resource}
    if namespace:
        attributes["namespace"] = namespace
    status, reply = server.request("POST", SSAR, {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes}}, token=token)
    assert status == 201, reply
    return reply["status"]["allowed"]


def test_self_subject_access_review_answers_as_the_authorizers_would(server):
    # No ACL: everything, `*` on `*` included.
    assert access(server, None, "*", "*", "*")
    assert access(server, None, "create", "pods")
    # The Node authorizer: mirror pods yes, every Secret or everything no.
    assert access(server, NODE_TOKEN, "create", "pods", namespace="shop")
    assert not access(server, NODE_TOKEN, "list", "secrets")
    assert not access(server, NODE_TOKEN, "*", "*", "*")
    # An ACL: only `*` matches `*`, as in RBAC.
    server.admin("POST", "tokens", {"token": "sa", "user": "sa-user"})
    server.admin("POST", "acl", {"user": "sa-user", "rules": [
        {"verbs": ["get", "list"], "resources": ["secrets"]}]})
    assert access(server, "sa", "list", "secrets")
    assert not access(server, "sa", "*", "*", "*")
    assert not access(server, "sa", "create", "pods")
    server.admin("POST", "acl", {"user": "sa-user", "rules": [
        {"verbs": ["*"], "resources": ["*"]}]})
    assert access(server, "sa", "*", "*", "*")
    assert server.request("POST", SSAR, {"spec": {}}, token="sa")[0] == 422
