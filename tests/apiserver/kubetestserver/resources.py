"""The served resources, their defaulting and validation (docs/kubernetes-api.md §3, §8 "Storage" and "Writes")."""

import base64
import binascii
import json
import re

from .status import ApiError, bad_request, invalid


class Resource:
    def __init__(self, name, singular, kind, group, verbs, short_names=()):
        self.name = name
        self.singular = singular
        self.kind = kind
        self.group = group
        self.version = "v1"
        self.api_version = f"{group}/v1" if group else "v1"
        self.verbs = verbs
        self.short_names = list(short_names)

    def discovery(self):
        entry = {"name": self.name, "singularName": self.singular, "namespaced": True,
                 "kind": self.kind, "verbs": self.verbs}
        if self.short_names:
            entry["shortNames"] = self.short_names
        return entry


_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

RESOURCES = {
    "pods": Resource("pods", "pod", "Pod", "", _ALL_VERBS, ["po"]),
    "configmaps": Resource("configmaps", "configmap", "ConfigMap", "", _ALL_VERBS, ["cm"]),
    "secrets": Resource("secrets", "secret", "Secret", "", _ALL_VERBS),
    "events": Resource("events", "event", "Event", "", _ALL_VERBS, ["ev"]),
    "leases": Resource("leases", "lease", "Lease", "coordination.k8s.io", _ALL_VERBS),
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
    pod.setdefault("status", {}).setdefault("phase", "Pending")


def default_and_validate(res, obj, old=None):
    """Applies the server's defaults to `obj` in place; raises ApiError 400/422 when invalid.

    `old` is the stored object on update (immutability checks), None on create.
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
