"""Tests of the Helm chart (helm/volumemanager) with the real Helm 4, kubectl's schemas and the
daemon's own flag parser.

Needs `make chart-tools` (Helm, kubectl and the npm validators in the build dir) and the binary:
VM_CHART_TOOLS and VOLUMEMANAGER_BIN name them (`make chart-test` and ctest set both).
"""
import json
import os
import pathlib
import re
import shutil
import subprocess

import sys
import tempfile
import urllib.request

import kubernetes.client
import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "e2e"))
from conftest import DaemonProcess  # noqa: E402  (the e2e tests' runner of the real binary)

REPO = pathlib.Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "volumemanager"
VALUES_DIR = pathlib.Path(__file__).resolve().parent / "values"
VALUES_FILES = sorted(p.name for p in VALUES_DIR.glob("*.yaml"))
TOOLS = pathlib.Path(os.environ.get("VM_CHART_TOOLS", REPO / "build" / "chart-tools"))
HELM = TOOLS / "bin" / "helm"
BINARY = os.environ.get("VOLUMEMANAGER_BIN", str(REPO / "build" / "bin" / "volumemanager"))
NAMESPACE = "vm-system"


@pytest.fixture(scope="session", autouse=True)
def tools():
    if not HELM.exists():
        pytest.fail(f"{HELM} is missing: run `make chart-tools` first")


