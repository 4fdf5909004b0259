"""Service account tokens in projected volumes (issue 43), end to end in cluster mode.

With `--volume-ownership self` the daemon sets up every pod's standard `kube-api-access-*` volume
itself: a token of the pod's service account from the TokenRequest API, bound to the pod, beside
the `kube-root-ca.crt` ConfigMap's `ca.crt` and the pod's namespace. Against the real
kube-apiserver 1.20.2 the server injects that volume itself (ServiceAccount admission with the
BoundServiceAccountTokenVolume feature); against the test server the test writes the same
volume. TokenReview then says whose the token is: the pod's service account, bound to the pod's
UID, for the audience asked. The token is renewed before it expires (the test server shortens a
token's life to seconds), every file of the volume swapped together. Under a service account's
credentials no token is requested and the volume fails with a FailedMount Event saying why.
Sources the daemon cannot produce are the kubelet's business beside it, and refused with an
Event where the daemon owns the volumes. No token ever shows in the daemon's log, its Events, its
/metrics or its /debug/state.
"""
import json
import os
import stat
import time
import urllib.request

import pytest

from conftest import killed_after, visible_files, wait_for
from test_cluster import PROJECTED, Cluster, cm_volume
from test_node_identity import NodeCluster
from api_servers import NODE_USER, SERVERS, api_server

ISSUER = "https://kubernetes.default.svc"
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
# The daemon sets every volume up. Without tmpfs: run as root, the daemon would leave its tmpfs
# mounted under the test's dir when it stops (as the kubelet leaves them for running containers).
SELF = ("--volume-ownership", "self", "--no-tmpfs")


def kube_api_access(name="kube-api-access-test1"):
    """The volume ServiceAccount admission injects on 1.21+ (on 1.20 with
    BoundServiceAccountTokenVolume): a token of an hour and 7 s, the CA, the namespace."""
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}


def vault_token(name="vault-token"):
    return {"name": name, "projected": {"sources": [
        {"serviceAccountToken": {"path": "vault", "audience": "vault",
                                 "expirationSeconds": 600}}]}}


@pytest.fixture(params=SERVERS)
def server_kind(request):
    return request.param


def set_up_account(c):
    """The `default` service account and the `kube-root-ca.crt` ConfigMap (a cluster's
    controller-manager makes both; none runs beside either server). Returns the CA text."""
    if c.server.kind == "real":
        c.server.create_service_account("default")
        return c.server.publish_root_ca()
    c.api("POST", "/api/v1/namespaces/default/serviceaccounts",
          {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
          expect=(201, 409))
    ca = open(c.server.ca_file).read()
    c.put_configmap("kube-root-ca.crt", {"ca.crt": ca})
    return ca


def create_pod_with_token_volume(c, name="web", extra=()):
    """A pod of this node with the standard token volume (the real server's admission injects
    it; the test server gets it from the test); returns (uid, the volume's name)."""
    volumes = list(extra)
    if c.server.kind != "real" or not c.server.bound_token_volumes:
        volumes.append(kube_api_access())
    uid = c.create_pod(name, volumes)
    pod = c.api("GET", f"/api/v1/namespaces/default/pods/{name}")
    names = [v["name"] for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
    assert len(names) == 1, pod["spec"]["volumes"]
    assert pod["spec"]["serviceAccountName"] == "default"
    mounts = [m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]
              if m["name"] == names[0]]
    if c.server.kind == "real" and c.server.bound_token_volumes:
        assert mounts == [TOKEN_MOUNT], mounts  # as the admission mounts it
    return uid, names[0]


def review(c, token, audience=None):
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}}
    if audience:
        body["spec"]["audiences"] = [audience]
    return c.api("POST", REVIEWS, body)["status"]


def admin_bodies(c):
    """/metrics and /debug/state of the running daemon."""
    probe, debug = c.admin_addresses()
    out = {}
    for url in (probe + "/metrics", debug + "/debug/state"):
        with urllib.request.urlopen(url, timeout=10) as r:
            out[url] = r.read()
    return out


def assert_no_token_leaked(c, tokens):
    """None of `tokens` in the daemon's log, the Events of the namespace, its /metrics or its
    /debug/state (read now, while it runs)."""
    bodies = admin_bodies(c)
    bodies["log"] = c.log_path.read_bytes()
    bodies["events"] = json.dumps(c.api("GET", "/api/v1/events")["items"]).encode()
    for token in tokens:
        # The whole token, and its signature alone (the part no other token shares).
        for form in (token.encode(), token.rsplit(".", 1)[-1].encode()):
            for where, body in bodies.items():
                assert form not in body, f"a token in {where}"


