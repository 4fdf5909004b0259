"""Configured policy is no alarm (issue 44, item 5): a Warning Event means the pod's owner has
something to do. What the chart's role does not grant (rbac.secrets: false, rbac.namespaces) the
daemon is told (--no-secrets, --object-namespaces, with the args the chart renders): it asks for
none of it, leaves those volumes to the kubelet and tells each pod once with a Normal Event. A
refusal the configuration does not predict stays a FailedMount Warning.

Each test runs against the test server (its ACL as the chart's role grants) and, when
VM_API_SERVERS names it, the real kube-apiserver with the chart's RBAC applied (api_servers.py).
"""
import json
import time

import pytest

from api_servers import DAEMON_USER, SERVERS, api_server, render_chart
from conftest import killed_after, visible_files, wait_for
from test_admin import get, metrics, sample
from test_cluster import CM, PROJECTED, SECRET, Cluster, cm_volume, secret_volume

READ = ["get", "list", "watch"]


def chart_policy_args(*values):
    """The read-policy args of the DaemonSet the chart renders for `values`: the daemon is
    started with what the chart would give it."""
    (ds,) = [o for o in render_chart(*values) if o["kind"] == "DaemonSet"]
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    return [a for a in container["args"]
            if a.startswith(("--no-secrets", "--object-namespaces"))]


def grant_as_the_chart(server, secrets=True, namespaces=()):
    """On the test server, the rights the chart's serviceAccount role grants (the real server
    has the chart's RBAC applied by api_server)."""
    if server.kind != "test":
        return
    objects = ["configmaps"] + (["secrets"] if secrets else [])
    rules = [{"verbs": READ, "resources": ["pods"]},
             {"verbs": ["create", "patch"], "resources": ["events"]},
             {"verbs": READ, "resources": objects}]
    if namespaces:
        rules[2]["namespaces"] = list(namespaces)
    server.admin("POST", "acl", {"user": DAEMON_USER, "rules": rules})


def warnings(c, *namespaces):
    return [e for ns in namespaces or ("default",) for e in c.events(ns) if e["type"] == "Warning"]


def quiet(seconds):
    time.sleep(seconds)


NO_SECRETS = ("--set", "rbac.secrets=false")
NO_SECRET_REFUSAL = ("secret default/tls is not read: the daemon reads no Secrets (--no-secrets; "
                     "chart: rbac.secrets: false)")


def pod_with_secrets(c):
    """ConfigMap `app`, Secret `tls`, and a pod reading them in a configMap, a secret and a
    projected volume, each set up by the kubelet. Returns the pod's uid."""
    c.put_configmap("app", {"level": "1"})
    c.put_secret("tls", {"tls.key": "SECRET-MARKER-POLICY-1"})
    bundle = {"name": "bundle", "projected": {"sources": [{"configMap": {"name": "app"}},
                                                          {"secret": {"name": "tls"}}]}}
    uid = c.create_pod("web", [cm_volume("cfg", "app"), secret_volume("tls", "tls"), bundle])
    c.kubelet_sets_up(uid, CM, "cfg", {"level": "1"})
    c.kubelet_sets_up(uid, SECRET, "tls", {"tls.key": "SECRET-MARKER-POLICY-1"})
    c.kubelet_sets_up(uid, PROJECTED, "bundle",
                      {"level": "1", "tls.key": "SECRET-MARKER-POLICY-1"})
    return uid


@pytest.mark.parametrize("server_kind", SERVERS)
def test_secrets_the_chart_does_not_grant_are_policy_one_normal_event_per_pod(tmp_path,
                                                                              server_kind):
    with api_server(server_kind, tmp_path, chart_values=NO_SECRETS) as server, \
            killed_after(Cluster(tmp_path, server, server_kind)) as c:
        grant_as_the_chart(server, secrets=False)
        uid = pod_with_secrets(c)
        args = chart_policy_args(*NO_SECRETS)
        assert args == ["--no-secrets"]
        started = time.time()
        c.start(*args)
        c.wait_synced("configmap default/app")
        c.put_configmap("app", {"level": "2"})
        wait_for(lambda: visible_files(c.volume_dir(uid, CM, "cfg")) == {"level": b"2"},
                 what="the ConfigMap's volume refreshed")
        left = wait_for(lambda: [e for e in c.events() if e["reason"] == "VolumesLeftToKubelet"],
                        what="the Normal Event saying the volumes are the kubelet's")
        quiet(1.5)  # retries, resyncs: nothing more may come
        assert warnings(c) == []
        left = [e for e in c.events() if e["reason"] == "VolumesLeftToKubelet"]
        assert len(left) == 1 and left[0].get("count", 1) == 1, left
        assert left[0]["type"] == "Normal"
        assert left[0]["involvedObject"]["uid"] == uid
        assert left[0]["message"] == (
            f'volume "tls": {NO_SECRET_REFUSAL}; volume "bundle": {NO_SECRET_REFUSAL}; the '
            'kubelet sets these volumes up and keeps them current')
        # The kubelet's content is the kubelet's: untouched.
        assert visible_files(c.volume_dir(uid, SECRET, "tls")) == {
            "tls.key": b"SECRET-MARKER-POLICY-1"}
        assert visible_files(c.volume_dir(uid, PROJECTED, "bundle")) == {
            "level": b"1", "tls.key": b"SECRET-MARKER-POLICY-1"}
        # No Secret was asked for, so none was refused.
        if server.kind == "test":
            asked = [r for r in c.daemon_requests(started) if "/secrets" in r["path"]]
            assert asked == [], asked
        probe, debug = c.admin_addresses()
        families, _ = metrics(probe)
        assert sample(families, "volumemanager_volumes", state="left_to_kubelet_by_policy") == 2
        assert sample(families, "volumemanager_volumes", state="failing") == 0
        state = json.loads(get(debug + "/debug/state")[1])
        assert {(v["volume"], v.get("policy")) for v in state["leftToKubelet"]} == {
            ("tls", NO_SECRET_REFUSAL), ("bundle", NO_SECRET_REFUSAL)}
        assert "object reads: no Secrets (--no-secrets); volumes that read other objects are " \
            "left to the kubelet" in c.log()
        assert c.stop() == 0