def helm(*args, check=True):
    r = subprocess.run([str(HELM), *args], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, f"helm {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r


def values_args(values_file):
    return [] if values_file is None else ["-f", str(VALUES_DIR / values_file)]


def render(values_file=None, *extra):
    """The chart's objects for a values file (None: the defaults), as dicts."""
    out = helm("template", "vm", str(CHART), "--namespace", NAMESPACE,
               *values_args(values_file), *extra).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def find(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind
             and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def container(objects):
    ds = find(objects, "DaemonSet")
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    return c


# Fields newer than Debian's python3-kubernetes (22.6, Kubernetes 1.22) models: kubernetes-models
# (1.34 schemas) validates them in the test below.
NEWER_FIELDS = {"V1SecurityContext": {"appArmorProfile"}}


def unknown_fields(value, type_name, path):
    """Field names the Kubernetes API does not have, from the Python client's models (each knows
    its fields and their types): a misspelt key would otherwise be dropped silently by the API
    server, which the kubernetes-models validators accept."""
    if value is None:
        return []
    if type_name.startswith("list["):
        inner = type_name[5:-1]
        return [u for i, v in enumerate(value) for u in unknown_fields(v, inner, f"{path}[{i}]")]
    if type_name.startswith("dict("):
        inner = type_name[type_name.index(",") + 1:-1].strip()
        return [u for k, v in value.items() for u in unknown_fields(v, inner, f"{path}.{k}")]
    cls = getattr(kubernetes.client, type_name, None)
    if cls is None or not hasattr(cls, "attribute_map"):
        return []  # a primitive, or IntOrString / Quantity ("object")
    by_json = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    problems = []
    for key, v in value.items():
        if key in NEWER_FIELDS.get(type_name, ()):
            continue
        if key not in by_json:
            problems.append(f"{path}.{key}")
        else:
            problems += unknown_fields(v, cls.openapi_types[by_json[key]], f"{path}.{key}")
    return problems


def model_class_name(obj):
    version = obj["apiVersion"].split("/")[-1]
    return version[0].upper() + version[1:] + obj["kind"]


# Flags of work in progress elsewhere: while the binary does not know them yet, they are left
# out of its parse and the test says so (skip), rather than failing every values file.
PENDING_FLAGS = ("--healthz-bind-address", "--leader-elect")


def validate_with_binary(args):
    """Runs the binary's flag parser on the DaemonSet's args; returns its effective config."""
    help_text = subprocess.run([BINARY, "--help"], capture_output=True, text=True).stdout
    missing = [f for f in PENDING_FLAGS if f not in help_text]
    checked = [a for a in args if not any(a.startswith(f) for f in missing)]
    r = subprocess.run([BINARY, "--validate-only", *checked], capture_output=True, text=True,
                       env={"NODE_NAME": "node-a", "PATH": os.environ.get("PATH", "")})
    assert r.returncode == 0, f"the binary rejects the chart's args {checked}: {r.stderr}"
    return json.loads(r.stdout)["volumemanager"], [a for a in args if a not in checked]


def seconds(go_duration):
    """A Go duration of h, m, s and ms parts in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"([0-9.]+)(ms|h|m|s)", go_duration)
    assert "".join(n + u for n, u in parts) == go_duration, go_duration
    return sum(float(n) * units[u] for n, u in parts)


@pytest.mark.parametrize("values_file", [None, *VALUES_FILES])
def test_lint_strict(values_file):
    helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, *values_args(values_file))


@pytest.mark.parametrize("values_file", [None, *VALUES_FILES])
def test_every_object_matches_the_kubernetes_schemas(values_file):
    objects = render(values_file)
    r = subprocess.run(["node", str(pathlib.Path(__file__).with_name("validate_objects.js")),
                        str(TOOLS / "node_modules")],
                       input=json.dumps(objects), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    for obj in objects:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: the prometheus-operator validator above covers it
        name = f"{obj['kind']} {obj['metadata']['name']}"
        assert unknown_fields(obj, model_class_name(obj), name) == []


@pytest.mark.parametrize("values_file", [None, *VALUES_FILES])
def test_the_binary_accepts_the_daemonsets_args(values_file):
    objects = render(values_file)
    c = container(objects)
    assert "command" not in c, "the image's entrypoint is the binary"
    config, unchecked = validate_with_binary(c["args"])
    # --root-dir is the kubelet's root dir, whose pods/ is mounted at the same path.
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["kubelet-pods"]["mountPath"] == config["rootDir"] + "/pods"
    assert mounts["state"]["mountPath"] == config["stateDir"]
    assert config["nodeName"] == "node-a"
    values = yaml.safe_load((VALUES_DIR / values_file).read_text()) if values_file else {}
    if values.get("credentials") == "node":
        # The kubelet's kubeconfig, at a path a read-only mount puts there.
        assert not config["inCluster"]
        assert config["kubeconfig"] == values["node"]["kubeconfig"]
        assert any(config["kubeconfig"] == m["mountPath"]
                   or config["kubeconfig"].startswith(m["mountPath"] + "/")
                   for m in c["volumeMounts"] if m.get("readOnly"))
    else:
        assert config["inCluster"] is True and not config["kubeconfig"]
    # The probes and the metrics Service reach the port the daemon listens on.
    port = c["ports"][0]["containerPort"]
    assert config["healthzBindAddress"] == f"0.0.0.0:{port}"
    assert seconds(config["syncFrequency"]) == seconds(values.get("syncFrequency", "1m"))
    assert config["configMapAndSecretChangeDetectionStrategy"] == values.get(
        "changeDetectionStrategy", "Watch")
    assert config["volumeOwnership"] == values.get("volumeOwnership", "kubelet")
    # What the chart's role lets the daemon read, the daemon knows (issue 44, item 5).
    rbac = values.get("rbac", {})
    assert config["secrets"] == rbac.get("secrets", True)
    assert config["objectNamespaces"] == ",".join(rbac.get("namespaces", []))
    if unchecked:
        pytest.skip(f"the binary does not know {unchecked} yet: the rest of the args passed")


def test_defaults():
    objects = render()
    ds = find(objects, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = container(objects)
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"],
                                  "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"]}
    assert sc["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # Only the kubelet's pods/ dir, seen at the same path, with the kubelet's later mounts.
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["kubelet-pods"]["hostPath"] == {"path": "/var/lib/kubelet/pods",
                                                   "type": "Directory"}
    assert volumes["state"]["hostPath"]["path"] == "/var/lib/volumemanager"
    assert not any(v["hostPath"]["path"] == "/var/lib/kubelet" for v in volumes.values())
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["kubelet-pods"] == {"name": "kubelet-pods", "mountPath": "/var/lib/kubelet/pods",
                                      "mountPropagation": "HostToContainer"}
    assert c["env"][0] == {"name": "NODE_NAME",
                           "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    assert "--in-cluster" in c["args"]
    assert "--volume-ownership=kubelet" in c["args"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "healthz"}
    assert c["ports"] == [{"name": "healthz", "containerPort": 10358, "protocol": "TCP"}]
    assert "memory" in c["resources"]["limits"]
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["priorityClassName"] == "system-node-critical"
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert pod["serviceAccountName"] == "vm-volumemanager"
    assert {o["kind"] for o in objects} == {"DaemonSet", "ServiceAccount", "ClusterRole",
                                            "ClusterRoleBinding"}
    rules = find(objects, "ClusterRole")["rules"]
    assert [(r["resources"], r["verbs"]) for r in rules] == [
        (["pods", "configmaps"], ["get", "list", "watch"]),
        (["secrets"], ["get", "list", "watch"]),
        (["events"], ["create", "patch"]),
        (["nodes"], ["get"]),
    ]
    binding = find(objects, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "vm-volumemanager",
                                    "namespace": NAMESPACE}]


def without_signal_rights(objects):
    """The objects with what reload.signals adds taken out again, each removal checked to be there:
    hostPID, KILL, the container's AppArmor field or the pod's AppArmor annotation."""
    objects = json.loads(json.dumps(objects))
    template = find(objects, "DaemonSet")["spec"]["template"]
    pod = template["spec"]
    assert pod.pop("hostPID") is True
    pod["containers"][0]["args"].remove("--reload-signals")
    sc = pod["containers"][0]["securityContext"]
    if "capabilities" in sc:  # not privileged
        assert sc["capabilities"]["add"][-1] == "KILL"
        sc["capabilities"]["add"].pop()
    annotations = template["metadata"].get("annotations", {})
    key = "container.apparmor.security.beta.kubernetes.io/volumemanager"
    if key in annotations:
        assert "appArmorProfile" not in sc
        del annotations[key]
        if not annotations:
            del template["metadata"]["annotations"]
    else:
        del sc["appArmorProfile"]
    return objects


def test_reload_signals_are_off_by_default():
    for values_file in [None, *VALUES_FILES]:
        if values_file and values_file.startswith("reload-signals"):
            continue
        objects = render(values_file)
        template = find(objects, "DaemonSet")["spec"]["template"]
        assert "hostPID" not in template["spec"], values_file
        assert "--reload-signals" not in container(objects)["args"], values_file
        sc = container(objects)["securityContext"]
        assert "KILL" not in sc.get("capabilities", {}).get("add", []), values_file
        assert "appArmorProfile" not in sc, values_file
        assert not any("apparmor" in k for k in template["metadata"].get("annotations", {}))


def test_reload_signals_add_host_pid_kill_and_apparmor_and_nothing_else():
    objects = render("reload-signals.yaml")
    pod = find(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    sc = container(objects)["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"],
                                  "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL"]}
    assert sc["appArmorProfile"] == {"type": "Unconfined"}
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert without_signal_rights(objects) == render()

    # A Localhost profile, with SELinux's spc_t.
    objects = render("reload-signals-localhost.yaml")
    sc = container(objects)["securityContext"]
    assert sc["appArmorProfile"] == {"type": "Localhost",
                                     "localhostProfile": "volumemanager-signal"}
    assert sc["seLinuxOptions"] == {"type": "spc_t"}
    assert without_signal_rights(objects) == render(None, "--set", "seLinuxOptions.type=spc_t")

    # Privileged (self ownership with tmpfs): every capability already, the profile still set.
    objects = render("self-ownership.yaml", "--set", "reload.signals.enabled=true")
    sc = container(objects)["securityContext"]
    assert sc["privileged"] is True and "capabilities" not in sc
    assert without_signal_rights(objects) == render("self-ownership.yaml")

    notes = install_notes("--set", "reload.signals.enabled=true")
    assert "hostPID" in notes and "CAP_KILL" in notes and "AppArmor profile\nUnconfined" in notes
    assert "reload.signals" not in install_notes()


def test_reload_signals_before_kubernetes_1_30_use_the_apparmor_annotation():
    key = "container.apparmor.security.beta.kubernetes.io/volumemanager"
    objects = render("reload-signals.yaml", "--kube-version", "1.29.0",
                     "--set", "podAnnotations.team=platform")
    template = find(objects, "DaemonSet")["spec"]["template"]
    assert template["metadata"]["annotations"] == {key: "unconfined", "team": "platform"}
    assert "appArmorProfile" not in container(objects)["securityContext"]
    assert without_signal_rights(objects) == render(
        None, "--kube-version", "1.29.0", "--set", "podAnnotations.team=platform")
    objects = render("reload-signals-localhost.yaml", "--kube-version", "1.29.0")
    template = find(objects, "DaemonSet")["spec"]["template"]
    assert template["metadata"]["annotations"] == {key: "localhost/volumemanager-signal"}
    # From 1.30 the field, never both.
    objects = render("reload-signals.yaml", "--kube-version", "1.30.0")
    assert "annotations" not in find(objects, "DaemonSet")["spec"]["template"]["metadata"]
    assert container(objects)["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}


def test_observe_passes_the_flag_and_is_off_by_default():
    for values_file in [None, *VALUES_FILES]:
        if values_file == "observe.yaml":
            continue
        assert "--observe" not in container(render(values_file))["args"], values_file
    args = container(render("observe.yaml"))["args"]
    assert args.count("--observe") == 1
    # Everything else as by default: only the flag differs.
    default = container(render(None))["args"]
    assert [a for a in args if a != "--observe"] == default


def test_custom_kubelet_root_dir():
    objects = render("k0s-root.yaml")
    c = container(objects)
    pod = find(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert "--root-dir=/var/lib/k0s/kubelet" in c["args"]
    assert "--state-dir=/var/lib/k0s/volumemanager" in c["args"]
    paths = sorted(v["hostPath"]["path"] for v in pod["volumes"])
    assert paths == ["/var/lib/k0s/kubelet/pods", "/var/lib/k0s/volumemanager"]


def test_metrics_service_monitor_and_dashboard():
    objects = render("metrics.yaml")
    svc = find(objects, "Service")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9358, "targetPort": "healthz",
                                     "protocol": "TCP"}]
    sm = find(objects, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert sm["spec"]["endpoints"][0]["interval"] == "15s"
    # The ServiceMonitor selects exactly the metrics Service.
    assert all(svc["metadata"]["labels"].get(k) == v
               for k, v in sm["spec"]["selector"]["matchLabels"].items())
    assert "--healthz-bind-address=0.0.0.0:9358" in container(objects)["args"]
    dashboard = find(objects, "ConfigMap")
    assert dashboard["metadata"]["namespace"] == "monitoring"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["volumemanager.json"])["panels"]


def test_leases_lock_gets_a_role_in_its_namespace_only():
    objects = render("leases.yaml")
    role = find(objects, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update"]}]
    assert find(objects, "RoleBinding")["metadata"]["namespace"] == NAMESPACE
    args = container(objects)["args"]
    assert "--leader-elect-resource-lock=leases" in args
    assert f"--leader-elect-resource-namespace={NAMESPACE}" in args
    assert "--leader-elect-lease-duration=40s" in args
    # No lease access anywhere else: the ClusterRole has none.
    assert not any("leases" in r["resources"] for r in find(objects, "ClusterRole")["rules"])
    # The file lock (the default) needs no API access at all.
    assert not [o for o in render() if o["kind"] in ("Role", "RoleBinding")]


def test_self_ownership_with_tmpfs_is_privileged_with_bidirectional_propagation():
    c = container(render("self-ownership.yaml"))
    assert c["securityContext"]["privileged"] is True
    assert "capabilities" not in c["securityContext"]
    mount = next(m for m in c["volumeMounts"] if m["name"] == "kubelet-pods")
    assert mount["mountPropagation"] == "Bidirectional"
    assert "--volume-ownership=self" in c["args"] and "--no-tmpfs" not in c["args"]

    c = container(render("self-ownership-no-tmpfs.yaml"))
    assert c["securityContext"]["privileged"] is False
    assert "--no-tmpfs" in c["args"]
    mount = next(m for m in c["volumeMounts"] if m["name"] == "kubelet-pods")
    assert mount["mountPropagation"] == "HostToContainer"


def test_secrets_access_can_be_turned_off():
    objects = render("no-secrets.yaml")
    assert not any("secrets" in r["resources"] for r in find(objects, "ClusterRole")["rules"])
    assert "--leader-elect=false" in container(objects)["args"]
    notes = helm("install", "vm", str(CHART), "--dry-run=client", "--namespace", NAMESPACE,
                 "-f", str(VALUES_DIR / "no-secrets.yaml")).stdout
    assert "rbac.secrets=false" in notes
    default_notes = helm("install", "vm", str(CHART), "--dry-run=client",
                         "--namespace", NAMESPACE).stdout
    assert "can read every Secret in the cluster" in default_notes


def test_the_daemon_is_told_what_the_role_does_not_grant():
    """rbac.secrets: false and rbac.namespaces narrow the role; the daemon gets the same as
    --no-secrets and --object-namespaces, so what is outside is configured policy to it (no
    request, no Warning Event), not a refusal."""
    def policy_args(*args):
        return [a for a in container(render(*args))["args"]
                if a.startswith(("--no-secrets", "--object-namespaces"))]
    assert policy_args(None) == []
    assert policy_args("no-secrets.yaml") == ["--no-secrets"]
    assert policy_args("namespaces.yaml") == ["--object-namespaces=team-a,team-b"]
    assert policy_args("namespaces.yaml", "--set", "rbac.secrets=false") == [
        "--no-secrets", "--object-namespaces=team-a,team-b"]
    for values_file in NODE_VALUES:
        assert policy_args(values_file) == [], values_file
    assert "one Normal Event (VolumesLeftToKubelet), no Warning" in install_notes(
        "-f", str(VALUES_DIR / "no-secrets.yaml"))
    # Everything else as by default: only the flag differs.
    default = container(render(None))["args"]
    assert [a for a in container(render(None, "--set", "rbac.secrets=false"))["args"]
            if a != "--no-secrets"] == default


# --- credentials: node | serviceAccount, rbac.namespaces -------------------------------------------

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
NODE_VALUES = [f for f in VALUES_FILES
               if yaml.safe_load((VALUES_DIR / f).read_text()).get("credentials") == "node"]


def rules_naming(objects, resources, kinds=("ClusterRole",)):
    """(object, rule) for every rule of the given kinds naming one of the resources (or "*")."""
    return [(f"{o['kind']} {o['metadata']['name']}", r) for o in objects if o["kind"] in kinds
            for r in o.get("rules", [])
            if set(r.get("resources", [])) & (set(resources) | {"*"})]


def host_paths(objects):
    """{volume name: hostPath} of the DaemonSet's pod."""
    pod = find(objects, "DaemonSet")["spec"]["template"]["spec"]
    return {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}


def test_the_rule_finder_sees_the_service_account_modes_rules():
    # The check below must be able to fail: today's ClusterRole names both.
    found = rules_naming(render(), ["secrets", "configmaps"])
    assert {tuple(r["resources"]) for _, r in found} == {("pods", "configmaps"), ("secrets",)}


def test_node_credentials_render_no_role_for_secrets_or_configmaps():
    objects = render(None, "--set", "credentials=node")
    assert rules_naming(objects, ["secrets", "configmaps"]) == []
    # No role or binding at all: pods, objects and Events are the node's own rights.
    assert [o["kind"] for o in objects if o["kind"] in RBAC_KINDS] == []
    assert {o["kind"] for o in objects} == {"DaemonSet", "ServiceAccount"}
    sa = find(objects, "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    pod = find(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "hostNetwork" not in pod
    args = container(objects)["args"]
    assert "--kubeconfig=/etc/kubernetes/kubelet.conf" in args and "--in-cluster" not in args
    assert not any(a.startswith("--leader-elect-resource-lock") for a in args)


@pytest.mark.parametrize("values_file", NODE_VALUES)
def test_node_credentials_mounts_are_read_only_at_the_host_paths(values_file):
    objects = render(values_file)
    values = yaml.safe_load((VALUES_DIR / values_file).read_text())["node"]
    assert rules_naming(objects, ["secrets", "configmaps", "pods", "events", "leases"],
                        RBAC_KINDS) == []
    c = container(objects)
    paths = host_paths(objects)
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    credential_mounts = {n: m for n, m in mounts.items() if n not in ("kubelet-pods", "state")}
    assert credential_mounts, "no credential mount"
    for name, mount in credential_mounts.items():
        assert mount.get("readOnly") is True, name
        assert "mountPropagation" not in mount, name
        # At the path the kubeconfig names: the same as on the node.
        assert mount["mountPath"] == paths[name]["path"], name
    # The certificate dir is a directory (a rotated kubelet-client-current.pem is a new file);
    # "" mounts none (k3s, RKE2: the client pair as files).
    cert_dir = values["certificateDir"]
    if cert_dir:
        assert paths["kubelet-certificates"] == {"path": cert_dir, "type": "Directory"}
    else:
        assert "kubelet-certificates" not in paths
    kubeconfig = values["kubeconfig"]
    if cert_dir and kubeconfig.startswith(cert_dir + "/"):
        assert "kubelet-kubeconfig" not in paths  # seen through the directory's mount
    else:
        assert paths["kubelet-kubeconfig"] == {"path": kubeconfig, "type": "File"}
    extra = sorted(p["path"] for n, p in paths.items() if n.startswith("kubelet-file-"))
    assert extra == sorted(values.get("extraFiles", []))
    assert all(p["type"] == "File" for n, p in paths.items() if n.startswith("kubelet-file-"))
    # Never /etc/kubernetes (admin kubeconfig, CA keys) or more, never the kubelet's root dir.
    for p in paths.values():
        assert not "/etc/kubernetes/pki/".startswith(p["path"] + "/"), p
        assert not "/var/lib/kubelet/".startswith(p["path"] + "/"), p


@pytest.mark.parametrize("values_file,agent", [("node-k3s.yaml", "/var/lib/rancher/k3s/agent"),
                                               ("node-rke2.yaml", "/var/lib/rancher/rke2/agent")])
def test_node_credentials_on_k3s_and_rke2_mount_the_client_pair_only(values_file, agent):
    # The agent dir also holds kube-proxy's and the k3s controller's client keys, the kubelet's
    # serving key and containerd's state: only the four files the kubelet's kubeconfig uses are
    # mounted, each a file (the agent rewrites them in place), nothing else from the node but
    # pods/ and the state dir.
    objects = render(values_file)
    files = {n: p for n, p in host_paths(objects).items() if n not in ("kubelet-pods", "state")}
    assert sorted(files.values(), key=lambda p: p["path"]) == [
        {"path": f"{agent}/{name}", "type": "File"}
        for name in ("client-kubelet.crt", "client-kubelet.key", "kubelet.kubeconfig",
                     "server-ca.crt")]
    mounts = sorted(m["mountPath"] for m in container(objects)["volumeMounts"]
                    if m["name"] in files)
    assert mounts == sorted(p["path"] for p in files.values())
    assert f"--kubeconfig={agent}/kubelet.kubeconfig" in container(objects)["args"]


def test_node_credentials_on_k3s_use_the_host_network_without_surge():
    objects = render("node-k3s.yaml")
    ds = find(objects, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] == 0
    assert "--kubeconfig=/var/lib/rancher/k3s/agent/kubelet.kubeconfig" in container(objects)["args"]


def test_rbac_namespaces_replace_the_cluster_wide_read_by_roles():
    objects = render("namespaces.yaml")
    # Cluster-wide: pods (listed by node) and Events only.
    assert rules_naming(objects, ["secrets", "configmaps"]) == []
    rules = find(objects, "ClusterRole")["rules"]
    assert [(r["resources"], r["verbs"]) for r in rules] == [
        (["pods"], ["get", "list", "watch"]), (["events"], ["create", "patch"]),
        (["nodes"], ["get"])]
    roles = {o["metadata"]["namespace"]: o for o in objects
             if o["kind"] == "Role" and o["metadata"]["name"] == "vm-volumemanager"}
    assert sorted(roles) == ["team-a", "team-b"]
    for role in roles.values():
        assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps", "secrets"],
                                  "verbs": ["get", "list", "watch"]}]
    bindings = {o["metadata"]["namespace"]: o for o in objects
                if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "vm-volumemanager"}
    assert sorted(bindings) == ["team-a", "team-b"]
    for binding in bindings.values():
        assert binding["roleRef"]["name"] == "vm-volumemanager"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "vm-volumemanager",
                                        "namespace": NAMESPACE}]
    # The Lease lock's Role stays in the release's namespace, apart.
    assert find(objects, "Role", "vm-volumemanager-leases")["metadata"]["namespace"] == NAMESPACE
    assert "--in-cluster" in container(objects)["args"]
    # Without rbac.secrets the Roles read ConfigMaps only.
    objects = render("namespaces.yaml", "--set", "rbac.secrets=false")
    assert rules_naming(objects, ["secrets"], RBAC_KINDS) == []
    assert all(o["rules"][0]["resources"] == ["configmaps"] for o in objects
               if o["kind"] == "Role" and o["metadata"]["name"] == "vm-volumemanager")


