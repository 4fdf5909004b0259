"""TokenRequest and TokenReview of kube-test-apiserver (kubetestserver/tokens.py): what
kube-apiserver 1.20 checks (a node gets tokens only for the service accounts of its own pods, bound
to such a pod with its UID; 600 s at least; the account must exist; a pod of another account or
another UID is refused), what a token says (its claims), that it authenticates as its service
account until it expires, and that TokenReview reports it as kube-apiserver does."""

import time

import pytest

from harness import TestApiServer
from kubetestserver.tokens import ISSUER, claims_of

NODE = "node-a"
NODE_USER = f"system:node:{NODE}"
NODE_TOKEN = "node-a-token"
TOKEN_PATH = "/api/v1/namespaces/shop/serviceaccounts/{}/token"


def create(server, path, body):
    code, reply = server.request("POST", path, body)
    assert code == 201, reply
    return reply


def pod(name, node, account="web"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"nodeName": node, "serviceAccountName": account,
                     "containers": [{"name": "c", "image": "busybox"}]}}


def request(name, uid, audiences=None, seconds=None, kind="Pod", api_version="v1"):
    spec = {"boundObjectRef": {"kind": kind, "apiVersion": api_version, "name": name}}
    if uid is not None:
        spec["boundObjectRef"]["uid"] = uid
    if audiences is not None:
        spec["audiences"] = audiences
    if seconds is not None:
        spec["expirationSeconds"] = seconds
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


@pytest.fixture
def server():
    """Service accounts web and db in shop; pods web-0 (node-a, runs as web) and db-0 (node-b,
    runs as db), their UIDs in `uids`; NODE_TOKEN is node-a's."""
    with TestApiServer() as s:
        for account in ("web", "db"):
            create(s, "/api/v1/namespaces/shop/serviceaccounts",
                   {"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": account, "namespace": "shop"}})
        s.uids = {}
        for name, node, account in (("web-0", NODE, "web"), ("db-0", "node-b", "db")):
            s.uids[name] = create(s, "/api/v1/namespaces/shop/pods",
                                  pod(name, node, account))["metadata"]["uid"]
        s.admin("POST", "tokens", {"token": NODE_TOKEN, "user": NODE_USER,
                                   "groups": ["system:nodes"]})
        yield s


