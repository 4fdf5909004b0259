"""A pod's QoS class (`status.qosClass`), which kube-apiserver sets when it creates a pod: computed
from the containers' and init containers' cpu and memory requests and limits as
pkg/apis/core/helper/qos (GetPodQOS) does, after the v1 defaulting that copies a limit into a
missing request.

Quantities are parsed as resource.Quantity reads them (`100m`, `1Gi`, `1e3`, `0.5`, a JSON number)
into exact fractions, so a request equals a limit whatever their spellings.
"""

import re
from fractions import Fraction

from .status import bad_request

QOS_RESOURCES = ("cpu", "memory")

_QUANTITY_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                          r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# kube-apiserver's decoding error for a quantity it cannot read.
_QUANTITY_ERROR = ("quantities must match the regular expression "
                   "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def parse_quantity(value):
    """The quantity's value as a Fraction; 400 BadRequest when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise bad_request(_QUANTITY_ERROR)
    match = _QUANTITY_RE.match(str(value).strip())
    if not match:
        raise bad_request(_QUANTITY_ERROR)
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * (1 << (10 * _BINARY[suffix]))
    exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
    return number * Fraction(10) ** exponent


def default_requests_from_limits(container):
    """v1 defaulting (SetDefaults_Pod): a limit without a request is also the request."""
    resources = container.get("resources")
    if not isinstance(resources, dict) or not resources.get("limits"):
        return
    requests = resources.get("requests") or {}
    for name, value in resources["limits"].items():
        requests.setdefault(name, value)
    resources["requests"] = requests


def pod_qos_class(pod):
    """Guaranteed, Burstable or BestEffort, as GetPodQOS decides it."""
    spec = pod.get("spec") or {}
    requests, limits = {}, {}
    guaranteed = True
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        for name, value in (resources.get("requests") or {}).items():
            quantity = parse_quantity(value)
            if name in QOS_RESOURCES and quantity > 0:
                requests[name] = requests.get(name, 0) + quantity
        found = set()
        for name, value in (resources.get("limits") or {}).items():
            quantity = parse_quantity(value)
            if name in QOS_RESOURCES and quantity > 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + quantity
        if not found >= set(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"
