"""The served resources, their defaulting and validation (docs/kubernetes-api.md §3, §8 "Storage" and "Writes"),
and what kube-apiserver's pod strategies do with a pod's status: reset on create, kept from the
stored pod by an update or patch of the pod, written only through the `status` subresource
(which keeps the spec instead)."""

import base64
import binascii
import copy
import ipaddress
import json
import re

from .qos import default_requests_from_limits, pod_qos_class
from .status import ApiError, bad_request, invalid


class Resource:
    def __init__(self, name, singular, kind, group, verbs, short_names=(), subresources=None,
                 subresource_kinds=None, namespaced=True):
        self.name = name
        self.namespaced = namespaced
        self.singular = singular
        self.kind = kind
        self.group = group
        self.version = "v1"
        self.api_version = f"{group}/v1" if group else "v1"
        self.verbs = verbs
        self.short_names = list(short_names)
        self.subresources = subresources or {}  # name -> verbs
        # name -> (kind, group, version) of a subresource whose kind is not the resource's
        self.subresource_kinds = subresource_kinds or {}

    def discovery(self):
        """This resource's entries of its APIResourceList: itself, then each subresource."""
        entry = {"name": self.name, "singularName": self.singular, "namespaced": self.namespaced,
                 "kind": self.kind, "verbs": self.verbs}
        if self.short_names:
            entry["shortNames"] = self.short_names
        subs = []
        for sub, verbs in self.subresources.items():
            sub_entry = {"name": f"{self.name}/{sub}", "singularName": "", "namespaced": True,
                         "kind": self.kind, "verbs": verbs}
            if sub in self.subresource_kinds:
                kind, group, version = self.subresource_kinds[sub]
                sub_entry.update({"kind": kind, "group": group, "version": version})
            subs.append(sub_entry)
        return [entry] + subs


_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

RESOURCES = {
    "pods": Resource("pods", "pod", "Pod", "", _ALL_VERBS, ["po"],
                     {"status": ["get", "patch", "update"]}),
    "configmaps": Resource("configmaps", "configmap", "ConfigMap", "", _ALL_VERBS, ["cm"]),
    "secrets": Resource("secrets", "secret", "Secret", "", _ALL_VERBS),
    "events": Resource("events", "event", "Event", "", _ALL_VERBS, ["ev"]),
    "leases": Resource("leases", "lease", "Lease", "coordination.k8s.io", _ALL_VERBS),
    # Only as what TokenRequest needs: the account must exist (tokens.py).
    "serviceaccounts": Resource("serviceaccounts", "serviceaccount", "ServiceAccount", "",
                                _ALL_VERBS, ["sa"], {"token": ["create"]},
                                {"token": ("TokenRequest", "authentication.k8s.io", "v1")}),
    # Cluster-scoped; only as what is read of a node: whether it exists (no status, no heartbeat).
    "nodes": Resource("nodes", "node", "Node", "", _ALL_VERBS, ["no"], namespaced=False),
}

MAX_DATA_BYTES = 1 << 20
_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _check_key(field, key, causes):
    if len(key) > 253 or not _KEY_RE.match(key) or key in (".", "..") or key.startswith(".."):
        causes.append((f"{field}[{key}]", f'Invalid value: "{key}": a valid config key must '
                       "consist of alphanumeric characters, '-', '_' or '.'", "FieldValueInvalid"))


def _decode_b64(field, key, value):
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise bad_request(f"illegal base64 data in {field}[{key}]") from None


def _validate_name(res, obj, causes):
    name = obj["metadata"].get("name", "")
    if not name:
        causes.append(("metadata.name", "Required value: name or generateName is required",
                       "FieldValueRequired"))
    elif len(name) > 253 or not _DNS_SUBDOMAIN_RE.match(name):
        causes.append(("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 '
                       "subdomain must consist of lower case alphanumeric characters, '-' or '.'",
                       "FieldValueInvalid"))


