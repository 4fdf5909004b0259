"""kube-test-apiserver against the checklist of docs/kubernetes-api.md §8, over raw HTTPS so every byte is seen."""

import base64
import json
import ssl
import threading
import time

import pytest

from harness import TestApiServer, configmap, set_pod_status

CM = "/api/v1/namespaces/default/configmaps"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


@pytest.fixture
def server():
    with TestApiServer() as s:
        yield s


def create_cm(server, name, data=None, namespace="default"):
    code, body = server.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                                configmap(name, data or {"a": "1"}, namespace))
    assert code == 201, body
    return body


# ---- storage ------------------------------------------------------------------------------------

def test_create_sets_uid_timestamp_and_increasing_revisions(server):
    first = create_cm(server, "one")
    second = create_cm(server, "two")
    assert len(first["metadata"]["uid"]) == 36
    assert first["metadata"]["creationTimestamp"].endswith("Z")
    assert int(second["metadata"]["resourceVersion"]) == int(first["metadata"]["resourceVersion"]) + 1


def test_noop_update_keeps_resource_version(server):
    obj = create_cm(server, "same")
    code, again = server.request("PUT", f"{CM}/same", obj)
    assert code == 200
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    obj["data"]["a"] = "2"
    code, changed = server.request("PUT", f"{CM}/same", obj)
    assert int(changed["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])


def test_defaults_secret_type_and_pod_volume_modes(server):
    code, secret = server.request("POST", "/api/v1/namespaces/default/secrets", {
        "metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert code == 201 and secret["type"] == "Opaque"
    assert secret["data"] == {"k": base64.b64encode(b"v").decode()}
    assert "stringData" not in secret
    code, pod = server.request("POST", "/api/v1/namespaces/default/pods", {
        "metadata": {"name": "p"}, "spec": {"nodeName": "node-1", "containers": [], "volumes": [
            {"name": "c", "configMap": {"name": "x"}},
            {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {
                "fieldPath": "metadata.name"}}]}}]}})
    assert code == 201
    assert pod["spec"]["volumes"][0]["configMap"]["defaultMode"] == 420
    assert pod["spec"]["volumes"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"


@pytest.mark.parametrize("name,body,code,reason", [
    ("bad key", configmap("k", {"bad/key": "x"}), 422, "Invalid"),
    ("data over 1 MiB", configmap("big", {"a": "x" * (1 << 20)}), 422, "Invalid"),
    ("bad base64", {"metadata": {"name": "b"}, "binaryData": {"a": "!!"}}, 400, "BadRequest"),
    ("bad name", configmap("Upper_Case"), 422, "Invalid"),
])
def test_create_validation(server, name, body, code, reason):
    status, reply = server.request("POST", CM, body)
    assert (status, reply["reason"], reply["code"]) == (code, reason, code), name


def test_body_over_3_mib_is_413(server):
    status, reply = server.request("POST", CM, configmap("huge", {"a": "x" * (3 << 20)}))
    assert status == 413 and reply["reason"] == "RequestEntityTooLarge"


def test_immutable_configmap_rejects_data_change(server):
    obj = server.request("POST", CM, configmap("frozen", {"a": "1"}, immutable=True))[1]
    obj["data"]["a"] = "2"
    status, reply = server.request("PUT", f"{CM}/frozen", obj)
    assert status == 422 and reply["reason"] == "Invalid"


# ---- errors and auth ----------------------------------------------------------------------------

def test_not_found_and_already_exists_status_bodies(server):
    status, reply = server.request("GET", f"{CM}/nope")
    assert status == 404
    assert reply == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": 'configmaps "nope" not found', "reason": "NotFound",
                     "details": {"name": "nope", "kind": "configmaps"}, "code": 404}
    create_cm(server, "dup")
    status, reply = server.request("POST", CM, configmap("dup"))
    assert (status, reply["reason"]) == (409, "AlreadyExists")


def test_bad_token_is_401_and_unknown_path_404(server):
    status, reply = server.request("GET", CM, token="wrong")
    assert (status, reply["reason"]) == (401, "Unauthorized")
    status, reply = server.request("GET", "/api/v1/namespaces/default/widgets")
    assert (status, reply["reason"]) == (404, "NotFound")


def test_client_certificate_authenticates(server):
    server.admin("POST", "acl", {"user": "cert-user", "rules": [
        {"verbs": ["get", "list"], "resources": ["configmaps"]}]})
    status, _ = server.request("GET", CM, token="", client_cert=True)
    assert status == 200
    status, reply = server.request("GET", "/api/v1/namespaces/default/secrets", token="",
                                   client_cert=True)
    assert status == 403
    assert reply["message"] == ('secrets is forbidden: User "cert-user" cannot list resource '
                                '"secrets" in API group "" in the namespace "default"')


def test_client_certificate_is_checked_for_expiry_on_every_request(server, tmp_path):
    # A certificate issued on demand, as the kubelet's rotation writes it (one PEM file).
    path = str(tmp_path / "kubelet-client-1.pem")
    issued = server.admin("POST", "issue-client-cert",
                          {"path": path, "user": "system:node:n1", "groups": ["system:nodes"],
                           "days": 1})
    with open(path) as f:
        text = f.read()
    assert text.index("BEGIN CERTIFICATE") < text.index("PRIVATE KEY")
    # A list the Node authorizer alone would refuse (not pinned to one name): granted on top.
    server.admin("POST", "acl", {"user": "system:node:n1",
                                 "rules": [{"verbs": ["list"], "resources": ["configmaps"]}]})
    status, reply = server.request("GET", CM, token="", client_cert=path)
    assert status == 200, reply
    last = [r for r in server.admin("GET", "requests")["requests"] if r["path"] == CM][-1]
    assert last["user"] == "system:node:n1"
    assert last["cert_serial"] == issued["serial"]
    # Two days later by the server's clock: the same certificate is refused as kube-apiserver's
    # x509 authenticator refuses an expired one; the 3-day default one still works.
    server.admin("POST", "clock", {"offset_seconds": 2 * 86400})
    status, reply = server.request("GET", CM, token="", client_cert=path)
    assert status == 401
    assert reply == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
    status, _ = server.request("GET", CM, token="", client_cert=True)
    assert status == 200
    server.admin("POST", "clock", {"offset_seconds": 0})
    status, _ = server.request("GET", CM, token="", client_cert=path)
    assert status == 200
    code, reply = server.request("POST", "/_admin/issue-client-cert",
                                 {"path": "relative.pem", "user": "u"})
    assert code == 400 and "absolute" in reply["error"]


def test_acl_resource_names_allow_single_object_list(server):
    server.admin("POST", "tokens", {"token": "limited", "user": "system:serviceaccount:vm:vm"})
    server.admin("POST", "acl", {"user": "system:serviceaccount:vm:vm", "rules": [
        {"verbs": ["get", "list", "watch"], "resources": ["secrets"], "names": ["web-tls"]}]})
    path = "/api/v1/namespaces/shop/secrets"
    assert server.request("GET", f"{path}?fieldSelector=metadata.name%3Dweb-tls",
                          token="limited")[0] == 200
    status, reply = server.request("GET", f"{path}/other", token="limited")
    assert status == 403
    assert reply["message"] == ('secrets "other" is forbidden: User "system:serviceaccount:vm:vm" '
                                'cannot get resource "secrets" in API group "" in the namespace '
                                '"shop"')


def test_token_rotation(server):
    new = server.admin("POST", "rotate-token", {"token": "rotated"})["token"]
    assert new == "rotated"
    assert server.request("GET", CM)[0] == 401
    assert server.request("GET", CM, token="rotated")[0] == 200


def test_discovery_documents(server):
    assert server.request("GET", "/version")[1]["minor"] == "36"
    assert server.request("GET", "/api")[1]["versions"] == ["v1"]
    groups = server.request("GET", "/apis")[1]["groups"]
    assert groups[0]["name"] == "coordination.k8s.io"
    leases = server.request("GET", "/apis/coordination.k8s.io/v1")[1]
    assert leases["resources"][0]["name"] == "leases"
    core = {r["name"] for r in server.request("GET", "/api/v1")[1]["resources"]}
    assert {"pods", "configmaps", "secrets", "events"} <= core


def test_path_prefix():
    with TestApiServer(path_prefix="/k8s/cluster") as s:
        assert s.url.endswith("/k8s/cluster")
        assert s.request("GET", "/version")[0] == 200


# ---- reads --------------------------------------------------------------------------------------

def test_list_rv_is_current_revision_and_items_lack_kind(server):
    create_cm(server, "a")
    last = create_cm(server, "b")
    code, reply = server.request("GET", CM)
    assert reply["kind"] == "ConfigMapList"
    assert reply["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"]
    assert all("kind" not in item and "apiVersion" not in item for item in reply["items"])


@pytest.mark.parametrize("selector,expected", [
    ("spec.nodeName=node-1", ["a"]),
    ("spec.nodeName==node-1", ["a"]),
    ("spec.nodeName!=node-1", ["b"]),
    ("spec.nodeName=node-2,metadata.name=b", ["b"]),
    ("spec.nodeName=node-2,metadata.name=a", []),
])
def test_pod_field_selectors(server, selector, expected):
    for name, node in (("a", "node-1"), ("b", "node-2")):
        server.request("POST", "/api/v1/namespaces/default/pods",
                       {"metadata": {"name": name}, "spec": {"nodeName": node}})
    code, reply = server.request("GET", f"/api/v1/pods?fieldSelector={selector}")
    assert code == 200
    assert [i["metadata"]["name"] for i in reply["items"]] == expected


@pytest.mark.parametrize("selector", ["spec.nodeName=x", "nosuchthing", "data.a=1"])
def test_bad_field_selectors_are_400(server, selector):
    status, reply = server.request("GET", f"{CM}?fieldSelector={selector}")
    assert (status, reply["reason"]) == (400, "BadRequest")


@pytest.mark.parametrize("query,code", [
    ("resourceVersionMatch=NotOlderThan", 422),
    ("resourceVersionMatch=Exact&resourceVersion=0", 422),
    ("resourceVersion=abc", 400),
    ("continue=abc&resourceVersion=105", 400),
])
def test_resource_version_table_errors(server, query, code):
    assert server.request("GET", f"{CM}?{query}")[0] == code


def test_paging_is_consistent_and_expired_token_410(server):
    for i in range(5):
        create_cm(server, f"cm-{i}")
    code, page = server.request("GET", f"{CM}?limit=2")
    assert len(page["items"]) == 2 and page["metadata"]["remainingItemCount"] == 3
    snapshot_rv = page["metadata"]["resourceVersion"]
    create_cm(server, "cm-9")  # after the snapshot: must not appear in later pages
    names = [i["metadata"]["name"] for i in page["items"]]
    token = page["metadata"]["continue"]
    while token:
        code, page = server.request("GET", f"{CM}?limit=2&continue={token}")
        assert page["metadata"]["resourceVersion"] == snapshot_rv
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
    assert names == [f"cm-{i}" for i in range(5)]
    code, page = server.request("GET", f"{CM}?limit=2")
    create_cm(server, "cm-10")
    server.admin("POST", "compact")
    status, reply = server.request("GET", f"{CM}?limit=2&continue={page['metadata']['continue']}")
    assert (status, reply["reason"]) == (410, "Expired")
    assert reply["metadata"]["continue"]


def test_exact_list_at_past_revision(server):
    first = create_cm(server, "x", {"a": "1"})
    rv = first["metadata"]["resourceVersion"]
    first["data"]["a"] = "2"
    server.request("PUT", f"{CM}/x", first)
    code, reply = server.request("GET", f"{CM}?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert code == 200 and reply["items"][0]["data"] == {"a": "1"}
    server.admin("POST", "compact")
    status, reply = server.request("GET", f"{CM}?resourceVersion={rv}&limit=10")
    assert (status, reply["reason"]) == (410, "Expired")


def test_too_large_resource_version_is_504_with_retry_after(server):
    server.admin("POST", "settings", {"too_large_wait": 0.1})
    status, headers, body = server.raw_request("GET", f"{CM}?resourceVersion=999999")
    reply = json.loads(body)
    assert status == 504 and headers["retry-after"] == "1"
    assert reply["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_large_lists_are_gzipped_when_asked(server):
    for i in range(3):
        create_cm(server, f"big-{i}", {"a": "y" * 60000})
    status, headers, body = server.raw_request("GET", CM, headers={"Accept-Encoding": "gzip"})
    assert headers.get("content-encoding") == "gzip"
    status, headers, body = server.raw_request("GET", CM)
    assert "content-encoding" not in headers


# ---- watches ------------------------------------------------------------------------------------

def test_watch_from_rv_replays_history_then_times_out_cleanly(server):
    start = create_cm(server, "w", {"a": "1"})
    start["data"]["a"] = "2"
    server.request("PUT", f"{CM}/w", start)
    server.request("DELETE", f"{CM}/w")
    status, events, _, complete = server.watch_events(
        f"{CM}?watch=true&resourceVersion={start['metadata']['resourceVersion']}&timeoutSeconds=1")
    assert status == 200 and complete
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(start["metadata"]["resourceVersion"])


def test_watch_without_rv_sends_synthetic_added(server):
    create_cm(server, "one")
    create_cm(server, "two")
    status, events, _, _ = server.watch_events(f"{CM}?watch=1&timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "one"), ("ADDED", "two")]
    assert events[0]["object"]["kind"] == "ConfigMap"


def test_watch_selector_transitions(server):
    pod = {"metadata": {"name": "p"}, "spec": {}}
    code, created = server.request("POST", "/api/v1/namespaces/default/pods", pod)
    rv = created["metadata"]["resourceVersion"]
    created["metadata"]["labels"] = {"on": "yes"}
    code, modified = server.request("PUT", "/api/v1/namespaces/default/pods/p", created)
    modified["metadata"]["labels"] = {"on": "no"}
    code, last = server.request("PUT", "/api/v1/namespaces/default/pods/p", modified)
    status, events, _, _ = server.watch_events(
        f"/api/v1/pods?watch=true&labelSelector=on%3Dyes&resourceVersion={rv}&timeoutSeconds=1")
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    assert events[1]["object"]["metadata"]["labels"] == {"on": "yes"}
    assert events[1]["object"]["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"]


def test_watch_bookmarks_only_when_asked(server):
    server.admin("POST", "settings", {"bookmark_period": 0.3})
    rv = create_cm(server, "b")["metadata"]["resourceVersion"]
    _, events, _, _ = server.watch_events(f"{CM}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert events == []
    _, events, _, _ = server.watch_events(
        f"{CM}?watch=true&resourceVersion={rv}&timeoutSeconds=1&allowWatchBookmarks=true")
    assert events and all(e["type"] == "BOOKMARK" for e in events)
    assert events[0]["object"]["metadata"]["resourceVersion"] == rv


def test_send_initial_events_ends_with_annotated_bookmark(server):
    create_cm(server, "i")
    _, events, _, _ = server.watch_events(
        f"{CM}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=1")
    # With a 1 s timeout the "2 s before the end" bookmark may follow at once.
    assert [e["type"] for e in events[:2]] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


@pytest.mark.parametrize("mode,expect_status", [("event", 200), ("status", 410)])
def test_watch_from_compacted_rv_is_410(server, mode, expect_status):
    rv = create_cm(server, "c")["metadata"]["resourceVersion"]
    create_cm(server, "d")
    server.admin("POST", "compact")
    server.admin("POST", "settings", {"expired_watch_mode": mode})
    status, events, _, _ = server.watch_events(f"{CM}?watch=true&resourceVersion={rv}")
    assert status == expect_status
    if mode == "event":
        assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
        assert events[0]["object"]["reason"] == "Expired"


def test_history_window_by_count(server):
    server.admin("POST", "settings", {"history_max_events": 2})
    rv = create_cm(server, "h0")["metadata"]["resourceVersion"]
    for i in range(1, 4):
        create_cm(server, f"h{i}")
    _, events, _, _ = server.watch_events(f"{CM}?watch=true&resourceVersion={rv}")
    assert events[0]["type"] == "ERROR"


@pytest.mark.parametrize("mode,check", [
    ("split", lambda sizes: max(sizes) <= 7 and len(sizes) > 2),
    ("batch", lambda sizes: len(sizes) == 1),
    ("event", lambda sizes: len(sizes) == 2),
])
def test_chunk_modes(server, mode, check):
    server.admin("POST", "settings", {"chunk_mode": mode, "chunk_size": 7})
    create_cm(server, "x1")
    create_cm(server, "x2")
    _, events, sizes, complete = server.watch_events(f"{CM}?watch=true&timeoutSeconds=1")
    assert len(events) == 2 and complete and check(sizes), sizes


# ---- faults -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fault,code,content_type,retry_after", [
    ({"status": 429, "body": "text", "retry_after": 1}, 429, "text/plain", "1"),
    ({"status": 500}, 500, "application/json", None),
    ({"status": 503, "retry_after": 2}, 503, "application/json", "2"),
    ({"status": 502, "body": "html"}, 502, "text/html", None),
])
def test_status_faults_then_recovery(server, fault, code, content_type, retry_after):
    server.admin("POST", "faults", dict(fault, verb="list", times=1))
    status, headers, _ = server.raw_request("GET", CM)
    assert status == code and headers["content-type"].startswith(content_type)
    assert headers.get("retry-after") == retry_after
    assert server.raw_request("GET", CM)[0] == 200


def test_reset_fault_resets_the_connection_without_an_answer(server):
    server.admin("POST", "faults", {"verb": "get", "reset": True, "times": 1})
    assert _unanswered(server, f"{CM}/any")
    assert [r.get("reset") for r in server.admin("GET", "requests")["requests"]
            if r["path"] == f"{CM}/any"] == [True]
    assert server.raw_request("GET", f"{CM}/any")[0] == 404


def _unanswered(server, path):
    """Sends a GET of `path` on a new connection; True when the server reset it without a
    byte of answer."""
    sock = server.connect()
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 f"{server.token}\r\n\r\n".encode())
    try:
        answer = sock.recv(4096)
    except (ConnectionResetError, ssl.SSLError):
        answer = b""
    sock.close()
    return answer == b""


def test_outage_answers_nothing_but_the_admin_endpoint_until_lifted(server):
    idle = server.connect()  # a keep-alive connection open when the server "dies"
    server.admin("POST", "outage", {"down": True})
    assert server.admin("GET", "state")["outage"] is True
    for path in (f"{CM}/any", CM, "/version", "/api"):
        assert _unanswered(server, path), path
    idle.settimeout(10)
    try:
        assert idle.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        pass
    idle.close()
    logged = [r for r in server.admin("GET", "requests")["requests"] if r.get("outage")]
    assert len(logged) == 4 and all(r["reset"] for r in logged)
    server.admin("POST", "outage", {"down": False})
    assert server.raw_request("GET", "/version")[0] == 200
    assert server.raw_request("GET", f"{CM}/any")[0] == 404


def test_fault_for_one_user_leaves_the_others_alone(server):
    server.admin("POST", "tokens", {"token": "other-token", "user": "other"})
    server.admin("POST", "faults", {"user": "other", "status": 503, "times": -1})
    assert server.raw_request("GET", CM, token="other-token")[0] == 503
    assert server.raw_request("GET", CM)[0] == 200


def test_delay_fault_holds_the_answer_while_later_requests_are_served(server):
    create_cm(server, "held")
    create_cm(server, "other")
    server.admin("POST", "faults", {"verb": "get", "path": f"{CM}/held", "delay": 3600})
    held = server.connect()
    held.sendall(f"GET {CM}/held HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 f"{server.token}\r\n\r\n".encode())
    # Once the server has the held request, a later one is answered while the held one is not.
    while not any(r["path"] == f"{CM}/held" for r in server.admin("GET", "requests")["requests"]):
        time.sleep(0.01)
    assert server.raw_request("GET", f"{CM}/other")[0] == 200
    held.setblocking(False)
    with pytest.raises((BlockingIOError, ssl.SSLWantReadError)):
        held.recv(1)
    held.close()


def test_watch_cut_mid_event(server):
    create_cm(server, "m")
    server.admin("POST", "faults", {"verb": "watch", "watch": {"close_after_bytes": 30}})
    _, _, data = server.raw_request_stream("GET", f"{CM}?watch=true")
    from harness import dechunk
    body, _, complete = dechunk(data)
    assert len(body) == 30 and not complete


@pytest.mark.parametrize("kind,check", [
    ("invalid_json", lambda line: line.startswith(b'{"type":"MODIFIED","object":{"metadata":]')),
    ("unknown_type", lambda line: json.loads(line)["type"] == "SURPRISE"),
    ("wrong_kind", lambda line: json.loads(line)["object"]["kind"] == "Banana"),
    ("oversized", lambda line: len(line) > 2000),
    ("error", lambda line: json.loads(line)["object"]["code"] == 500),
])
def test_watch_injections(server, kind, check):
    create_cm(server, "a")
    server.admin("POST", "faults", {"verb": "watch", "watch": {"inject": [
        {"after": 1, "kind": kind, "size": 3000, "code": 500}]}})
    _, _, data = server.raw_request_stream("GET", f"{CM}?watch=true&timeoutSeconds=1")
    from harness import dechunk
    lines = dechunk(data)[0].split(b"\n")
    assert json.loads(lines[0])["type"] == "ADDED"
    assert check(lines[1])


def test_drop_watches_ends_streams(server):
    import threading
    result = {}

    def watch():
        result["value"] = server.watch_events(f"{CM}?watch=true&timeoutSeconds=3600")

    thread = threading.Thread(target=watch)
    thread.start()
    while server.admin("GET", "state")["watches"] == 0:
        time.sleep(0.02)
    # The watch would last an hour: only the drop can end it (join's limit guards against a hang).
    server.admin("POST", "drop-watches")
    thread.join(60)
    assert not thread.is_alive(), "the dropped watch did not end"
    assert result["value"][3]  # complete, clean end


def test_stalled_watch_sends_headers_then_nothing(server):
    create_cm(server, "s")
    server.admin("POST", "faults", {"verb": "watch", "watch": {"stall": True}})
    sock = server.connect()
    sock.settimeout(1.0)
    sock.sendall(f"GET {CM}?watch=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 f"{server.token}\r\n\r\n".encode())
    head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200")
    with pytest.raises(TimeoutError):
        while True:
            extra = sock.recv(4096)
            assert not extra.split(b"\r\n\r\n", 1)[-1].strip(), extra
    sock.close()


def test_watch_end_immediately(server):
    server.admin("POST", "faults", {"verb": "watch", "watch": {"end_immediately": True}})
    status, events, _, complete = server.watch_events(f"{CM}?watch=true&timeoutSeconds=30")
    assert status == 200 and events == [] and complete


# ---- writes -------------------------------------------------------------------------------------

def lease(name, rv=None, holder="a"):
    obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": name}, "spec": {"holderIdentity": holder,
                                                "leaseDurationSeconds": 15}}
    if rv:
        obj["metadata"]["resourceVersion"] = rv
    return obj


def test_lease_conflict_and_missing_rv(server):
    code, created = server.request("POST", LEASES, lease("l"))
    assert code == 201
    rv = created["metadata"]["resourceVersion"]
    assert server.request("PUT", f"{LEASES}/l", lease("l", rv, "b"))[0] == 200
    status, reply = server.request("PUT", f"{LEASES}/l", lease("l", rv, "c"))
    assert (status, reply["reason"]) == (409, "Conflict")
    assert reply["details"] == {"name": "l", "group": "coordination.k8s.io", "kind": "leases"}
    assert reply["message"].startswith(
        'Operation cannot be fulfilled on leases.coordination.k8s.io "l": the object has been '
        "modified")
    status, reply = server.request("PUT", f"{LEASES}/l", lease("l"))
    assert (status, reply["reason"]) == (422, "Invalid")
    status, reply = server.request("POST", LEASES, lease("l"))
    assert (status, reply["reason"]) == (409, "AlreadyExists")


def test_event_patch_media_types_and_namespace_check(server):
    event = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "namespace": "default",
                                                           "name": "p"},
             "reason": "FailedMount", "type": "Warning", "message": "m", "count": 1}
    assert server.request("POST", "/api/v1/namespaces/default/events", event)[0] == 201
    path = "/api/v1/namespaces/default/events/e1"
    for media in ("application/strategic-merge-patch+json", "application/merge-patch+json"):
        status, reply = server.request("PATCH", path, {"count": 3},
                                       headers={"Content-Type": media})
        assert status == 200 and reply["count"] == 3
    status, _ = server.request("PATCH", path, [{"op": "replace"}],
                               headers={"Content-Type": "application/json"})
    assert status == 415
    event["metadata"]["name"] = "e2"
    event["involvedObject"]["namespace"] = "other"
    assert server.request("POST", "/api/v1/namespaces/default/events", event)[0] == 422


