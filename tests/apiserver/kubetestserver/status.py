"""metav1.Status error bodies with kube-apiserver's reasons, codes and message shapes (docs/kubernetes-api.md §1.3)."""

REASON_BY_CODE = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
    413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}


class ApiError(Exception):
    """An API failure answered as a Status body. `headers` are extra response headers."""

    def __init__(self, code, message, reason=None, details=None, headers=None, metadata=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASON_BY_CODE.get(code, "InternalError")
        self.details = details
        self.headers = headers or {}
        self.metadata = metadata or {}

    def body(self):
        return status_body(self.code, self.reason, self.message, self.details, self.metadata)


def status_body(code, reason, message, details=None, metadata=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": metadata or {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


def qualified(resource, group):
    return f"{resource}.{group}" if group else resource


def not_found(resource, group, name):
    return ApiError(404, f'{qualified(resource, group)} "{name}" not found', "NotFound",
                    _details(resource, group, name))


def already_exists(resource, group, name):
    return ApiError(409, f'{qualified(resource, group)} "{name}" already exists', "AlreadyExists",
                    _details(resource, group, name))


def conflict(resource, group, name):
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        "Conflict", _details(resource, group, name))


def invalid(kind, group, name, causes):
    """causes: list of (field, message, reason)."""
    text = "; ".join(f"{field}: {message}" for field, message, _ in causes)
    details = {"name": name, "kind": kind,
               "causes": [{"reason": reason, "message": message, "field": field}
                          for field, message, reason in causes]}
    if group:
        details["group"] = group
    return ApiError(422, f'{kind} "{name}" is invalid: {text}', "Invalid", details)


def bad_request(message):
    return ApiError(400, message, "BadRequest")


def expired(message, metadata=None):
    return ApiError(410, message, "Expired", metadata=metadata)


def forbidden(user, verb, resource, group, namespace, name, reason="", subresource=None):
    """kube-apiserver's 403 for a request no authorizer allowed; `reason` is what the
    authorizers said (the Node authorizer's reasons), appended after ": " when there is one. A
    subresource is named after its resource in the sentence (`pods/status`), not in the subject
    or the details."""
    q = qualified(resource, group)
    subject = f'{q} "{name}"' if name else q
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    suffix = f": {reason}" if reason else ""
    requested = f"{resource}/{subresource}" if subresource else resource
    return ApiError(
        403,
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{requested}" in API '
        f'group "{group}"{where}{suffix}',
        "Forbidden", _details(resource, group, name))


def _details(resource, group, name):
    details = {"kind": resource}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details