def _default_pod(pod):
    spec = pod.setdefault("spec", {})
    for volume in spec.get("volumes") or []:
        for kind in ("configMap", "secret", "downwardAPI", "projected"):
            source = volume.get(kind)
            if isinstance(source, dict):
                source.setdefault("defaultMode", 420)
                items = source.get("items") or []
                if kind == "projected":
                    items = [item for src in source.get("sources") or []
                             for item in ((src.get("downwardAPI") or {}).get("items") or [])]
                for item in items:
                    field_ref = item.get("fieldRef")
                    if isinstance(field_ref, dict):
                        field_ref.setdefault("apiVersion", "v1")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                default_requests_from_limits(container)


def _keep(obj, old, key):
    """obj[key] becomes old's (absent when old has none)."""
    if key in old:
        obj[key] = copy.deepcopy(old[key])
    else:
        obj.pop(key, None)


def _prepare_pod(pod, old, subresource):
    """What podStrategy and podStatusStrategy do before validation: on create the status is
    reset to Pending with the computed QoS class; an update or patch of the pod keeps the stored
    status; a write of the status subresource keeps the stored spec and ownerReferences (the
    deletionTimestamp is kept by every update) and takes the new status."""
    if old is None:
        pod["status"] = {"phase": "Pending", "qosClass": pod_qos_class(pod)}
    elif subresource == "status":
        _keep(pod, old, "spec")
        _keep(pod["metadata"], old["metadata"], "ownerReferences")
        _convert_pod_ips(pod)
    else:
        _keep(pod, old, "status")


def _convert_pod_ips(pod):
    """v1 to internal and back, as a status write goes through them: `podIP` is authoritative,
    `podIPs` follows it (a lone podIP gives podIPs [podIP]; one that differs from podIPs[0]
    replaces the list), and `podIP` is podIPs[0] when only the list is given."""
    status = pod.get("status")
    if not isinstance(status, dict):
        return
    ip = status.get("podIP") or ""
    ips = status.get("podIPs") or []
    if ip and (not ips or not isinstance(ips[0], dict) or ips[0].get("ip") != ip):
        status["podIPs"] = [{"ip": ip}]
    elif not ip and ips and isinstance(ips[0], dict) and ips[0].get("ip"):
        status["podIP"] = ips[0]["ip"]


