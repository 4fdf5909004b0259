"""The real kube-apiserver (v1.20.2, built by build_kube.sh) and etcd for a test, on loopback.

    with RealApiServer(tmp_path) as server:
        code, body = server.request("GET", "/api/v1/namespaces/default/configmaps")
        server.restart(outage=5.0)      # SIGKILL, a pause, the same flags again

`RealApiServer` answers the part of tests/apiserver/harness.TestApiServer that a test of the
daemon uses, so one test function runs against either server (tests/realkube/README.md):
`request`, `raw_request`, `kubeconfig` (admin: a client certificate in group system:masters),
`pki` (ca.crt, and client.crt/client.key for `client_cert_user`), `host`, `port`, `url`, and
`admin()` for what a real server can do too: `tokens` (only those given at construction: the
server reads its token file at start), `issue-client-cert` (signed by the server's client CA),
`requests` (read from the server's audit log: method, path, query, user, user agent, code, time),
`acl` (as RBAC: see `set_acl`). The rest (faults, settings, dropped watches...) a real server
cannot do: a test that needs them says so with the `test_server_only` mark.

Set-up as on a cluster: `--authorization-mode=Node,RBAC`, NodeRestriction, client certificates
and a static token file for identities, ServiceAccount admission off (no controller-manager runs
to create tokens: the tier's pods do not mount one) unless `bound_token_volumes` turns it on
(with 1.20's BoundServiceAccountTokenVolume feature, which the server always runs with, every pod
then mounts a bound token volume, as on 1.21+), a service-account issuer and its keys
(TokenRequest), the `default` namespace created by the server
and any other one on first use by `ensure_namespace` (which `request` calls for a create).
Everything lives under the given dir; the servers listen on 127.0.0.1 only and are killed at exit.
"""

import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "apiserver"))
from kubetestserver import pki  # noqa: E402
import harness  # noqa: E402
from harness import free_port  # noqa: E402,F401 (realkubelet and the tests take it from here)

# Where build_kube.sh put the binaries: VM_REAL_KUBE_DIR (the Makefile sets it for ctest), else
# build/realkube of the checkout.
KUBE_DIR = Path(os.environ.get("VM_REAL_KUBE_DIR",
                               HERE.parents[1] / "build" / "realkube"))
KUBE_APISERVER = KUBE_DIR / "bin" / "kube-apiserver"
ETCD = KUBE_DIR / "bin" / "etcd"
VERSION = "v1.20.2"

ADMIN_USER = "realkube-admin"


def available():
    """None when the binaries are there, else why not."""
    for binary in (KUBE_APISERVER, ETCD):
        if not os.access(binary, os.X_OK):
            return (f"{binary} is missing: `make real-kube` builds it "
                    "(tests/realkube/build_kube.sh)")
    return None


AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
"""


class RealApiServer:
    __test__ = False

    def __init__(self, workdir, tokens=None, client_cert_user=None, extra_args=(),
                 watch_cache_sizes=None, bound_token_volumes=False):
        """`tokens`: {token: (user, [groups])} for the static token file. `client_cert_user`:
        the CN of pki/client.crt (group system:nodes when it is a node's), as the test server's
        --client-cert-user. `watch_cache_sizes`: e.g. "configmaps#10". `bound_token_volumes`:
        ServiceAccount admission on (the server always runs with the BoundServiceAccountTokenVolume
        feature, alpha in 1.20): each pod created gets the standard `kube-api-access-<random>` projected volume
        (a token of its service account, the `kube-root-ca.crt` ConfigMap's ca.crt, its
        namespace), mounted in every container, as on 1.21 and later; the pod's service account
        must exist (`create_service_account`) and nothing publishes `kube-root-ca.crt`
        (`publish_root_ca`): no controller-manager runs."""
        missing = available()
        if missing:
            raise RuntimeError(missing)
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tokens = dict(tokens or {})
        self.client_cert_user = client_cert_user or "cert-user"
        self.extra_args = list(extra_args)
        self.watch_cache_sizes = watch_cache_sizes
        self.bound_token_volumes = bound_token_volumes
        self.etcd = None
        self.proc = None
        self.host = "127.0.0.1"
        self.port = free_port()
        self.url = f"https://{self.host}:{self.port}"
        self.path_prefix = ""
        self.restarts = 0
        self._namespaces = {"default", "kube-system", "kube-public", "kube-node-lease"}
        self._audit_offset = 0
        self._audit_requests = []
        self._acl_objects = {}  # user -> paths of the roles and bindings set_acl made
        self._set_aside = {}    # user -> [(collection path, binding)] set_acl deleted

    # --- life cycle ----------------------------------------------------------------------
    def __enter__(self):
        self._make_pki()
        try:
            self._start_etcd()
            self.start()
        except BaseException:
            self.__exit__(None, None, None)  # no etcd or kube-apiserver outlives a failed start
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        if self.etcd is not None:
            self.etcd.kill()
            self.etcd.wait()
            self.etcd = None

    def _make_pki(self):
        self.pki = str(self.dir / "pki")
        paths = pki.generate(self.pki, client_user=self.client_cert_user,
                             client_group="system:nodes" if self.client_cert_user.startswith(
                                 "system:node:") else "volumemanager-tests")
        self.ca_file = paths["ca.crt"]
        self.ssl_context = ssl.create_default_context(cafile=self.ca_file)
        admin_pem = self.dir / "pki" / "admin.pem"
        pki.issue_client_cert(self.pki, str(admin_pem), ADMIN_USER, ["system:masters"])
        self.admin_pem = str(admin_pem)
        subprocess.run(["openssl", "genrsa", "-out", str(self.dir / "pki" / "sa.key"), "2048"],
                       check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(self.dir / "pki" / "sa.key"), "-pubout",
                        "-out", str(self.dir / "pki" / "sa.pub")], check=True, capture_output=True)
        with open(self.dir / "tokens.csv", "w") as f:
            for token, (user, groups) in self.tokens.items():
                f.write(f'{token},{user},{user},"{",".join(groups)}"\n')
        os.chmod(self.dir / "tokens.csv", 0o600)
        (self.dir / "audit-policy.yaml").write_text(AUDIT_POLICY)
        self.kubeconfig = str(self.dir / "admin.kubeconfig")
        Path(self.kubeconfig).write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "admin",
            "clusters": [{"name": "real", "cluster": {"server": self.url,
                                                      "certificate-authority": self.ca_file}}],
            "users": [{"name": "admin", "user": {"client-certificate": self.admin_pem,
                                                 "client-key": self.admin_pem}}],
            "contexts": [{"name": "admin", "context": {"cluster": "real", "user": "admin"}}]}))

    def _start_etcd(self):
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self.etcd_log = open(self.dir / "etcd.log", "ab")
        self.etcd = subprocess.Popen(
            [str(ETCD), "--name", "realkube", "--data-dir", str(self.dir / "etcd"),
             "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"realkube=http://127.0.0.1:{peer}",
             "--listen-metrics-urls", "", "--log-level", "warn", "--logger", "zap"],
            stdout=self.etcd_log, stderr=subprocess.STDOUT)
        self._wait(lambda: self._etcd_healthy(), 30, "etcd healthy",
                   lambda: self.etcd.poll() is not None, self.dir / "etcd.log")

    def _etcd_healthy(self):
        try:
            import urllib.request
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=1) as r:
                return json.loads(r.read()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def etcd_compact(self):
        """Compacts etcd at its current revision (etcd's JSON gateway): every older
        resourceVersion is gone for a watch served from etcd. Returns the revision."""
        import base64
        import urllib.request

        def post(path, body):
            req = urllib.request.Request(self.etcd_url + path, json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read())
        revision = post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"][
            "revision"]
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return int(revision)

    def args(self):
        d = self.dir
        args = [str(KUBE_APISERVER),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1", f"--secure-port={self.port}",
                # 1.20 also serves an unauthenticated port on 127.0.0.1:8080 unless told not to.
                "--insecure-port=0",
                "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
                f"--cert-dir={d / 'certs'}",
                f"--tls-cert-file={d / 'pki' / 'server.crt'}",
                f"--tls-private-key-file={d / 'pki' / 'server.key'}",
                f"--client-ca-file={d / 'pki' / 'ca.crt'}",
                f"--token-auth-file={d / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                *(["--enable-admission-plugins=NodeRestriction,ServiceAccount"]
                  if self.bound_token_volumes else
                  ["--enable-admission-plugins=NodeRestriction",
                   "--disable-admission-plugins=ServiceAccount"]),
                # Alpha in 1.20, on from 1.21: ServiceAccount admission then gives each pod the
                # standard kube-api-access-<random> volume (kube-apiserver itself reads the gate
                # nowhere else).
                "--feature-gates=BoundServiceAccountTokenVolume=true",
                # TokenRequest (and the bound token volume) needs an issuer and both keys; the
                # keys are made for each server (_make_pki).
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={d / 'pki' / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'pki' / 'sa.key'}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true", "--profiling=false",
                f"--audit-log-path={d / 'audit.log'}",
                f"--audit-policy-file={d / 'audit-policy.yaml'}",
                "--audit-log-mode=blocking", "--audit-log-format=json",
                "--v=1"]
        if self.watch_cache_sizes:
            args.append(f"--watch-cache-sizes={self.watch_cache_sizes}")
        return args + self.extra_args

    def start(self, wait=True):
        """Starts kube-apiserver (again) with the same flags and port; with `wait`, returns once
        /readyz is 200 (the RBAC bootstrap roles are in place by then)."""
        self.log_file = open(self.dir / "kube-apiserver.log", "ab")
        self.proc = subprocess.Popen(self.args(), stdout=self.log_file, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout=90):
        self._wait(lambda: self._ready(), timeout, "kube-apiserver ready",
                   lambda: self.proc.poll() is not None, self.dir / "kube-apiserver.log")

    def _ready(self):
        try:
            status, _, body = self.raw_request("GET", "/readyz", admin=True)
            return status == 200
        except OSError:
            return False

    def kill(self):
        """SIGKILL: kube-apiserver waits out open watches on SIGTERM (up to 60 s)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            self.log_file.close()

    stop = kill

    def restart(self, outage=5.0):
        """Killed, `outage` seconds without a server, started again; returns the time (monotonic)
        it was killed and the time it was ready again."""
        killed = time.monotonic()
        self.kill()
        time.sleep(outage)
        self.start()
        self.restarts += 1
        return killed, time.monotonic()

    @staticmethod
    def _wait(predicate, timeout, what, died, log_path):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if died():
                raise RuntimeError(f"{what}: the process exited:\n" +
                                   Path(log_path).read_text(errors="replace")[-4000:])
            time.sleep(0.1)
        raise RuntimeError(f"{what}: not within {timeout} s:\n" +
                           Path(log_path).read_text(errors="replace")[-4000:])

    # --- requests --------------------------------------------------------------------------
    def connect(self, client_cert=False, admin=False):
        context = ssl.create_default_context(cafile=self.ca_file)
        if admin:
            context.load_cert_chain(self.admin_pem)
        elif isinstance(client_cert, str):
            context.load_cert_chain(client_cert)
        elif client_cert:
            context.load_cert_chain(os.path.join(self.pki, "client.crt"),
                                    os.path.join(self.pki, "client.key"))
        raw = socket.create_connection((self.host, self.port), timeout=10)
        return context.wrap_socket(raw, server_hostname=self.host)

    def raw_request(self, method, path, body=None, token=None, headers=None, client_cert=False,
                    admin=None):
        """One request on a new connection, as harness.TestApiServer.raw_request; without a
        token or client certificate it is sent as the admin (system:masters)."""
        if admin is None:
            admin = not token and not client_cert
        sock = self.connect(client_cert, admin)
        try:
            request = harness.request_bytes(
                f"{self.host}:{self.port}", method, path, body, token,
                {"User-Agent": "volumemanager-tests", **(headers or {})})
            status, resp_headers, rest = harness.TestApiServer._exchange(sock, request)
        finally:
            sock.close()
        if resp_headers.get("transfer-encoding") == "chunked":
            rest = harness.dechunk(rest)[0]
        return status, resp_headers, rest

    def request(self, method, path, body=None, **kwargs):
        """(status, decoded JSON body or text). A create in a namespace the server has not seen
        creates the namespace first (the test server has every namespace)."""
        if method == "POST":
            parts = urllib.parse.urlsplit(path).path.split("/")
            if "namespaces" in parts and parts.index("namespaces") + 2 < len(parts):
                self.ensure_namespace(parts[parts.index("namespaces") + 1])
        status, headers, data = self.raw_request(method, path, body, **kwargs)
        # The namespace exists (created, or 409), but the server's admission may not see it for a
        # moment after its start (the NamespaceLifecycle plugin's cache): asked again briefly.
        deadline = time.monotonic() + 10
        while (method == "POST" and status == 404 and b"namespaces" in data
               and b"not found" in data and time.monotonic() < deadline):
            time.sleep(0.2)
            status, headers, data = self.raw_request(method, path, body, **kwargs)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data.decode("utf-8", "replace")

    def create_service_account(self, name, namespace="default"):
        """A ServiceAccount (the controller-manager's job on a cluster; none runs here)."""
        status, body = self.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts",
                                    {"apiVersion": "v1", "kind": "ServiceAccount",
                                     "metadata": {"name": name, "namespace": namespace}})
        if status not in (201, 409):
            raise RuntimeError(f"creating service account {namespace}/{name}: {status} {body}")

    def publish_root_ca(self, namespace="default"):
        """The `kube-root-ca.crt` ConfigMap the controller-manager's root CA publisher puts in
        every namespace (the CA a pod verifies the API server with); returns the CA."""
        ca = Path(self.ca_file).read_text()
        status, body = self.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                                    {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "kube-root-ca.crt",
                                                  "namespace": namespace},
                                     "data": {"ca.crt": ca}})
        if status not in (201, 409):
            raise RuntimeError(f"publishing kube-root-ca.crt in {namespace}: {status} {body}")
        return ca

    def ensure_namespace(self, name):
        if name in self._namespaces:
            return
        status, headers, data = self.raw_request(
            "POST", "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        if status not in (201, 409):
            raise RuntimeError(f"creating namespace {name}: {status} {data[:300]!r}")
        self._namespaces.add(name)

    def apply(self, obj, dry_run=False, field_manager="volumemanager-tests"):
        """Server-side apply of one object (as the admin); returns (status, body)."""
        group_version = obj["apiVersion"]
        kind = obj["kind"]
        plural = RESOURCES.get(kind)
        if plural is None:
            raise ValueError(f"no resource path known for kind {kind}")
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        name = obj["metadata"]["name"]
        namespace = obj["metadata"].get("namespace")
        if kind not in CLUSTER_SCOPED:
            namespace = namespace or "default"
            self.ensure_namespace(namespace)
            base += f"/namespaces/{namespace}"
        query = f"?fieldManager={field_manager}&force=true" + ("&dryRun=All" if dry_run else "")
        return self.request("PATCH", f"{base}/{plural}/{name}{query}", json.dumps(obj).encode(),
                            headers={"Content-Type": "application/apply-patch+yaml"})

    # --- the test server's admin endpoint, where a real server can do the same ------------
    def admin(self, method, command, body=None):
        if (method, command) == ("POST", "tokens"):
            # The token file's entry must name the user and at least the groups asked for (a
            # service account's user has its groups there, as the real authenticator gives).
            known = self.tokens.get(body["token"])
            want = (body.get("user"), list(body.get("groups") or []))
            if known is None or known[0] != want[0] or not set(want[1]) <= set(known[1]):
                raise RuntimeError(f"a real server reads its tokens at start: give token for "
                                   f"{want} to RealApiServer(tokens=...)")
            return {}
        if (method, command) == ("POST", "issue-client-cert"):
            return pki.issue_client_cert(self.pki, body["path"], body["user"],
                                         body.get("groups", ()), body.get("days", 1))
        if (method, command) == ("POST", "acl"):
            self.set_acl(body["user"], body.get("rules"))
            return {}
        if (method, command) == ("GET", "requests"):
            return {"requests": self.audit_requests()}
        if (method, command) == ("DELETE", "requests"):
            self.audit_requests()
            self._audit_requests = []
            return {}
        raise RuntimeError(f"the real server has no equivalent of the test server's admin "
                           f"{method} {command}: mark the test test_server_only")

    def set_acl(self, user, rules):
        """The test server's ACL as RBAC: the user's own bindings (the chart's, say) are set
        aside and roles granting exactly `rules` ([{verbs, resources, namespaces?, names?}])
        bound to it; `rules` None puts the set-aside bindings back. A node's user keeps the Node
        authorizer's grant (RBAC adds to it, as the test server's ACL does for a node)."""
        acl = "volumemanager-tests-acl-" + re.sub(r"[^a-z0-9.-]", "-", user.lower())
        for path in self._acl_objects.pop(user, []):
            self.request("DELETE", path)
        if rules is None:
            for path, obj in self._set_aside.pop(user, []):
                status, body = self.request("POST", path, obj)
                assert status in (200, 201, 409), body
            return
        if user not in self._set_aside:
            self._set_aside[user] = self._take_bindings(user)
        by_namespace = {}
        for rule in rules:
            rbac_rule = {"apiGroups": sorted({API_GROUPS.get(r, "") for r in rule["resources"]}),
                         "resources": rule["resources"], "verbs": rule["verbs"]}
            if rule.get("names"):
                rbac_rule["resourceNames"] = rule["names"]
            for ns in rule.get("namespaces") or [None]:
                by_namespace.setdefault(ns, []).append(rbac_rule)
        created = []
        subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
        for ns, ns_rules in by_namespace.items():
            base = "/apis/rbac.authorization.k8s.io/v1" + (f"/namespaces/{ns}" if ns else "")
            role_kind = "Role" if ns else "ClusterRole"
            meta = {"name": acl, **({"namespace": ns} if ns else {})}
            for kind, obj in (
                    (role_kind, {"rules": ns_rules}),
                    (role_kind + "Binding", {"subjects": [subject], "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": acl}})):
                plural = RESOURCES[kind]
                status, body = self.request("POST", f"{base}/{plural}", {
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                    "metadata": meta, **obj})
                assert status == 201, body
                created.append(f"{base}/{plural}/{acl}")
        self._acl_objects[user] = created
        # The RBAC authorizer learns of roles through its informers: wait until it grants the
        # first rule.
        first = rules[0] if rules else None
        if first:
            ns = (first.get("namespaces") or ["default"])[0]
            review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                      "spec": {"user": user, "resourceAttributes": {
                          "namespace": ns, "verb": first["verbs"][0],
                          "group": API_GROUPS.get(first["resources"][0], ""),
                          "resource": first["resources"][0],
                          "name": (first.get("names") or [""])[0]}}}
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                status, body = self.request(
                    "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
                if status == 201 and body.get("status", {}).get("allowed"):
                    break
                time.sleep(0.05)
        time.sleep(0.2)  # the removal of the set-aside bindings, likewise

    def _take_bindings(self, user):
        """Deletes the (cluster) role bindings naming `user` (as a User, or as its service
        account) but the server's own (system:...); returns them to be put back."""
        taken = []
        for path in ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                     "/apis/rbac.authorization.k8s.io/v1/rolebindings"):
            status, body = self.request("GET", path)
            assert status == 200, body
            for b in body["items"]:
                if b["metadata"]["name"].startswith("system:"):
                    continue
                if not any(_subject_is(s, user) for s in b.get("subjects") or []):
                    continue
                ns = b["metadata"].get("namespace")
                collection = "/apis/rbac.authorization.k8s.io/v1" + (
                    f"/namespaces/{ns}" if ns else "") + "/" + path.rsplit("/", 1)[1]
                self.request("DELETE", f"{collection}/{b['metadata']['name']}")
                kept = {k: v for k, v in b.items() if k != "metadata"}
                kept["metadata"] = {k: v for k, v in b["metadata"].items()
                                    if k in ("name", "namespace", "labels", "annotations")}
                kept["apiVersion"] = "rbac.authorization.k8s.io/v1"
                kept["kind"] = "RoleBinding" if ns else "ClusterRoleBinding"
                taken.append((collection, kept))
        return taken

    def audit_requests(self):
        """The requests the server has finished or started answering (watches once their
        response started), oldest first, in the test server's request-log form."""
        path = self.dir / "audit.log"
        if not path.exists():
            return self._audit_requests
        with open(path, "rb") as f:
            f.seek(self._audit_offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._audit_offset += end
        for line in data[:end].splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            parts = urllib.parse.urlsplit(e.get("requestURI", ""))
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(parts.query).items()}
            status = e.get("responseStatus") or {}
            self._audit_requests.append({
                "method": VERB_METHODS.get(e.get("verb"), e.get("verb", "").upper()),
                "verb": e.get("verb"), "stage": e.get("stage"),
                "path": parts.path, "query": query,
                "user": (e.get("user") or {}).get("username"),
                "user_agent": e.get("userAgent", ""),
                "code": status.get("code"),
                "time": _timestamp(e.get("stageTimestamp")),
            })
        return self._audit_requests


VERB_METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT",
                "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}

RESOURCES = {"ServiceAccount": "serviceaccounts", "ConfigMap": "configmaps", "Secret": "secrets",
             "Service": "services", "Pod": "pods", "Namespace": "namespaces",
             "DaemonSet": "daemonsets", "ClusterRole": "clusterroles",
             "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
             "RoleBinding": "rolebindings", "ServiceMonitor": "servicemonitors",
             "PodDisruptionBudget": "poddisruptionbudgets", "Lease": "leases"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
API_GROUPS = {"leases": "coordination.k8s.io", "selfsubjectreviews": "authentication.k8s.io"}


def _subject_is(subject, user):
    if subject.get("kind") == "User":
        return subject.get("name") == user
    if subject.get("kind") == "ServiceAccount":
        return user == f"system:serviceaccount:{subject.get('namespace')}:{subject.get('name')}"
    return False


def _timestamp(text):
    """RFC 3339 with microseconds (the audit log's stageTimestamp) as time.time() seconds."""
    if not text:
        return 0.0
    from datetime import datetime
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