def test_a_node_gets_a_token_bound_to_its_pod_with_the_claims_asked_for(server):
    code, reply = server.request("POST", TOKEN_PATH.format("web"),
                                 request("web-0", server.uids["web-0"], ["vault"], 3600),
                                 token=NODE_TOKEN)
    assert code == 201, reply
    assert reply["spec"]["audiences"] == ["vault"] and reply["spec"]["expirationSeconds"] == 3600
    claims = claims_of(reply["status"]["token"])
    assert claims["sub"] == "system:serviceaccount:shop:web"
    assert claims["aud"] == ["vault"]
    assert claims["kubernetes.io"]["pod"] == {"name": "web-0", "uid": server.uids["web-0"]}
    assert claims["exp"] - claims["iat"] == 3600
    expires = time.mktime(time.strptime(reply["status"]["expirationTimestamp"],
                                        "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert abs(expires - claims["exp"]) <= 1
    # No audience: the server's own; no expiry: an hour.
    code, reply = server.request("POST", TOKEN_PATH.format("web"),
                                 request("web-0", server.uids["web-0"]), token=NODE_TOKEN)
    assert code == 201, reply
    assert reply["spec"]["audiences"] == [ISSUER]
    assert reply["spec"]["expirationSeconds"] == 3600


# (case, account, bound pod, uid: "own" / "other" / None, expected code, message part)
NODE_CASES = [
    ("account of no pod of the node", "db", "db-0", "own", 403,
     "no relationship found between node 'node-a' and this object"),
    ("pod of another node", "web", "db-0", "own", 403, None),
    ("no uid", "web", "web-0", None, 403, "node requested token with a pod binding without a uid"),
    ("another uid", "web", "web-0", "other", 403, "does not match the UID in record"),
    ("pod gone", "web", "web-9", "own", 404, 'pods "web-9" not found'),
]


@pytest.mark.parametrize("case,account,bound,uid,code,message", NODE_CASES,
                         ids=[c[0] for c in NODE_CASES])
def test_node_restriction(server, case, account, bound, uid, code, message):
    if case == "pod of another node":
        # A pod of node-a runs as web too, so the authorizer lets the request through; the
        # binding to db-0 (node-b's, running as db) is what NodeRestriction refuses.
        create(server, "/api/v1/namespaces/shop/pods", pod("db-1", "node-b", "web"))
        bound = "db-1"
        server.uids["db-1"] = server.request("GET", "/api/v1/namespaces/shop/pods/db-1")[1][
            "metadata"]["uid"]
        message = "node requested token bound to a pod scheduled on a different node"
    uid_value = {"own": server.uids.get(bound, "00000000-0000-0000-0000-000000000000"),
                 "other": "00000000-0000-0000-0000-000000000001", None: None}[uid]
    status, reply = server.request("POST", TOKEN_PATH.format(account),
                                   request(bound, uid_value), token=NODE_TOKEN)
    assert status == code, reply
    assert message in reply["message"], reply["message"]


def test_a_node_must_bind_its_token_to_a_pod(server):
    status, reply = server.request("POST", TOKEN_PATH.format("web"),
                                   {"kind": "TokenRequest", "spec": {}}, token=NODE_TOKEN)
    assert status == 403 and reply["message"] == (
        'serviceaccounts "web" is forbidden: node requested token not bound to a pod'), reply


@pytest.mark.parametrize("seconds,code", [(599, 422), (600, 201), (1 << 32, 201),
                                          ((1 << 32) + 1, 422)])
def test_expiration_bounds(server, seconds, code):
    status, reply = server.request("POST", TOKEN_PATH.format("web"),
                                   request("web-0", server.uids["web-0"], seconds=seconds))
    assert status == code, reply
    if code == 422:
        assert reply["reason"] == "Invalid"
        assert reply["message"].startswith(
            f'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid '
            f'value: {seconds}: may not specify a duration'), reply["message"]


def test_what_the_storage_checks_for_anyone(server):
    # The account must exist.
    status, reply = server.request("POST", TOKEN_PATH.format("nobody"),
                                   request("web-0", server.uids["web-0"]))
    assert status == 404 and reply["message"] == 'serviceaccounts "nobody" not found', reply
    # A pod running as another account.
    status, reply = server.request("POST", TOKEN_PATH.format("db"),
                                   request("web-0", server.uids["web-0"]))
    assert status == 400 and reply["message"] == (
        'cannot bind token for serviceaccount "db" to pod running with different serviceaccount '
        "name."), reply
    # Another UID: the pod was deleted and created again.
    status, reply = server.request("POST", TOKEN_PATH.format("web"),
                                   request("web-0", "00000000-0000-0000-0000-000000000001"))
    assert status == 409 and reply["reason"] == "Conflict", reply
    # Bound to nothing is allowed for anyone but a node.
    assert server.request("POST", TOKEN_PATH.format("web"), {"spec": {}})[0] == 201


def test_a_token_authenticates_as_its_account_until_it_expires_and_tokenreview_says_so(server):
    server.admin("POST", "settings", {"token_max_expiration_seconds": 2})
    code, reply = server.request("POST", TOKEN_PATH.format("web"),
                                 request("web-0", server.uids["web-0"], seconds=3600),
                                 token=NODE_TOKEN)
    assert code == 201 and reply["spec"]["expirationSeconds"] == 2, reply
    token = reply["status"]["token"]
    code, who = server.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                               {"kind": "SelfSubjectReview"}, token=token)
    assert code == 201 and who["status"]["userInfo"]["username"] == \
        "system:serviceaccount:shop:web", who
    code, review = server.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                                  {"kind": "TokenReview", "spec": {"token": token}})
    assert code == 201, review
    assert review["status"]["authenticated"] is True
    assert review["status"]["user"]["username"] == "system:serviceaccount:shop:web"
    assert review["status"]["user"]["extra"] == {
        "authentication.kubernetes.io/pod-name": ["web-0"],
        "authentication.kubernetes.io/pod-uid": [server.uids["web-0"]]}
    assert review["status"]["audiences"] == [ISSUER]
    # Another audience than the token's: not authenticated.
    code, review = server.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                                  {"kind": "TokenReview",
                                   "spec": {"token": token, "audiences": ["vault"]}})
    assert code == 201 and "authenticated" not in review["status"], review
    # A node may not review tokens.
    assert server.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                          {"kind": "TokenReview", "spec": {"token": token}},
                          token=NODE_TOKEN)[0] == 403
    time.sleep(2.2)
    assert server.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          {"kind": "SelfSubjectReview"}, token=token)[0] == 401


def test_discovery_lists_the_token_subresource(server):
    code, resources = server.request("GET", "/api/v1")
    assert code == 200
    entry = next(r for r in resources["resources"] if r["name"] == "serviceaccounts/token")
    assert entry["verbs"] == ["create"] and entry["kind"] == "TokenRequest"
    assert entry["group"] == "authentication.k8s.io"
