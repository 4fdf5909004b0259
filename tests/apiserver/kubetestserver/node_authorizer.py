"""The Node authorizer and the NodeRestriction admission plugin, for clients whose identity is a
node's (user `system:node:<name>` in group `system:nodes`).

Follows the rules of kube-apiserver 1.32 and later with `--authorization-mode=Node,RBAC`, the
NodeRestriction plugin enabled and the AuthorizeNodeWithSelectors feature on (its default since
1.32), restricted to the resources this server serves:

* pods: list and watch only with the field selector `spec.nodeName=<node>` (or pinned by
  `metadata.name` to a pod bound to the node); get of a pod bound to the node; create of a mirror
  pod bound to the node and delete of a pod bound to the node (NodeRestriction);
* pods/status: update and patch (not get), of a pod bound to the node and leaving its labels as
  they are (NodeRestriction, which upstream checks against the stored pod: a pod that does not
  exist is the write's own 404);
* secrets and configmaps: get, and list/watch pinned to one name by `metadata.name=<name>`, of an
  object that a pod bound to the node references (volumes, projected sources, env, envFrom,
  imagePullSecrets, the secretRef of the volume plugins that take one);
* events (core/v1): create, update, patch (the node's static rules);
* serviceaccounts/token: create, for a service account that a pod bound to the node runs as
  (spec.serviceAccountName); NodeRestriction's checks of the request are in tokens.py;
* leases: get, create, update, patch, delete in `kube-node-lease`, of the Lease named as the node
  (the name of a created Lease is checked by NodeRestriction);
* anything else: no opinion, which the server answers with kube-apiserver's 403 (the reason the
  authorizer gives appended to the message after ": ").

Upstream keeps a graph fed by informers, so a grant lags a binding by a moment; here the
relationships are read from the store at each request, so a grant follows a pod's binding and its
deletion at once. Established watches are not cut when a grant goes, as upstream (authorization is
checked when a request starts).
"""

from . import status as st

NODE_GROUP = "system:nodes"
NODE_USER_PREFIX = "system:node:"
NODE_LEASE_NAMESPACE = "kube-node-lease"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def node_name(user, groups):
    """The node a user is, or None when it is not a node identity (upstream's nodeidentifier:
    the prefix and the group are both needed). An empty name is a node with no name."""
    if not user or not user.startswith(NODE_USER_PREFIX) or NODE_GROUP not in (groups or ()):
        return None
    return user[len(NODE_USER_PREFIX):]


class Decision:
    """The authorizer's answer: allowed, or no opinion with a reason (possibly empty)."""

    def __init__(self, allowed, reason=""):
        self.allowed = allowed
        self.reason = reason


ALLOW = Decision(True)


def _deny(reason=""):
    return Decision(False, reason)


def _container_refs(container, kind):
    names = set()
    for source in container.get("envFrom") or ():
        ref = source.get("secretRef" if kind == "secrets" else "configMapRef") or {}
        if ref.get("name"):
            names.add(ref["name"])
    key = "secretKeyRef" if kind == "secrets" else "configMapKeyRef"
    for env in container.get("env") or ():
        ref = (env.get("valueFrom") or {}).get(key) or {}
        if ref.get("name"):
            names.add(ref["name"])
    return names


# Volume plugins that name a Secret in the pod's namespace (upstream's VisitPodSecretNames).
_SECRET_REF_VOLUMES = ("cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos")


def referenced_names(pod, kind):
    """The names of the `kind` ("secrets" or "configmaps") objects in the pod's namespace that
    the pod references."""
    spec = pod.get("spec") or {}
    names = set()
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(key) or ():
            names |= _container_refs(container, kind)
    if kind == "secrets":
        for ref in spec.get("imagePullSecrets") or ():
            if ref.get("name"):
                names.add(ref["name"])
    for volume in spec.get("volumes") or ():
        if kind == "secrets":
            if (volume.get("secret") or {}).get("secretName"):
                names.add(volume["secret"]["secretName"])
            if (volume.get("azureFile") or {}).get("secretName"):
                names.add(volume["azureFile"]["secretName"])
            for plugin in _SECRET_REF_VOLUMES:
                ref = (volume.get(plugin) or {}).get("secretRef") or {}
                if ref.get("name"):
                    names.add(ref["name"])
            ref = (volume.get("csi") or {}).get("nodePublishSecretRef") or {}
            if ref.get("name"):
                names.add(ref["name"])
        elif (volume.get("configMap") or {}).get("name"):
            names.add(volume["configMap"]["name"])
        for source in (volume.get("projected") or {}).get("sources") or ():
            ref = source.get("secret" if kind == "secrets" else "configMap") or {}
            if ref.get("name"):
                names.add(ref["name"])
    return names