def test_pod_graceful_delete(server):
    server.request("POST", "/api/v1/namespaces/default/pods",
                   {"metadata": {"name": "g"}, "spec": {"nodeName": "node-1"}})
    status, pod = server.request("DELETE", "/api/v1/namespaces/default/pods/g")
    assert status == 200 and pod["metadata"]["deletionTimestamp"]
    assert server.request("GET", "/api/v1/namespaces/default/pods/g")[0] == 200
    status, _ = server.request("DELETE", "/api/v1/namespaces/default/pods/g?gracePeriodSeconds=0")
    assert server.request("GET", "/api/v1/namespaces/default/pods/g")[0] == 404


# ---- pod status: reset at create, kept by pod writes, written through pods/{name}/status -------

PODS = "/api/v1/namespaces/default/pods"
MERGE = {"Content-Type": "application/merge-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
RUNNING = {"phase": "Running", "podIP": "10.1.2.3", "hostIP": "192.0.2.10",
           "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0,
                                  "image": "busybox", "imageID": "", "containerID": "containerd://x",
                                  "state": {"running": {"startedAt": "2020-01-01T00:00:00Z"}}}]}


def status_pod(name, resources=(), init_resources=None, **meta):
    containers = [{"name": f"c{i}", "image": "busybox", "resources": r}
                  for i, r in enumerate(resources or [{}])]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta},
           "spec": {"nodeName": "node-1", "containers": containers}, "status": RUNNING}
    if init_resources is not None:
        pod["spec"]["initContainers"] = [{"name": "init", "image": "busybox",
                                          "resources": init_resources}]
    return pod