def _validate_pod_status(pod, causes):
    """validatePodIPs: every one of status.podIPs is an IP, at most one per family."""
    ips = (pod.get("status") or {}).get("podIPs") or []
    families = []
    for i, entry in enumerate(ips):
        text = entry.get("ip", "") if isinstance(entry, dict) else ""
        try:
            families.append(ipaddress.ip_address(text).version)
        except ValueError:
            causes.append((f"status.podIPs[{i}]", f"Invalid value: {json.dumps(text)}: must be a "
                           "valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                           "FieldValueInvalid"))
    if len(ips) > 1 and (len(ips) > 2 or len(set(families)) != len(families)):
        # The value as Go's %#v prints the internal list.
        listed = ", ".join("core.PodIP{IP:%s}" % json.dumps(
            entry.get("ip", "") if isinstance(entry, dict) else "") for entry in ips)
        causes.append(("status.podIPs", f"Invalid value: []core.PodIP{{{listed}}}: may specify no "
                       "more than one IP for each IP family", "FieldValueInvalid"))


def default_and_validate(res, obj, old=None, subresource=None):
    """Applies the server's defaults to `obj` in place; raises ApiError 400/422 when invalid.

    `old` is the stored object on update (immutability checks, the fields an update keeps),
    None on create; `subresource` is "status" for a write of the status subresource.
    """
    name = obj["metadata"].get("name", "")
    causes = []
    _validate_name(res, obj, causes)
    if res.name in ("configmaps", "secrets"):
        data_size = 0
        if res.name == "secrets":
            string_data = obj.pop("stringData", None) or {}
            data = obj.setdefault("data", {}) if (obj.get("data") or string_data) else None
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            for key, value in (obj.get("data") or {}).items():
                _check_key("data", key, causes)
                data_size += len(key) + len(_decode_b64("data", key, value))
            obj.setdefault("type", "Opaque")
        else:
            for key, value in (obj.get("data") or {}).items():
                _check_key("data", key, causes)
                data_size += len(key) + len(str(value).encode())
            for key, value in (obj.get("binaryData") or {}).items():
                _check_key("binaryData", key, causes)
                if key in (obj.get("data") or {}):
                    causes.append((f"binaryData[{key}]", f'Invalid value: "{key}": duplicate of '
                                   "key present in data", "FieldValueInvalid"))
                data_size += len(key) + len(_decode_b64("binaryData", key, value))
        if data_size > MAX_DATA_BYTES:
            causes.append(("data", f"Too long: must have at most {MAX_DATA_BYTES} bytes",
                           "FieldValueTooLong"))
        if old is not None and old.get("immutable"):
            fields = ("data", "binaryData", "type") if res.name == "secrets" else ("data",
                                                                                    "binaryData")
            for field in fields:
                if (obj.get(field) or {}) != (old.get(field) or {}):
                    causes.append((field, "Forbidden: field is immutable when `immutable` is set",
                                   "FieldValueForbidden"))
            if not obj.get("immutable"):
                causes.append(("immutable", "Forbidden: field is immutable when `immutable` is "
                               "set", "FieldValueForbidden"))
        if old is not None and res.name == "secrets" and obj.get("type") != old.get("type"):
            causes.append(("type", "Invalid value: field is immutable", "FieldValueInvalid"))
    elif res.name == "pods":
        _default_pod(obj)
        _prepare_pod(obj, old, subresource)
        if subresource == "status":
            _validate_pod_status(obj, causes)
        if old is not None:
            old_node = (old.get("spec") or {}).get("nodeName")
            if old_node and obj["spec"].get("nodeName") != old_node:
                causes.append(("spec.nodeName", "Forbidden: pod updates may not change fields "
                               "other than allowed ones", "FieldValueForbidden"))
    elif res.name == "leases":
        spec = obj.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (not isinstance(duration, int) or duration <= 0):
            causes.append(("spec.leaseDurationSeconds", f"Invalid value: {json.dumps(duration)}: "
                           "must be greater than 0", "FieldValueInvalid"))
        transitions = spec.get("leaseTransitions")
        if transitions is not None and (not isinstance(transitions, int) or transitions < 0):
            causes.append(("spec.leaseTransitions", f"Invalid value: {json.dumps(transitions)}: "
                           "must be greater than or equal to 0", "FieldValueInvalid"))
    elif res.name == "events":
        involved_ns = (obj.get("involvedObject") or {}).get("namespace", "")
        if involved_ns != obj["metadata"].get("namespace"):
            causes.append(("involvedObject.namespace", f'Invalid value: "{involved_ns}": does not '
                           "match event.namespace", "FieldValueInvalid"))
    if causes:
        raise invalid(res.kind, res.group, name, causes)


def check_body_kind(res, obj):
    if not isinstance(obj, dict):
        raise bad_request("the body of the request was in an unknown format")
    kind = obj.get("kind")
    if kind and kind != res.kind:
        raise bad_request(f"the server could not find the requested resource: kind {kind} "
                          f"does not match {res.kind}")
    api_version = obj.get("apiVersion")
    if api_version and api_version != res.api_version:
        raise bad_request(f"apiVersion {api_version} does not match {res.api_version}")
    if not isinstance(obj.get("metadata") or {}, dict):
        raise bad_request("metadata must be an object")
    obj["metadata"] = obj.get("metadata") or {}
    obj["kind"] = res.kind
    obj["apiVersion"] = res.api_version


def ensure(condition, error):
    if not condition:
        raise error