class NodeAuthorizer:
    """Decides a node's requests from the store's current pods."""

    def __init__(self, store):
        self.store = store

    def _pods_on(self, node):
        return [obj for obj in self.store.objects["pods"].values()
                if (obj.get("spec") or {}).get("nodeName") == node]

    def _pod_bound(self, node, namespace, name):
        pod = self.store.objects["pods"].get((namespace, name))
        return pod is not None and (pod.get("spec") or {}).get("nodeName") == node

    def related(self, node, kind, namespace, name):
        """Whether a pod bound to `node` references `kind` object namespace/name."""
        for pod in self._pods_on(node):
            if pod["metadata"].get("namespace") == namespace and \
                    name in referenced_names(pod, kind):
                return True
        return False

    def authorize(self, node, verb, res, namespace, name, field_selector, subresource=None):
        """The Decision for one request. `name` is the URL's name, or for list and watch the
        `metadata.name` the field selector pins (as kube-apiserver's RequestInfo sets it)."""
        if not node:
            return _deny(f'unknown node for user "{NODE_USER_PREFIX}"')
        if res.name == "pods" and subresource == "status":
            # The node's rules: update and patch, narrowed by NodeRestriction (admit).
            return ALLOW if verb in ("update", "patch") else _deny()
        if res.name == "serviceaccounts":
            # Tokens for the service accounts its pods run as; NodeRestriction (tokens.py) then
            # wants them bound to such a pod, with its UID.
            if verb != "create" or not name:
                return _deny("can only create tokens for individual service accounts")
            if subresource != "token":
                return _deny("can only create token subresource of serviceaccount")
            for pod in self._pods_on(node):
                if pod["metadata"].get("namespace") == namespace and \
                        (pod.get("spec") or {}).get("serviceAccountName") == name:
                    return ALLOW
            return _deny(f"no relationship found between node '{node}' and this object")
        if subresource is not None:
            return _deny()
        if res.name in ("secrets", "configmaps"):
            if verb not in ("get", "list", "watch"):
                return _deny("can only read resources of this type")
            if not namespace:
                return _deny("can only read namespaced object of this type")
            return self._by_graph(node, res.name, namespace, name)
        if res.name == "pods":
            if verb == "get":
                return self._pod(node, namespace, name)
            if verb in ("list", "watch"):
                for field, op, value in field_selector.terms:
                    if field == "spec.nodeName" and op in ("=", "==") and value == node:
                        return ALLOW
                if name:
                    return self._pod(node, namespace, name)
                return _deny("can only list/watch pods with spec.nodeName field selector")
            if verb in ("create", "delete"):
                return ALLOW  # NodeRestriction (admit_pod) narrows these
            return _deny()
        if res.name == "leases":
            if verb not in ("get", "create", "update", "patch", "delete"):
                return _deny("can only get, create, update, patch, or delete a node lease")
            if namespace != NODE_LEASE_NAMESPACE:
                return _deny(f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system '
                             "namespace")
            if verb != "create" and name != node:
                return _deny("can only access node lease with the same name as the requesting "
                             "node")
            return ALLOW
        if res.name == "nodes":
            # AuthorizeNodeWithSelectors: reads of its own Node object only (by name, not the
            # graph, so that a kubelet may read it before creating it); writes go to
            # NodeRestriction (not modelled: no test writes a Node as a node).
            if verb in ("create", "update", "patch"):
                return ALLOW
            if verb in ("get", "list", "watch"):
                if name == node:
                    return ALLOW
                if not name:
                    return _deny(f"node '{node}' cannot read all nodes, only its own Node object")
                return _deny(f"node '{node}' cannot read '{name}', only its own Node object")
            return _deny()
        if res.name == "events":
            # The static node rules: events create, update, patch.
            return ALLOW if verb in ("create", "update", "patch") else _deny()
        return _deny()

    def _pod(self, node, namespace, name):
        if not name:
            return _deny("No Object name found")
        if self._pod_bound(node, namespace, name):
            return ALLOW
        return _deny(f"no relationship found between node '{node}' and this object")

    def _by_graph(self, node, kind, namespace, name):
        if not name:
            return _deny("No Object name found")
        if self.related(node, kind, namespace, name):
            return ALLOW
        return _deny(f"no relationship found between node '{node}' and this object")

    # ---- NodeRestriction ---------------------------------------------------------------------

    def admit(self, node, verb, res, namespace, name, body, subresource=None, old=None):
        """NodeRestriction's checks on a node's writes that the authorizer let through; raises
        the admission plugin's 403. `old` is the stored object a subresource write changes."""
        if res.name == "pods" and subresource == "status":
            if ((old or {}).get("spec") or {}).get("nodeName") != node:
                raise _admission_forbidden(res, name, f'node "{node}" can only update pod status '
                                           "for pods with spec.nodeName set to itself")
            if _labels(body) != _labels(old):
                raise _admission_forbidden(res, name, f'node "{node}" cannot update labels '
                                           "through pod status")
            return
        if res.name == "pods" and verb == "create":
            meta = (body or {}).get("metadata") or {}
            pod_name = meta.get("name") or meta.get("generateName") or ""
            if MIRROR_POD_ANNOTATION not in (meta.get("annotations") or {}):
                raise _admission_forbidden(res, pod_name, f'pod does not have '
                                           f'"{MIRROR_POD_ANNOTATION}" annotation, node '
                                           f'"{node}" can only create mirror pods')
            if ((body or {}).get("spec") or {}).get("nodeName") != node:
                raise _admission_forbidden(res, pod_name, f'node "{node}" can only create pods '
                                           "with spec.nodeName set to itself")
        if res.name == "pods" and verb == "delete":
            if not self._pod_bound(node, namespace, name):
                # As upstream: a pod that does not exist gets the NotFound of the delete itself.
                if self.store.objects["pods"].get((namespace, name)) is not None:
                    raise _admission_forbidden(res, name, f'node "{node}" can only delete pods '
                                               "with spec.nodeName set to itself")
        if res.name == "leases" and verb == "create":
            lease_name = ((body or {}).get("metadata") or {}).get("name") or ""
            if lease_name != node:
                raise _admission_forbidden(res, lease_name, "can only access node lease with "
                                           "the same name as the requesting node")


def _labels(obj):
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _admission_forbidden(res, name, message):
    q = st.qualified(res.name, res.group)
    details = {"kind": res.name}
    if name:
        details["name"] = name
    if res.group:
        details["group"] = res.group
    return st.ApiError(403, f'{q} "{name}" is forbidden: {message}', "Forbidden", details)