@pytest.fixture
def node_cluster(tmp_path, server_kind):
    """The daemon under the node's credentials (its client certificate); on the real server
    the pods get the standard token volume from ServiceAccount admission."""
    options = {"bound_token_volumes": True, "chart_rbac": False} if server_kind == "real" else {}
    with api_server(server_kind, tmp_path, client_cert_user=NODE_USER, **options) as server, \
            killed_after(NodeCluster(tmp_path, server, "certificate")) as c:
        yield c


def test_self_owned_kube_api_access_gets_a_token_bound_to_its_pod_beside_ca_and_namespace(
        node_cluster):
    c = node_cluster
    ca = set_up_account(c)
    uid, volume = create_pod_with_token_volume(c, extra=[vault_token()])
    c.start(*SELF)
    access = c.volume_dir(uid, PROJECTED, volume)
    wait_for(lambda: set(visible_files(access)) == {"token", "ca.crt", "namespace"},
             timeout=30, what="the kube-api-access volume set up by the daemon")
    files = visible_files(access)
    assert files["ca.crt"] == ca.encode()
    assert files["namespace"] == b"default"
    token = files["token"].decode()
    # defaultMode: the pod has no fsGroup and no single runAsUser.
    assert stat.S_IMODE(os.stat(access / "token").st_mode) == 0o644

    status = review(c, token)
    assert status["authenticated"] is True, status
    assert status["user"]["username"] == "system:serviceaccount:default:default"
    assert status["user"]["extra"]["authentication.kubernetes.io/pod-uid"] == [uid]
    assert status["user"]["extra"]["authentication.kubernetes.io/pod-name"] == ["web"]
    assert status["audiences"] == [ISSUER]

    vault_dir = c.volume_dir(uid, PROJECTED, "vault-token")
    wait_for(lambda: "vault" in visible_files(vault_dir), what="the vault token")
    vault = visible_files(vault_dir)["vault"].decode()
    status = review(c, vault, "vault")
    assert status["authenticated"] is True and status["audiences"] == ["vault"], status
    assert status["user"]["extra"]["authentication.kubernetes.io/pod-uid"] == [uid]
    # Meant for vault, not for the API server.
    assert not review(c, vault).get("authenticated")

    # One request per token, each under the node's identity, bound to this pod.
    requests = [r for r in c.daemon_requests() if r["path"].endswith("/token")]
    assert {r["path"] for r in requests} == {
        "/api/v1/namespaces/default/serviceaccounts/default/token"}, requests
    assert len([r for r in requests if r.get("code") == 201]) == 2, requests
    state = json.loads(admin_bodies(c)[c.admin_addresses()[1] + "/debug/state"])
    entry = next(v for v in state["volumes"] if v["volume"] == volume)
    assert entry["serviceAccountTokens"][0]["serviceAccount"] == "default/default"
    assert entry["serviceAccountTokens"][0]["hasToken"] is True
    assert entry["serviceAccountTokens"][0]["expirationSeconds"] == 3607
    assert_no_token_leaked(c, [token, vault])
    assert not [e for e in c.events() if e["reason"] == "FailedMount"], c.events()
    assert c.stop() == 0


@pytest.mark.test_server_only("a token living seconds: a real server's shortest is 10 minutes")
def test_a_token_is_renewed_before_it_expires_every_file_of_the_volume_together(tmp_path):
    with api_server("test", tmp_path, client_cert_user=NODE_USER) as server, \
            killed_after(NodeCluster(tmp_path, server, "certificate")) as c:
        ca = set_up_account(c)
        # As --service-account-max-token-expiration would: 4 s, whatever is asked.
        server.admin("POST", "settings", {"token_max_expiration_seconds": 4})
        uid, volume = create_pod_with_token_volume(c)
        c.start(*SELF)
        access = c.volume_dir(uid, PROJECTED, volume)
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 4 and time.monotonic() < deadline:
            files = visible_files(access) if (access / "..data").exists() else {}
            if "token" in files and (not seen or files["token"] != seen[-1][0]):
                seen.append((files["token"], time.monotonic()))
                # The rest of the volume is there with each token, as it was.
                assert files["ca.crt"] == ca.encode() and files["namespace"] == b"default"
                assert review(c, files["token"].decode())["authenticated"] is True
            time.sleep(0.05)
        assert len(seen) == 4, f"{len(seen)} tokens in 20 s"
        # Each renewed at 80 % of its life, less a jitter of up to a tenth of it: the life is 3 to
        # 4 s (the expiry is written to the second), so 2.1 to 3.2 s after the one before, give or
        # take the writes and this loop's polling; never after it expired (4 s).
        gaps = [b[1] - a[1] for a, b in zip(seen, seen[1:])]
        assert all(1.9 <= g <= 3.9 for g in gaps), gaps
        # The first token has expired by now: the server no longer takes it.
        assert not review(c, seen[0][0].decode()).get("authenticated")
        assert not [e for e in c.events() if e["reason"] == "FailedMount"], c.events()
        metrics = admin_bodies(c)[c.admin_addresses()[0] + "/metrics"].decode()
        assert 'volumemanager_service_account_token_requests_total{result="success"}' in metrics
        assert_no_token_leaked(c, [t.decode() for t, _ in seen])
        assert c.stop() == 0