def install_notes(*args):
    return helm("install", "vm", str(CHART), "--dry-run=client", "--namespace", NAMESPACE,
                *args).stdout.split("NOTES:", 1)[1]


def test_notes_say_what_each_mode_costs():
    notes = install_notes("--set", "credentials=node")
    assert "credentials=node" in notes and "evicts pods" in notes
    assert "cannot be revoked" in notes
    assert "every Secret" not in notes
    notes = install_notes("-f", str(VALUES_DIR / "namespaces.yaml"))
    assert "in team-a, team-b only" in notes
    assert "every pod spec in the cluster" in notes
    assert "the kubelet still sets\nup and refreshes those volumes" in notes
    notes = install_notes("-f", str(VALUES_DIR / "namespaces.yaml"), "--set", "volumeOwnership=self")
    assert "NOTHING sets those volumes up" in notes


def test_user_metadata_scheduling_and_image():
    objects = render("extra-tolerations.yaml")
    template = find(objects, "DaemonSet")["spec"]["template"]
    pod = template["spec"]
    assert pod["tolerations"][1]["tolerationSeconds"] == 300
    assert pod["nodeSelector"]["node.kubernetes.io/instance-type"] == "m5.large"
    assert pod["affinity"]["nodeAffinity"]
    assert template["metadata"]["labels"]["team"] == "platform"
    assert template["metadata"]["annotations"] == {"example.com/team": "platform"}
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    c = container(objects)
    assert c["image"] == ("registry.example.com/volumemanager@sha256:"
                          "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
    assert c["securityContext"]["seLinuxOptions"] == {"type": "spc_t"}
    # The default tag is the chart's appVersion, which is the version `make image` tags: the
    # file VERSION's (tests/release checks the chart's version and appVersion against it too).
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = (REPO / "VERSION").read_text().strip()
    assert chart["appVersion"] == version
    assert container(render())["image"] == f"volumemanager:{version}"


def test_readme_lists_every_value():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    listed = set(re.findall(r"^\| `([\w.]+)` \|", readme, re.M))

    def leaves(node, prefix=""):
        if isinstance(node, dict) and node:
            return [p for k, v in node.items() for p in leaves(v, f"{prefix}{k}.")]
        return [prefix[:-1]]

    def resolves(path):
        node = values
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    paths = leaves(values)
    unlisted = [p for p in paths
                if not any(p == k or p.startswith(k + ".") for k in listed)]
    assert unlisted == [], "values missing from the README's table"
    assert [k for k in sorted(listed) if not resolves(k)] == [], "README keys not in values.yaml"


# --- Kubernetes versions -----------------------------------------------------------------------

# The DaemonSet's updateStrategy by the server's version: surge (maxSurge) is served from 1.22
# (DaemonSetUpdateSurge: alpha and off in 1.21, no field in 1.20, whose API server drops it and
# then refuses maxUnavailable 0).
SURGE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
NO_SURGE = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
UPDATE_STRATEGIES = [
    # (name, values file, helm args, the DaemonSet's spec.updateStrategy)
    ("helm's default version", None, [], SURGE),
    ("1.20", None, ["--kube-version", "1.20.2"], NO_SURGE),
    ("1.21, surge alpha and off", None, ["--kube-version", "1.21.0"], NO_SURGE),
    ("1.22", None, ["--kube-version", "1.22.0"], SURGE),
    ("1.22 with a provider suffix", None, ["--kube-version", "1.22.3-gke.1500"], SURGE),
    ("1.20 with maxSurge 0", None,
     ["--kube-version", "1.20.2", "--set", "updateStrategy.rollingUpdate.maxSurge=0"], NO_SURGE),
    ("1.20 with a percentage", None,
     ["--kube-version", "1.20.2", "--set", "updateStrategy.rollingUpdate.maxUnavailable=25%"],
     {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}}),
    ("1.20 without leader election", None,
     ["--kube-version", "1.20.2", "--set", "leaderElection.enabled=false"], NO_SURGE),
    ("1.20 k3s (host network)", "node-k3s.yaml", ["--kube-version", "1.20.2"], NO_SURGE),
    ("1.20 with the host network and the default strategy", None,
     ["--kube-version", "1.20.2", "--set", "credentials=node", "--set", "node.hostNetwork=true"],
     NO_SURGE),
    ("1.20 OnDelete", None,
     ["--kube-version", "1.20.2", "--set", "updateStrategy.type=OnDelete"], {"type": "OnDelete"}),
    # Only one of the two set: the other 0, or 1 if the one set is 0 (the server refuses both 0).
    ("1.22 with maxUnavailable 1", None,
     ["--kube-version", "1.22.0", "--set", "updateStrategy.rollingUpdate.maxUnavailable=1"],
     {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}),
    ("1.22 with maxSurge 2", None,
     ["--kube-version", "1.22.0", "--set", "updateStrategy.rollingUpdate.maxSurge=2"],
     {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}}),
    ("1.22 with maxSurge 0%", None,
     ["--kube-version", "1.22.0", "--set", "updateStrategy.rollingUpdate.maxSurge=0%"],
     {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%", "maxUnavailable": 1}}),
]


@pytest.mark.parametrize("name,values_file,args,strategy", UPDATE_STRATEGIES,
                         ids=[u[0] for u in UPDATE_STRATEGIES])
def test_update_strategy_follows_the_servers_surge(name, values_file, args, strategy):
    ds = find(render(values_file, *args), "DaemonSet")
    assert ds["spec"]["updateStrategy"] == strategy, name


# What the chart renders that Kubernetes 1.20 serves: the core, apps and RBAC kinds (and the
# prometheus-operator CRD, which is the cluster's, not the server version's).
KINDS_OF_1_20 = {("v1", "ServiceAccount"), ("v1", "Service"), ("v1", "ConfigMap"),
                 ("apps/v1", "DaemonSet"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                 ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
                 ("rbac.authorization.k8s.io/v1", "Role"),
                 ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                 ("monitoring.coreos.com/v1", "ServiceMonitor"),
                 ("monitoring.coreos.com/v1", "PrometheusRule")}


@pytest.mark.parametrize("values_file", [None, *VALUES_FILES])
def test_every_values_file_renders_for_kubernetes_1_20(values_file):
    """The chart's own checks pass on 1.20 and nothing newer than 1.20 is rendered: no maxSurge,
    maxUnavailable not 0 (1.20 refuses it), no AppArmor field (1.30; the annotation instead)."""
    helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, "--kube-version", "1.20.2",
         *values_args(values_file))
    objects = render(values_file, "--kube-version", "1.20.2")
    assert {(o["apiVersion"], o["kind"]) for o in objects} <= KINDS_OF_1_20
    strategy = find(objects, "DaemonSet")["spec"]["updateStrategy"]
    assert strategy["type"] == "RollingUpdate"
    assert list(strategy["rollingUpdate"]) == ["maxUnavailable"]
    assert str(strategy["rollingUpdate"]["maxUnavailable"]) not in ("0", "0%")
    assert "appArmorProfile" not in container(objects)["securityContext"]


def template_notes(*args):
    """NOTES.txt as `helm template` renders it, so with --kube-version (`helm install` has no such
    flag): a copy of the chart whose NOTES.txt is also the body of a ConfigMap."""
    with tempfile.TemporaryDirectory() as tmp:
        chart = pathlib.Path(tmp) / "volumemanager"
        shutil.copytree(CHART, chart)
        notes = (chart / "templates" / "NOTES.txt").read_text()
        (chart / "templates" / "_notes.tpl").write_text(
            '{{- define "notes" -}}\n' + notes + "\n{{- end -}}\n")
        (chart / "templates" / "notes.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n"
            'data:\n  notes: {{ include "notes" . | toJson }}\n')
        out = helm("template", "vm", str(chart), "--namespace", NAMESPACE, *args).stdout
    objects = [d for d in yaml.safe_load_all(out) if d]
    return find(objects, "ConfigMap", "notes")["data"]["notes"]


def test_notes_follow_the_servers_version():
    # The copy renders what `helm install` shows.
    assert template_notes() == install_notes().strip("\n")
    notes = template_notes("--kube-version", "1.20.2")
    assert "pod-security.kubernetes.io/enforce" not in notes
    assert "no Pod Security admission" in notes and "PodSecurityPolicy" in notes
    assert "Updates without surge (Kubernetes v1.20.2 has no DaemonSet surge" in notes
    notes = template_notes("--kube-version", "1.23.0")
    assert "pod-security.kubernetes.io/enforce=privileged" in notes
    assert "PodSecurityPolicy" not in notes and "without surge" not in notes
    # Without surge by choice on a server that has it: the note, without the version.
    notes = template_notes("--set", "updateStrategy.rollingUpdate.maxUnavailable=1")
    assert "Updates without surge: on each node" in notes


# Bad values, each rejected at install time with a message naming the value.
BAD_VALUES = [
    ("unknown top-level key", ["--set", "syncFrequncy=1m"], "additional properties 'syncFrequncy'"),
    ("sync frequency not a Go duration", ["--set", "syncFrequency=60"], "/syncFrequency"),
    ("sync frequency with a unit Go lacks", ["--set-string", "syncFrequency=1d"], "/syncFrequency"),
    ("strategy", ["--set", "changeDetectionStrategy=Poll"], "/changeDetectionStrategy"),
    ("ownership", ["--set", "volumeOwnership=kubelet-only"], "/volumeOwnership"),
    ("log format", ["--set", "logFormat=xml"], "/logFormat"),
    ("verbosity", ["--set", "logVerbosity=11"], "/logVerbosity"),
    ("relative root dir", ["--set", "kubeletRootDir=var/lib/kubelet"], "/kubeletRootDir"),
    ("root dir with a trailing slash", ["--set", "kubeletRootDir=/var/lib/kubelet/"],
     "/kubeletRootDir"),
    ("lock", ["--set", "leaderElection.resourceLock=configmaps"], "/leaderElection/resourceLock"),
    ("lease duration", ["--set", "leaderElection.leaseDuration=40"],
     "/leaderElection/leaseDuration"),
    ("port", ["--set", "healthzPort=70000"], "/healthzPort"),
    ("negative qps", ["--set", "kubeAPIQPS=-1"], "/kubeAPIQPS"),
    ("pull policy", ["--set", "image.pullPolicy=Sometimes"], "/image/pullPolicy"),
    ("digest", ["--set", "image.digest=latest"], "/image/digest"),
    ("toleration operator", ["--set", "tolerations[0].operator=Maybe"], "/tolerations/0/operator"),
    ("extra arg not a flag", ["--set", "extraArgs[0]=fsync"], "/extraArgs/0"),
    ("misspelt metrics key", ["--set", "metrics.serviceMonitor.enable=true"],
     "additional properties 'enable'"),
    ("update strategy", ["--set", "updateStrategy.type=Recreate"], "/updateStrategy/type"),
    ("surge without one writer per node", ["--set", "leaderElection.enabled=false"],
     "maxSurge needs leaderElection.enabled"),
    ("surge on Kubernetes 1.20", ["--kube-version", "1.20.2",
                                  "--set", "updateStrategy.rollingUpdate.maxSurge=1"],
     "updateStrategy.rollingUpdate.maxSurge 1 asks for a surge, which Kubernetes v1.20.2 does "
     "not have"),
    ("surge on Kubernetes 1.21", ["--kube-version", "1.21.0",
                                  "--set", "updateStrategy.rollingUpdate.maxSurge=10%"],
     "updateStrategy.rollingUpdate.maxSurge 10% asks for a surge, which Kubernetes v1.21.0 does "
     "not have"),
    ("maxUnavailable 0 on Kubernetes 1.20",
     ["--kube-version", "1.20.2", "--set", "updateStrategy.rollingUpdate.maxUnavailable=0"],
     "updateStrategy.rollingUpdate.maxUnavailable 0 needs a surge, which Kubernetes v1.20.2"),
    ("neither surge nor unavailable", ["--set", "updateStrategy.rollingUpdate.maxSurge=0",
                                       "--set", "updateStrategy.rollingUpdate.maxUnavailable=0"],
     "maxUnavailable 0 and maxSurge 0 would never replace a pod"),
    ("negative surge", ["--set", "updateStrategy.rollingUpdate.maxSurge=-1"],
     "/updateStrategy/rollingUpdate/maxSurge"),
    ("unavailable a string but no percentage",
     ["--set-string", "updateStrategy.rollingUpdate.maxUnavailable=1"],
     "/updateStrategy/rollingUpdate/maxUnavailable"),
    ("a server older than the chart is proven against", ["--kube-version", "1.19.16"],
     "chart requires kubeVersion: >=1.20.0-0"),
    ("credentials mode", ["--set", "credentials=kubelet"], "/credentials"),
    ("node credentials with the leases lock",
     ["--set", "credentials=node", "--set", "leaderElection.resourceLock=leases"],
     "credentials: node cannot use the leases lock"),
    ("node credentials with the leases lock in extraArgs",
     ["--set", "credentials=node", "--set", "extraArgs[0]=--leader-elect-resource-lock=leases"],
     "credentials: node cannot use the leases lock"),
    ("node credentials with dynamic config",
     ["--set", "credentials=node", "--set", "extraArgs[0]=--dynamic-config=volumemanager/vm"],
     "credentials: node cannot use --dynamic-config=volumemanager/vm"),
    ("node credentials with rbac.namespaces",
     ["--set", "credentials=node", "--set", "rbac.namespaces[0]=team-a"],
     "rbac.namespaces applies to credentials: serviceAccount only"),
    ("node credentials with rbac.secrets false",
     ["--set", "credentials=node", "--set", "rbac.secrets=false"],
     "rbac.secrets: false has no effect with credentials: node"),
    ("all of /etc/kubernetes", ["--set", "credentials=node",
                                "--set", "node.certificateDir=/etc/kubernetes"],
     "node.certificateDir /etc/kubernetes would mount /etc/kubernetes/pki or more"),
    ("kubeadm's CA keys", ["--set", "credentials=node",
                           "--set", "node.certificateDir=/etc/kubernetes/pki"],
     "node.certificateDir /etc/kubernetes/pki would mount"),
    ("the kubelet's root dir", ["--set", "credentials=node",
                                "--set", "node.certificateDir=/var/lib/kubelet"],
     "would mount the kubelet's whole root dir"),
    ("k3s' whole agent dir", ["--set", "credentials=node",
                              "--set", "node.certificateDir=/var/lib/rancher/k3s/agent"],
     "node.certificateDir /var/lib/rancher/k3s/agent would mount the k3s or RKE2 agent's data"),
    ("all of /var/lib/rancher", ["--set", "credentials=node",
                                 "--set", "node.certificateDir=/var/lib/rancher"],
     "node.certificateDir /var/lib/rancher would mount the k3s or RKE2 agent's data"),
    ("RKE2's agent dir", ["--set", "credentials=node",
                          "--set", "node.certificateDir=/var/lib/rancher/rke2/agent/"],
     "/node/certificateDir"),
    ("relative kubeconfig", ["--set", "credentials=node", "--set", "node.kubeconfig=kubelet.conf"],
     "/node/kubeconfig"),
    ("host network with surge", ["--set", "credentials=node", "--set", "node.hostNetwork=true"],
     "node.hostNetwork needs updateStrategy.rollingUpdate.maxSurge: 0"),
    ("host network with a service account", ["--set", "node.hostNetwork=true"],
     "node.hostNetwork applies to credentials: node only"),
    ("namespace name", ["--set", "rbac.namespaces[0]=Team_A"], "/rbac/namespaces/0"),
    ("signals not a boolean", ["--set-string", "reload.signals.enabled=yes"],
     "/reload/signals/enabled"),
    ("misspelt signals key", ["--set", "reload.signal.enabled=true"],
     "additional properties 'signal'"),
    ("the runtime's default AppArmor profile, which cannot signal other pods",
     ["--set", "reload.signals.appArmorProfile.type=RuntimeDefault"],
     "/reload/signals/appArmorProfile/type"),
    ("a Localhost AppArmor profile without its name",
     ["--set", "reload.signals.appArmorProfile.type=Localhost"],
     "missing property 'localhostProfile'"),
    ("an AppArmor profile name with a quote",
     ["--set", "reload.signals.appArmorProfile.type=Localhost",
      "--set-string", "reload.signals.appArmorProfile.localhostProfile=a\"b"],
     "/reload/signals/appArmorProfile/localhostProfile"),
    ("an AppArmor profile name with type Unconfined",
     ["--set", "reload.signals.appArmorProfile.localhostProfile=mine"],
     "localhostProfile mine applies to type Localhost only"),
    ("dynamic config outside rbac.namespaces",
     ["--set", "rbac.namespaces[0]=team-a", "--set", "extraArgs[0]=--dynamic-config=vm/cfg"],
     "is a ConfigMap in namespace vm, which rbac.namespaces [\"team-a\"] does not list"),
    ("an alert's memory limit that is no quantity",
     ["--set", "prometheusRule.enabled=true",
      "--set", "prometheusRule.alerts.memoryNearLimit.limitBytes=lots"],
     'the memory limit "lots" is not a quantity'),
    ("a container memory limit the alert cannot read",
     ["--set", "prometheusRule.enabled=true", "--set", "resources.limits.memory=1e9"],
     "set prometheusRule.alerts.memoryNearLimit.limitBytes"),
    ("an alert's for that is a Go duration Prometheus does not read",
     ["--set", "prometheusRule.alerts.down.for=1.5h"], "/prometheusRule/alerts/down/for"),
    ("a quantile above 1", ["--set", "prometheusRule.alerts.propagationSlow.quantile=1.5"],
     "/prometheusRule/alerts/propagationSlow/quantile"),
]


@pytest.mark.parametrize("name,args,message", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_bad_values_are_rejected(name, args, message):
    r = helm("template", "vm", str(CHART), *args, check=False)
    assert r.returncode != 0, f"{name}: accepted"
    assert message in r.stderr, r.stderr


# --- the Grafana dashboard ----------------------------------------------------------------------

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset",
                   "bool", "and", "or", "unless"}


def metric_names(expr):
    """The metric names a PromQL expression (or a Grafana label_values() query) reads."""
    expr = re.sub(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)", r"\1", expr)
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range durations
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[a-zA-Z_:][\w:]*", expr):
        if expr[m.end():].lstrip().startswith("(") or m.group() in PROMQL_KEYWORDS:
            continue  # a function or an operator
        names.add(m.group())
    return names


def dashboard_queries():
    dashboard = json.loads((CHART / "dashboards" / "volumemanager.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return queries


def test_metric_names_are_found_in_queries():
    assert metric_names('histogram_quantile(0.99, sum by (le, x) (rate(a_bucket{node=~"$node"}'
                        '[$__rate_interval]))) > 0 and on (node) b offset 5m') == {"a_bucket", "b"}
    assert metric_names("label_values(volumemanager_build_info, node)") == {
        "volumemanager_build_info"}


@pytest.fixture(scope="module")
def exported_metrics(tmp_path_factory):
    """Every series name the real daemon's /metrics can show: each family, and a histogram's
    _bucket, _sum and _count. In cluster mode, which has every family (the API client's and the
    reflectors' too), against an API server address nothing listens on: the families are there
    before any request succeeds."""
    tmp = tmp_path_factory.mktemp("daemon")
    for d in ("root", "state"):
        (tmp / d).mkdir()
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    daemon = DaemonProcess(tmp / "daemon.log")
    daemon.run(["--kubeconfig", kubeconfig, "--node-name", "node-a", "--root-dir", tmp / "root",
                "--state-dir", tmp / "state"])
    try:
        probe, _ = daemon.admin_addresses()
        text = urllib.request.urlopen(probe + "/metrics", timeout=10).read().decode()
    finally:
        daemon.stop()
    names = set()
    for family, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(family)
        if kind == "histogram":
            names |= {family + "_bucket", family + "_sum", family + "_count"}
    assert {"volumemanager_build_info", "volumemanager_api_requests_total"} <= names, text
    return names


def test_every_dashboard_query_names_metrics_the_daemon_exports(exported_metrics):
    queries = dashboard_queries()
    assert len(queries) >= 10
    for query in queries:
        names = metric_names(query)
        assert names, f"no metric in {query}"
        assert names <= exported_metrics, f"{sorted(names - exported_metrics)} in {query}"


# --- the alert rules ----------------------------------------------------------------------------

ALERTS = {"VolumeManagerDown", "VolumeManagerNotReady", "VolumeManagerVolumesFailing",
          "VolumeManagerPropagationSlow", "VolumeManagerReloadsFailing", "VolumeManagerLockLost",
          "VolumeManagerMemoryNearLimit"}


def alert_rules(*extra, values_file="alerts.yaml"):
    """{alert name: rule} of the PrometheusRule rendered with `values_file` and `extra`."""
    rule = find(render(values_file, *extra), "PrometheusRule")
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}


def test_alert_rules_are_off_by_default():
    assert [o["kind"] for o in render() if o["kind"] == "PrometheusRule"] == []


def test_alert_rules_pass_promtool(tmp_path):
    # alerts_test.yaml: each alert with a case that fires and one that does not, on the rules as
    # `helm template` renders them with values/alerts.yaml.
    rule = find(render("alerts.yaml"), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["metadata"]["namespace"] == NAMESPACE
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    tests_file = pathlib.Path(__file__).with_name("alerts_test.yaml")
    shutil.copy(tests_file, tmp_path)
    check = subprocess.run(["promtool", "check", "rules", "rules.yaml"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    r = subprocess.run(["promtool", "test", "rules", "alerts_test.yaml"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    rendered = {x["alert"] for g in rule["spec"]["groups"] for x in g["rules"]}
    assert rendered == ALERTS
    cases = [t for group in yaml.safe_load(tests_file.read_text())["tests"]
             for t in group["alert_rule_test"]]
    assert {t["alertname"] for t in cases if t["exp_alerts"]} == ALERTS, "a case that fires"
    assert {t["alertname"] for t in cases if not t["exp_alerts"]} == ALERTS, "one that does not"


def test_every_alert_names_metrics_the_daemon_exports(exported_metrics):
    for name, rule in alert_rules().items():
        names = metric_names(rule["expr"])
        assert names, f"no metric in {name}"
        assert names <= exported_metrics | {"up"}, f"{sorted(names - exported_metrics)} in {name}"


def test_alert_thresholds_switches_and_selector_follow_the_values():
    rules = alert_rules(
        "--set", "prometheusRule.alerts.lockLost.enabled=false",
        "--set", "prometheusRule.alerts.volumesFailing.threshold=3",
        "--set", "prometheusRule.alerts.volumesFailing.for=1h",
        "--set", "prometheusRule.alerts.propagationSlow.thresholdSeconds=5",
        "--set", "prometheusRule.alerts.memoryNearLimit.limitBytes=1Gi",
        "--set", "prometheusRule.alerts.down.severity=page",
        "--set-string", 'prometheusRule.selector=job="vm"')
    assert "VolumeManagerLockLost" not in rules
    assert rules["VolumeManagerVolumesFailing"]["expr"] == (
        'volumemanager_volumes{job="vm",state="failing"} > 3')
    assert rules["VolumeManagerVolumesFailing"]["for"] == "1h"
    assert rules["VolumeManagerPropagationSlow"]["expr"].endswith("> 5")
    assert "/ 1073741824 > 0.8" in rules["VolumeManagerMemoryNearLimit"]["expr"]
    assert rules["VolumeManagerDown"]["labels"] == {"severity": "page", "team": "platform"}
    # The limit from resources.limits.memory, in its units; no limit at all: no memory alert.
    for memory, expected in (("256Mi", "268435456"), ("1G", "1000000000"), ("1.5Gi", "1610612736"),
                             ("500000000", "500000000")):
        expr = alert_rules("--set", f"resources.limits.memory={memory}")[
            "VolumeManagerMemoryNearLimit"]["expr"]
        assert f"/ {expected} > 0.8" in expr, (memory, expr)
    assert "VolumeManagerMemoryNearLimit" not in alert_rules("--set", "resources.limits=null")