@pytest.mark.parametrize("server_kind", SERVERS)
def test_a_refusal_the_configuration_does_not_predict_is_still_a_warning(tmp_path, server_kind):
    """The role grants no Secrets but the daemon was not told (no --no-secrets): the API
    server's 403 is a surprise, something to fix, so a FailedMount Warning as before."""
    with api_server(server_kind, tmp_path, chart_values=NO_SECRETS) as server, \
            killed_after(Cluster(tmp_path, server, server_kind)) as c:
        grant_as_the_chart(server, secrets=False)
        uid = pod_with_secrets(c)
        c.start()
        failed = wait_for(lambda: [e for e in warnings(c) if e["reason"] == "FailedMount"
                                   and 'volume "tls"' in e["message"]], timeout=30,
                          what="a FailedMount Warning for the refused Secret")
        assert failed[0]["involvedObject"]["uid"] == uid
        assert 'secrets "tls" is forbidden' in failed[0]["message"], failed
        assert [e for e in c.events() if e["reason"] == "VolumesLeftToKubelet"] == []


@pytest.mark.parametrize("server_kind", SERVERS)
def test_namespaces_outside_the_charts_list_are_policy_one_normal_event_per_pod(tmp_path,
                                                                               server_kind):
    values = ("--set", "rbac.namespaces={team-a,team-b}")
    with api_server(server_kind, tmp_path, chart_values=values) as server, \
            killed_after(Cluster(tmp_path, server, server_kind)) as c:
        grant_as_the_chart(server, namespaces=("team-a", "team-b"))
        for ns in ("team-a", "elsewhere"):
            c.put_configmap("app", {"level": "1"}, namespace=ns)
        c.put_secret("tls", {"key": "SECRET-MARKER-NS-1"}, namespace="team-a")
        ours = c.create_pod("web", [cm_volume("cfg", "app"), secret_volume("tls", "tls")],
                            namespace="team-a")
        theirs = c.create_pod("web", [cm_volume("cfg", "app")], namespace="elsewhere")
        c.kubelet_sets_up(ours, CM, "cfg", {"level": "1"})
        c.kubelet_sets_up(ours, SECRET, "tls", {"key": "SECRET-MARKER-NS-1"})
        c.kubelet_sets_up(theirs, CM, "cfg", {"level": "0"})
        args = chart_policy_args(*values)
        assert args == ["--object-namespaces=team-a,team-b"]
        c.start(*args)
        c.wait_synced("configmap team-a/app", "secret team-a/tls")
        c.put_configmap("app", {"level": "2"}, namespace="team-a")
        c.put_configmap("app", {"level": "2"}, namespace="elsewhere")
        c.put_secret("tls", {"key": "SECRET-MARKER-NS-2"}, namespace="team-a")
        wait_for(lambda: visible_files(c.volume_dir(ours, CM, "cfg")) == {"level": b"2"},
                 what="team-a's ConfigMap current")
        wait_for(lambda: visible_files(c.volume_dir(ours, SECRET, "tls")) ==
                 {"key": b"SECRET-MARKER-NS-2"}, what="team-a's Secret current")
        wait_for(lambda: [e for e in c.events("elsewhere")
                          if e["reason"] == "VolumesLeftToKubelet"],
                 what="the Normal Event for the pod outside the namespaces")
        quiet(1.5)
        assert warnings(c, "team-a", "elsewhere") == []
        (left,) = [e for e in c.events("elsewhere") if e["reason"] == "VolumesLeftToKubelet"]
        assert left["type"] == "Normal" and left.get("count", 1) == 1, left
        assert left["involvedObject"]["uid"] == theirs
        assert left["message"] == (
            'volume "cfg": configmap elsewhere/app is not read: the daemon reads ConfigMaps and '
            'Secrets only in the namespaces team-a, team-b (--object-namespaces; chart: '
            'rbac.namespaces); the kubelet sets these volumes up and keeps them current')
        assert [e for e in c.events("team-a") if e["reason"] == "VolumesLeftToKubelet"] == []
        assert visible_files(c.volume_dir(theirs, CM, "cfg")) == {"level": b"0"}
        assert c.stop() == 0