def create_status_pod(server, name="p", **kw):
    code, pod = server.request("POST", PODS, status_pod(name, **kw))
    assert code == 201, pod
    return pod


CPU_MEM = {"cpu": "500m", "memory": "128Mi"}


@pytest.mark.parametrize("name,resources,init_resources,qos", [
    ("no requests or limits", [{}], None, "BestEffort"),
    ("only other resources", [{"limits": {"ephemeral-storage": "1Gi"}}], None, "BestEffort"),
    ("zero requests", [{"requests": {"cpu": "0", "memory": "0"}}], None, "BestEffort"),
    ("limits only: requests default to them", [{"limits": CPU_MEM}], None, "Guaranteed"),
    ("requests equal limits in another spelling",
     [{"requests": {"cpu": "0.5", "memory": "134217728"}, "limits": CPU_MEM}], None,
     "Guaranteed"),
    ("two containers, each with equal limits", [{"limits": CPU_MEM}, {"limits": CPU_MEM}], None,
     "Guaranteed"),
    ("init container too", [{"limits": CPU_MEM}], {"limits": CPU_MEM}, "Guaranteed"),
    ("requests below limits", [{"requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": CPU_MEM}], None, "Burstable"),
    ("a cpu request only", [{"requests": {"cpu": "100m"}}], None, "Burstable"),
    ("a memory limit only", [{"limits": {"memory": "128Mi"}}], None, "Burstable"),
    ("one container without limits", [{"limits": CPU_MEM}, {}], None, "Burstable"),
    ("an init container without limits", [{"limits": CPU_MEM}], {}, "Burstable"),
    ("an init container with a request only", [{"limits": CPU_MEM}], {"requests": {"cpu": "1"}},
     "Burstable"),
])
def test_pod_create_resets_the_status_to_pending_with_the_qos_class(server, name, resources,
                                                                      init_resources, qos):
    created = create_status_pod(server, resources=resources, init_resources=init_resources)
    assert created["status"] == {"phase": "Pending", "qosClass": qos}, name
    assert server.request("GET", f"{PODS}/p")[1]["status"] == created["status"]