def test_under_a_service_accounts_credentials_the_volume_fails_saying_why(tmp_path, server_kind):
    """The chart's serviceAccount mode never grants serviceaccounts/token create: the daemon
    sends no token request, and the pod's owner reads why in a FailedMount Event; the pod's other
    volumes are set up."""
    with api_server(server_kind, tmp_path) as server:
        with killed_after(Cluster(tmp_path, server, server_kind)) as c:
            set_up_account(c)
            c.put_configmap("app", {"level": "info"})
            uid, volume = create_pod_with_token_volume(c, extra=[cm_volume("cfg", "app")])
            c.start(*SELF)
            wait_for(lambda: visible_files(c.volume_dir(uid, "kubernetes.io~configmap", "cfg")) ==
                     {"level": b"info"}, timeout=30, what="the configMap volume")

            def failed():
                return [e for e in c.events() if e["reason"] == "FailedMount" and
                        e["involvedObject"]["uid"] == uid]
            events = wait_for(failed, timeout=30, what="the FailedMount Event")
            message = events[0]["message"]
            assert events[0]["type"] == "Warning"
            assert message.startswith(
                f'MountVolume.SetUp failed for volume "{volume}" : serviceAccountToken source '
                '(path "token"): no token requested for service account "default/default": the '
                "daemon "), message
            assert "requests tokens only with a node's credentials (chart: credentials: node)" \
                in message
            assert "serviceaccounts/token" in message and "--volume-ownership kubelet" in message
            assert not (c.volume_dir(uid, PROJECTED, volume)).exists()
            assert not [r for r in c.daemon_requests() if r["path"].endswith("/token")]
            assert c.stop() == 0


@pytest.mark.test_server_only("podCertificate is newer than 1.20: a real 1.20 server drops it")
@pytest.mark.parametrize("ownership", ["kubelet", "self"])
def test_a_source_only_the_kubelet_produces(tmp_path, ownership):
    """Beside a kubelet that owns the volumes, a volume with a podCertificate source is the
    kubelet's alone: not refreshed, no Event (it failed, before). Where the daemon owns the
    volumes it is refused with an Event that says where it can be set up."""
    with api_server("test", tmp_path) as server:
        with killed_after(Cluster(tmp_path, server, "http1")) as c:
            c.put_configmap("app", {"level": "info"})
            cert = {"name": "cert", "projected": {"sources": [
                {"configMap": {"name": "app"}},
                {"podCertificate": {"signerName": "example.com/s", "keyType": "ED25519",
                                    "credentialBundlePath": "bundle.pem"}}]}}
            uid = c.create_pod("web", [cert, cm_volume("cfg", "app")])
            if ownership == "kubelet":
                c.kubelet_sets_up(uid, PROJECTED, "cert", {"level": "info", "bundle.pem": "PEM"})
                c.kubelet_sets_up(uid, "kubernetes.io~configmap", "cfg", {"level": "info"})
            c.start("--volume-ownership", ownership, *(["--no-tmpfs"] if ownership == "self" else []))
            if ownership == "kubelet":
                wait_for(lambda: c.records(msg=lambda m: m.startswith(
                    "Volume is left to the kubelet")), what="the left-to-kubelet line")
                line = c.records(msg=lambda m: m.startswith("Volume is left to the kubelet"))[0]
                assert line["volume"] == "cert"
                assert line["reason"] == "projected sources only the kubelet produces: " \
                    "podCertificate"
                c.wait_synced("configmap default/app")
                c.put_configmap("app", {"level": "debug"})
                wait_for(lambda: visible_files(c.volume_dir(uid, "kubernetes.io~configmap",
                                                            "cfg")) == {"level": b"debug"},
                         what="the configMap volume refreshed")
                time.sleep(1)
                assert visible_files(c.volume_dir(uid, PROJECTED, "cert")) == \
                    {"level": b"info", "bundle.pem": b"PEM"}
                assert not [e for e in c.events() if e["reason"] == "FailedMount"], c.events()
            else:
                events = wait_for(lambda: [e for e in c.events() if e["reason"] == "FailedMount"],
                                  timeout=30, what="the FailedMount Event")
                assert events[0]["message"] == (
                    'MountVolume.SetUp failed for volume "cert" : podCertificate source is not '
                    "supported by volumemanager: only the kubelet can produce it, so the volume can "
                    "be set up only on a node whose kubelet owns the pod's volumes "
                    "(--volume-ownership kubelet)"), events
                assert not c.volume_dir(uid, PROJECTED, "cert").exists()
            assert c.stop() == 0
