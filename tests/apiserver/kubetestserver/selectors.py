"""Field and label selectors (docs/kubernetes-api.md §2.6): comma-separated AND terms of `f=v`, `f==v`, `f!=v`."""

from .status import bad_request

SELECTABLE_FIELDS = {
    "pods": {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
             "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
             "status.podIP", "status.nominatedNodeName"},
    "configmaps": {"metadata.name", "metadata.namespace"},
    "secrets": {"metadata.name", "metadata.namespace", "type"},
    "events": {"metadata.name", "metadata.namespace", "involvedObject.kind",
               "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
               "reason", "type", "source"},
    "leases": {"metadata.name", "metadata.namespace"},
    "nodes": {"metadata.name"},
}


def _split_term(term):
    for op in ("!=", "==", "="):
        i = term.find(op)
        if i > 0:
            return term[:i].strip(), op, term[i + len(op):].strip()
    return None


def _field_value(obj, field):
    value = obj
    for part in field.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class FieldSelector:
    def __init__(self, resource, text):
        self.terms = []
        for term in (text or "").split(","):
            if not term.strip():
                continue
            parsed = _split_term(term)
            if parsed is None:
                raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
            field, op, value = parsed
            if field not in SELECTABLE_FIELDS.get(resource, set()):
                raise bad_request(f"field label not supported: {field}")
            self.terms.append((field, op, value))

    def matches(self, obj):
        for field, op, value in self.terms:
            actual = _field_value(obj, field)
            if (actual == value) != (op != "!="):
                return False
        return True

    def exact_name(self):
        """The name a `metadata.name=<x>` term pins, else None (RBAC resourceNames use it)."""
        for field, op, value in self.terms:
            if field == "metadata.name" and op != "!=":
                return value
        return None


class LabelSelector:
    """Equality-based label selectors plus `key` / `!key` existence terms."""

    def __init__(self, text):
        self.terms = []
        for term in (text or "").split(","):
            term = term.strip()
            if not term:
                continue
            parsed = _split_term(term)
            if parsed is None:
                if term.startswith("!"):
                    self.terms.append((term[1:], "!exists", None))
                else:
                    self.terms.append((term, "exists", None))
            else:
                self.terms.append(parsed)

    def matches(self, obj):
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for key, op, value in self.terms:
            if op == "exists" and key not in labels:
                return False
            if op == "!exists" and key in labels:
                return False
            if op in ("=", "==") and labels.get(key) != value:
                return False
            if op == "!=" and labels.get(key) == value:
                return False
        return True