def test_pod_create_defaults_requests_from_limits_and_refuses_a_bad_quantity(server):
    created = create_status_pod(server, resources=[{"limits": CPU_MEM,
                                                    "requests": {"cpu": "250m"}}])
    assert created["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "250m",
                                                                         "memory": "128Mi"}
    code, reply = server.request("POST", PODS, status_pod("bad", [{"limits": {"cpu": "lots"}}]))
    assert (code, reply["reason"]) == (400, "BadRequest")
    assert "quantities must match the regular expression" in reply["message"]


def test_pod_update_and_patch_keep_the_stored_status(server):
    created = create_status_pod(server)
    rv = created["metadata"]["resourceVersion"]
    sent = dict(created, status=RUNNING)
    code, same = server.request("PUT", f"{PODS}/p", sent)
    assert code == 200 and same["status"] == created["status"]
    sent["metadata"] = dict(created["metadata"], labels={"tier": "web"})
    code, updated = server.request("PUT", f"{PODS}/p", sent)
    assert code == 200 and updated["metadata"]["labels"] == {"tier": "web"}
    assert updated["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert int(updated["metadata"]["resourceVersion"]) > int(rv)
    for headers in (MERGE, STRATEGIC):
        code, patched = server.request("PATCH", f"{PODS}/p", {"status": RUNNING,
                                                              "metadata": {"labels": {"a": "b"}}},
                                       headers=headers)
        assert code == 200 and patched["metadata"]["labels"] == {"tier": "web", "a": "b"}
        assert patched["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
        code, patched = server.request("PATCH", f"{PODS}/p", {"status": None}, headers=headers)
        assert code == 200 and patched["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_status_subresource_update_changes_the_status_and_keeps_the_spec(server):
    created = create_status_pod(server, ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid"}])
    code, got = server.request("GET", f"{PODS}/p/status")
    assert code == 200 and got == created, "GET of the subresource is the whole pod"
    sent = dict(created, status=dict(RUNNING, qosClass="BestEffort"),
                spec=dict(created["spec"], nodeName="node-2", activeDeadlineSeconds=5))
    sent["metadata"] = dict(created["metadata"], labels={"tier": "web"}, ownerReferences=[])
    code, updated = server.request("PUT", f"{PODS}/p/status", sent)
    assert code == 200, updated
    assert (updated["kind"], updated["apiVersion"]) == ("Pod", "v1")
    assert updated["status"] == dict(RUNNING, qosClass="BestEffort",
                                     podIPs=[{"ip": RUNNING["podIP"]}])
    assert updated["spec"] == created["spec"]
    # Metadata follows, except the owner references (upstream keeps them from old kubelets).
    assert updated["metadata"]["labels"] == {"tier": "web"}
    assert updated["metadata"]["ownerReferences"] == created["metadata"]["ownerReferences"]
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert server.request("GET", f"{PODS}/p")[1] == updated
    code, again = server.request("PUT", f"{PODS}/p/status", updated)
    assert code == 200 and again == updated, "a no-op status write keeps the resourceVersion"
    stale = dict(updated, status=dict(updated["status"], phase="Succeeded"))
    stale["metadata"] = dict(updated["metadata"], resourceVersion=created["metadata"][
        "resourceVersion"])
    code, reply = server.request("PUT", f"{PODS}/p/status", stale)
    assert (code, reply["reason"]) == (409, "Conflict")
    code, reply = server.request("PUT", f"{PODS}/p/status", dict(updated, metadata={"name": "q"}))
    assert (code, reply["reason"]) == (400, "BadRequest")


@pytest.mark.parametrize("headers", [MERGE, STRATEGIC], ids=["merge", "strategic-merge"])
def test_status_subresource_patch_changes_the_status_and_ignores_the_spec(server, headers):
    created = create_status_pod(server)
    code, patched = server.request("PATCH", f"{PODS}/p/status", {
        "status": {"phase": "Running", "podIP": "10.9.8.7"},
        "spec": {"nodeName": "node-2", "containers": []}}, headers=headers)
    assert code == 200, patched
    assert patched["kind"] == "Pod"
    assert patched["status"] == {"phase": "Running", "qosClass": "BestEffort",
                                 "podIP": "10.9.8.7", "podIPs": [{"ip": "10.9.8.7"}]}
    assert patched["spec"] == created["spec"]
    code, patched = server.request("PATCH", f"{PODS}/p/status",
                                   {"status": {"podIPs": [{"ip": "fd00::7"}], "podIP": None}},
                                   headers=headers)
    assert code == 200 and patched["status"]["podIP"] == "fd00::7"
    rv = patched["metadata"]["resourceVersion"]
    code, same = server.request("PATCH", f"{PODS}/p/status", {"status": {"phase": "Running"}},
                                headers=headers)
    assert code == 200 and same["metadata"]["resourceVersion"] == rv
    code, reply = server.request("PATCH", f"{PODS}/p/status", {"status": {"phase": "Failed"}},
                                 headers={"Content-Type": "application/json"})
    assert code == 415


# The messages are kube-apiserver 1.20.2's own.
@pytest.mark.parametrize("status,field,message", [
    ({"podIP": "not-an-ip"}, "status.podIPs[0]",
     'Invalid value: "not-an-ip": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'),
    ({"podIPs": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}, "status.podIPs",
     'Invalid value: []core.PodIP{core.PodIP{IP:"10.0.0.1"}, core.PodIP{IP:"10.0.0.2"}}: may '
     "specify no more than one IP for each IP family"),
])
def test_status_subresource_validates_pod_ips(server, status, field, message):
    create_status_pod(server)
    code, reply = server.request("PATCH", f"{PODS}/p/status", {"status": status}, headers=MERGE)
    assert (code, reply["reason"]) == (422, "Invalid")
    assert reply["details"]["causes"][0]["field"] == field
    assert reply["message"] == f'Pod "p" is invalid: {field}: {message}'


def test_status_subresource_of_a_missing_pod_and_of_what_has_none(server):
    for method, body, headers in (("GET", None, None), ("PUT", status_pod("gone"), None),
                                  ("PATCH", {"status": {"phase": "Running"}}, MERGE)):
        code, reply = server.request(method, f"{PODS}/gone/status", body, headers=headers)
        assert (code, reply["message"]) == (404, 'pods "gone" not found'), method
        assert reply["details"] == {"name": "gone", "kind": "pods"}
    assert server.request("GET", f"{PODS}")[1]["items"] == [], "a status write creates nothing"
    create_status_pod(server)
    create_cm(server, "c")
    for path in (f"{CM}/c/status", f"{PODS}/p/scale", f"{PODS}/p/status/more"):
        assert server.request("GET", path)[0] == 404, path
    for method in ("POST", "DELETE"):
        code, reply = server.request(method, f"{PODS}/p/status", status_pod("p"))
        assert (code, reply["reason"]) == (405, "MethodNotAllowed"), method
    resources = {r["name"]: r for r in server.request("GET", "/api/v1")[1]["resources"]}
    assert resources["pods/status"]["kind"] == "Pod"
    assert sorted(resources["pods/status"]["verbs"]) == ["get", "patch", "update"]


def test_status_writes_are_modified_events_of_the_pod(server):
    created = create_status_pod(server)
    rv = created["metadata"]["resourceVersion"]
    running = set_pod_status(server, "default", "p", {"phase": "Running", "podIP": "10.0.0.9"})
    set_pod_status(server, "default", "p", {"phase": "Running"})  # no change: no event
    status, events, _, _ = server.watch_events(
        f"{PODS}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    assert status == 200
    assert [e["type"] for e in events] == ["MODIFIED"]
    assert events[0]["object"] == running
    assert int(running["metadata"]["resourceVersion"]) == int(rv) + 1


def test_status_subresource_dry_run_stores_nothing(server):
    create_status_pod(server)
    before = server.admin("GET", "state")["revision"]
    code, reply = server.request("PATCH", f"{PODS}/p/status?dryRun=All",
                                 {"status": {"phase": "Running"}}, headers=MERGE)
    assert code == 200 and reply["status"]["phase"] == "Running"
    assert server.admin("GET", "state")["revision"] == before
    assert server.request("GET", f"{PODS}/p")[1]["status"]["phase"] == "Pending"


def test_acl_names_the_status_subresource_as_rbac_does(server):
    user = "system:serviceaccount:kube-system:status-writer"
    server.admin("POST", "tokens", {"token": "writer", "user": user})
    server.admin("POST", "acl", {"user": user, "rules": [
        {"verbs": ["get", "update", "patch"], "resources": ["pods"]}]})
    create_status_pod(server)
    code, reply = server.request("PATCH", f"{PODS}/p/status", {"status": {"phase": "Running"}},
                                 token="writer", headers=MERGE)
    assert code == 403
    assert reply["message"] == (f'pods "p" is forbidden: User "{user}" cannot patch resource '
                                '"pods/status" in API group "" in the namespace "default"')
    assert reply["details"] == {"name": "p", "kind": "pods"}
    for resources in (["pods/status"], ["*/status"], ["*"]):
        server.admin("POST", "acl", {"user": user, "rules": [
            {"verbs": ["patch"], "resources": resources}]})
        code, _ = server.request("PATCH", f"{PODS}/p/status", {"status": {"phase": "Running"}},
                                 token="writer", headers=MERGE)
        assert code == 200, resources
        assert server.request("PATCH", f"{PODS}/p", {"metadata": {"labels": {"a": "b"}}},
                              token="writer", headers=MERGE)[0] == (
            200 if resources == ["*"] else 403), resources


# ---- per-client counters (admin) ----------------------------------------------------------------

def _exchange_counted(server, request_bytes):
    """One request on its own connection; returns every byte the client read back."""
    sock = server.connect()
    try:
        sock.sendall(request_bytes)
        received = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                return received
            received += piece
    finally:
        sock.close()


def test_client_counters_count_each_users_requests_bytes_watches_and_events(server):
    server.admin("POST", "tokens", {"token": "node-token", "user": "system:node:n1"})
    create_cm(server, "counted")  # as test-admin
    server.admin("DELETE", "clients")
    get = (f"GET {CM}/counted HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer node-token\r\n"
           "Connection: close\r\n\r\n").encode()
    answer = _exchange_counted(server, get)
    assert b"200 OK" in answer.split(b"\r\n")[0]
    node = server.admin("GET", "clients")["clients"]["system:node:n1"]
    assert node["requests"] == {"get": 1} and node["codes"] == {"200": 1}
    assert (node["bytes_in"], node["bytes_out"]) == (len(get), len(answer))
    assert (node["connections_total"], node["connections_open"]) == (1, 0)

    # A watch of one object: open while it lasts, its events by type, every byte of the stream.
    rv = server.request("GET", f"{CM}/counted")[1]["metadata"]["resourceVersion"]
    watch = (f"GET {CM}?watch=true&fieldSelector=metadata.name%3Dcounted&resourceVersion={rv}"
             f"&timeoutSeconds=3 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer node-token\r\n"
             "Connection: close\r\n\r\n").encode()
    result = {}
    reader = threading.Thread(
        target=lambda: result.update(data=_exchange_counted(server, watch)))
    reader.start()
    deadline = time.monotonic() + 30
    while server.admin("GET", "clients")["clients"]["system:node:n1"]["watches_open"] != 1:
        assert time.monotonic() < deadline, "the watch never opened"
        time.sleep(0.05)
    obj = server.request("GET", f"{CM}/counted")[1]
    obj["data"] = {"a": "2"}
    assert server.request("PUT", f"{CM}/counted", obj)[0] == 200
    reader.join(timeout=60)
    node = server.admin("GET", "clients")["clients"]["system:node:n1"]
    assert node["requests"] == {"get": 1, "watch": 1}
    assert (node["watches_total"], node["watches_open"]) == (1, 0)
    assert node["watch_events"] == {"MODIFIED": 1}
    assert node["bytes_in"] == len(get) + len(watch)
    assert node["bytes_out"] == len(answer) + len(result["data"])
    # The admin user's own requests are its own; admin traffic counts for nobody.
    admin = server.admin("GET", "clients")["clients"]["test-admin"]
    assert admin["requests"] == {"get": 2, "update": 1}

    # A reset zeroes what was counted, not what is open.
    server.admin("DELETE", "clients")
    node = server.admin("GET", "clients")["clients"]["system:node:n1"]
    assert node["requests"] == {} and node["bytes_out"] == 0 and node["watch_events"] == {}
