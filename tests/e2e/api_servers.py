"""Which API server a cluster-mode end-to-end test runs against: the project's test server
(tests/apiserver, with its fault hooks) or the real kube-apiserver v1.20.2 (tests/realkube).

`VM_API_SERVERS` (comma-separated: `test`, `real`; default `test`) selects the servers; ctest's
`e2e_cluster` entries run with `test`, the real-Kubernetes tier's `realkube_*` entries with
`real`. A test the real server cannot serve (it needs a fault hook, a rotating token, an ACL of the
test server's) carries `@pytest.mark.test_server_only("why")` and is deselected under `real`,
never skipped; tests/realkube/README.md lists every cluster-mode test with where it runs.

`api_server(kind, tmp)` starts one; on the real server the identities the tests use are set up
as a cluster would have them: the daemon's service-account token with the chart's RBAC (rendered
by Helm from helm/volumemanager, serviceAccount mode, bound to kube-system/volumemanager), a
node's token and client certificates with the Node authorizer.
"""
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "apiserver"))
sys.path.insert(0, str(ROOT / "tests" / "realkube"))
from harness import TestApiServer  # noqa: E402
import realkube  # noqa: E402

SERVERS = [s for s in os.environ.get("VM_API_SERVERS", "test").split(",") if s]

NODE = "e2e-node"
NODE_USER = f"system:node:{NODE}"
DAEMON_TOKEN = "SECRET-MARKER-DAEMON-TOKEN"
DAEMON_USER = "system:serviceaccount:kube-system:volumemanager"
NODE_TOKEN = "SECRET-MARKER-NODE-TOKEN"
# The tokens a real server knows from its start (its token file): every one the tests give the
# test server with admin("POST", "tokens").
REAL_TOKENS = {
    DAEMON_TOKEN: (DAEMON_USER, ["system:serviceaccounts", "system:serviceaccounts:kube-system"]),
    NODE_TOKEN: (NODE_USER, ["system:nodes"]),
}
CHART = ROOT / "helm" / "volumemanager"


def helm():
    tools = os.environ.get("VM_CHART_TOOLS", str(ROOT / "build" / "chart-tools"))
    return str(Path(tools) / "bin" / "helm")


def render_chart(*args, namespace="kube-system", release="volumemanager"):
    """The chart's objects as Helm renders them for a 1.20.2 server (`helm template`)."""
    out = subprocess.run([helm(), "template", release, str(CHART), "--namespace", namespace,
                          "--kube-version", realkube.VERSION, *args],
                         check=True, capture_output=True, text=True).stdout
    return [o for o in yaml.safe_load_all(out) if o]


def apply_chart_rbac(server, *values_args):
    """Creates the chart's ServiceAccount, roles and bindings (serviceAccount mode) on `server`,
    as `helm install` would: the daemon's token user is then bound as a chart install binds it."""
    for obj in render_chart(*values_args):
        if obj["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                           "RoleBinding"):
            status, body = server.apply(obj)
            assert status in (200, 201), f"applying {obj['kind']} {obj['metadata']['name']}: " \
                                         f"{status} {json.dumps(body)[:500]}"


@contextlib.contextmanager
def api_server(kind, tmp, client_cert_user=None, chart_values=(), chart_rbac=True,
               **real_options):
    """A started server of `kind` ("test" or "real"); stopped at exit. On the real one the
    chart's RBAC for the daemon's service account is applied unless `chart_rbac` is False (a
    node identity needs none)."""
    if kind == "test":
        with TestApiServer(client_cert_user=client_cert_user) as server:
            server.kind = "test"
            yield server
        return
    if kind != "real":
        raise ValueError(f"unknown API server kind {kind!r}")
    with realkube.RealApiServer(Path(tmp) / "realkube", tokens=REAL_TOKENS,
                                client_cert_user=client_cert_user, **real_options) as server:
        server.kind = "real"
        if chart_rbac:
            apply_chart_rbac(server, *chart_values)
        yield server
