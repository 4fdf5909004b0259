"""The HTTPS front end: HTTP/1.1 over asyncio streams, authentication, RBAC-like allow-lists,
discovery, list/get/watch/create/update/patch/delete, fault injection and the admin endpoint.

HTTP/1.1 is written by hand (no http.server) so the test controls every byte: chunk boundaries,
cuts in the middle of an event, stalls. One asyncio loop serves everything; no threads.
"""

import asyncio
import base64
import binascii
import copy
import gzip
import json
import os
import random
import ssl
import subprocess
import time
import urllib.parse
import uuid

from . import pki
from . import status as st
from .faults import FaultTable
from .node_authorizer import NodeAuthorizer, node_name
from .resources import RESOURCES, check_body_kind
from .selectors import FieldSelector, LabelSelector
from .store import Store, Watcher
from .tokens import TokenIssuer

MAX_BODY = 3 << 20
GZIP_MIN = 128 << 10

VERSION_INFO = {"major": "1", "minor": "36", "gitVersion": "v1.36.3",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean", "buildDate": "2026-07-01T00:00:00Z",
                "goVersion": "go1.25", "compiler": "gc", "platform": "linux/amd64"}

DEFAULT_SETTINGS = {
    "bookmark_period": 60.0,          # seconds between bookmarks on watches that asked for them
    "watch_timeout_min": 1800.0,      # default watch length when timeoutSeconds is absent ...
    "watch_timeout_max": 3600.0,      # ... drawn uniformly from [min, max]
    "chunk_mode": "event",            # event: one chunk per event; split: chunk_size pieces;
    "chunk_size": 7,                  # batch: every event ready at once in one chunk
    "expired_watch_mode": "event",    # 410 on watch: "event" (200 + ERROR) or "status" (HTTP 410)
    "expired_reason": "Expired",      # or "Gone" (servers <= 1.17) or "" (no reason)
    "too_large_wait": 3.0,            # seconds a get/list at a future RV waits before its 504
    "history_max_events": 100000,
    "history_max_age": 300.0,
    # TokenRequest's cap on spec.expirationSeconds (kube-apiserver's
    # --service-account-max-token-expiration; 0: none): a few seconds renews tokens in a test.
    "token_max_expiration_seconds": 0,
}


class Request:
    def __init__(self, method, target, headers, body):
        self.method = method
        self.target = target
        parts = urllib.parse.urlsplit(target)
        self.path = urllib.parse.unquote(parts.path)
        self.query = {k: v[-1] for k, v in
                      urllib.parse.parse_qs(parts.query, keep_blank_values=True).items()}
        self.headers = headers
        self.body = body
        self.user = None
        self.groups = []


class ClientCounters:
    """What one client (an authenticated user) cost the server since the last reset: what a cost
    model needs (connections, requests by verb, watches, watch events, bytes both ways).

    Bytes are HTTP/1.1 bytes as the server reads and writes them (heads, bodies, chunk framing),
    without TLS; a connection belongs to the user of its first authenticated request, and every
    byte on it (the bytes read before that request's authentication included) counts for that
    user. Admin requests count for nobody."""

    def __init__(self):
        self.connections_open = 0
        self.watches_open = 0
        self.reset()

    def reset(self):
        self.connections_total = 0
        self.requests = {}        # verb (get, list, watch, create, ..., discovery) -> count
        self.codes = {}           # HTTP status (as a string) -> count; watches count their 200
        self.watches_total = 0
        self.watch_events = {}    # event type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) -> count
        self.bytes_in = 0
        self.bytes_out = 0

    def as_dict(self):
        return {"connections_open": self.connections_open,
                "connections_total": self.connections_total,
                "requests": dict(self.requests), "codes": dict(self.codes),
                "watches_open": self.watches_open, "watches_total": self.watches_total,
                "watch_events": dict(self.watch_events),
                "bytes_in": self.bytes_in, "bytes_out": self.bytes_out}


class _CountingWriter:
    """The connection's StreamWriter, counting what is written (for ClientCounters)."""

    def __init__(self, writer, conn):
        self._writer = writer
        self._conn = conn

    def write(self, data):
        self._conn.count_out(len(data))
        self._writer.write(data)

    def __getattr__(self, name):
        return getattr(self._writer, name)


class Connection:
    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = _CountingWriter(writer, self)
        self.cert_user = None
        self.cert_groups = []      # the client certificate's O values
        self.cert_validity = None  # (notBefore, notAfter) in seconds since the epoch
        self.cert_serial = None
        self.client = None         # ClientCounters of the user, once known
        self.pending_in = 0        # bytes counted before the user was known
        self.pending_out = 0
        ssl_object = writer.get_extra_info("ssl_object")
        cert = ssl_object.getpeercert() if ssl_object else None
        if cert:
            for rdn in cert.get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        self.cert_user = value
                    elif key == "organizationName":
                        self.cert_groups.append(value)
            self.cert_validity = (ssl.cert_time_to_seconds(cert["notBefore"]),
                                  ssl.cert_time_to_seconds(cert["notAfter"]))
            self.cert_serial = pki.serial_text(cert.get("serialNumber", ""))

    def count_in(self, n):
        if self.client is not None:
            self.client.bytes_in += n
        else:
            self.pending_in += n

    def count_out(self, n):
        if self.client is not None:
            self.client.bytes_out += n
        else:
            self.pending_out += n

    def attribute(self, client):
        """The connection's first authenticated request names its client."""
        if self.client is not None:
            return
        self.client = client
        client.connections_open += 1
        client.connections_total += 1
        client.bytes_in += self.pending_in
        client.bytes_out += self.pending_out
        self.pending_in = self.pending_out = 0

    async def read_request(self):
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return None
        self.count_in(len(head))
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
        body = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await self.reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                self.count_in(len(size_line) + len(chunk))
                if size == 0:
                    break
                body += chunk[:-2]
                if len(body) > MAX_BODY:
                    break
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length > MAX_BODY:
                # Read and drop it, so the client sees the 413 rather than a reset.
                while length > 0:
                    dropped = len(await self.reader.readexactly(min(length, 1 << 16)))
                    self.count_in(dropped)
                    length -= dropped
                return Request(method, target, headers, None)
            body = await self.reader.readexactly(length)
            self.count_in(length)
        return Request(method, target, headers, body)

    async def send(self, code, body, content_type="application/json", headers=None,
                   request=None, keep_alive=True):
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":")).encode()
        elif isinstance(body, str):
            body = body.encode()
        if (request is not None and len(body) > GZIP_MIN
                and "gzip" in request.headers.get("accept-encoding", "")):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        reason = {200: "OK", 201: "Created"}.get(code, "Status")
        out = [f"HTTP/1.1 {code} {reason}", f"Content-Type: {content_type}",
               f"Content-Length: {len(body)}", "Cache-Control: no-cache, private",
               f"Audit-Id: {uuid.uuid4()}",
               f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime())}"]
        out += [f"{k}: {v}" for k, v in headers.items()]
        if not keep_alive:
            out.append("Connection: close")
        self.writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + body)
        await self.writer.drain()


class WatchStream:
    """Writes one watch response: chunked transfer, events as JSON lines, the watch faults."""

    def __init__(self, conn, settings, fault):
        self.conn = conn
        self.settings = settings
        self.watch_fault = (fault.watch if fault else {}) or {}
        self.events_sent = 0
        self.bytes_sent = 0
        self.cut = False
        self.injections = sorted(self.watch_fault.get("inject", []), key=lambda i: i["after"])

    async def start(self):
        self.conn.writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               b"Transfer-Encoding: chunked\r\nCache-Control: no-cache, private\r\n"
                               + f"Audit-Id: {uuid.uuid4()}\r\n\r\n".encode())
        await self.conn.writer.drain()

    async def _chunk(self, data):
        self.conn.writer.write(b"%x\r\n" % len(data) + data + b"\r\n")
        await self.conn.writer.drain()

    async def _write(self, data):
        limit = self.watch_fault.get("close_after_bytes")
        if limit is not None and self.bytes_sent + len(data) >= limit:
            data = data[:max(0, limit - self.bytes_sent)]
            self.cut = True
        self.bytes_sent += len(data)
        if data:
            if self.settings["chunk_mode"] == "split":
                size = max(1, int(self.settings["chunk_size"]))
                for i in range(0, len(data), size):
                    await self._chunk(data[i:i + size])
            else:
                await self._chunk(data)
        if self.cut:
            self.conn.writer.transport.abort()

    def _injection_lines(self, kind_name, api_version, namespace, rev):
        out = []
        while self.injections and self.injections[0]["after"] <= self.events_sent:
            inj = self.injections.pop(0)
            kind = inj["kind"]
            meta = {"name": "injected", "namespace": namespace or "default",
                    "resourceVersion": str(rev)}
            if kind == "invalid_json":
                out.append(b'{"type":"MODIFIED","object":{"metadata":]}\n')
            elif kind == "unknown_type":
                out.append(_line({"type": "SURPRISE", "object": {
                    "kind": kind_name, "apiVersion": api_version, "metadata": meta}}))
            elif kind == "wrong_kind":
                out.append(_line({"type": "MODIFIED", "object": {
                    "kind": "Banana", "apiVersion": "fruit/v1", "metadata": meta}}))
            elif kind == "non_object":
                out.append(_line({"type": "MODIFIED", "object": "not an object"}))
            elif kind == "oversized":
                out.append(_line({"type": "MODIFIED", "object": {
                    "kind": kind_name, "apiVersion": api_version, "metadata": meta,
                    "data": {"big": "x" * int(inj.get("size", 17 << 20))}}}))
            elif kind == "raw":
                out.append(inj["line"].encode("utf-8", "surrogateescape") + b"\n")
            elif kind == "error":
                code = int(inj.get("code", 410))
                out.append(_line({"type": "ERROR", "object": st.status_body(
                    code, inj.get("reason", st.REASON_BY_CODE.get(code, "InternalError")),
                    inj.get("message", f"injected error {code}"))}))
                out.append(None)  # the server ends the stream after an ERROR
        return out

    async def send_events(self, lines, kind_name, api_version, namespace, rev):
        """Sends complete event lines (bytes). Returns False when the stream must end."""
        batch = []
        for line in lines:
            for injected in self._injection_lines(kind_name, api_version, namespace, rev):
                if injected is None:
                    await self._flush(batch)
                    return False
                batch.append(injected)
            batch.append(line)
            self.events_sent += 1
            self._count_event(line)
            if self.settings["chunk_mode"] != "batch":
                if not await self._flush(batch):
                    return False
                batch = []
            limit = self.watch_fault.get("close_after_events")
            if limit is not None and self.events_sent >= limit:
                await self._flush(batch)
                return False
        for injected in self._injection_lines(kind_name, api_version, namespace, rev):
            if injected is None:
                await self._flush(batch)
                return False
            batch.append(injected)
        return await self._flush(batch)

    def _count_event(self, line):
        client = self.conn.client
        if client is None:
            return
        # Lines are written by _line (compact JSON, "type" first): {"type":"MODIFIED",...
        end = line.find(b'"', 9)
        etype = line[9:end].decode("latin-1") if line.startswith(b'{"type":"') and end > 0 \
            else "other"
        client.watch_events[etype] = client.watch_events.get(etype, 0) + 1

    async def _flush(self, batch):
        if batch and not self.cut:
            await self._write(b"".join(batch))
        return not self.cut

    async def finish(self):
        if self.cut:
            return
        if self.watch_fault.get("abort"):
            self.conn.writer.transport.abort()
            self.cut = True
            return
        self.conn.writer.write(b"0\r\n\r\n")
        await self.conn.writer.drain()


def _line(event):
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _parse_bool(value):
    """Go's strconv.ParseBool, which kube-apiserver uses for query flags (the Python client
    sends `watch=True`)."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def _dry_run(query):
    """dryRun=All: authorized and admitted as the write, nothing stored (the only value
    kube-apiserver accepts besides none)."""
    value = query.get("dryRun")
    if value in (None, ""):
        return False
    if value != "All":
        raise st.bad_request(f'Invalid dry run value: "{value}"')
    return True


def _is_watch(query):
    return _parse_bool(query.get("watch"))


def _parse_rv(value):
    if value is None or value == "":
        return None
    if not value.isdigit():
        raise st.bad_request(f'resourceVersion: Invalid value: "{value}": must be a '
                             "non-negative integer")
    return int(value)


def _encode_continue(rev, key):
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rev, "start": list(key)}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token):
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        return int(data["rv"]), tuple(data["start"])
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise st.bad_request("continue key is not valid: incorrect encoded start "
                             "resourceVersion (version meta.k8s.io/v1)") from None


class ApiServer:
    def __init__(self, token, path_prefix="", initial_revision=100):
        self.store = Store(initial_revision)
        self.faults = FaultTable()
        self.settings = dict(DEFAULT_SETTINGS)
        self.tokens = {token: "test-admin"} if token else {}
        self.main_token = token
        self.acl = {}
        self.token_groups = {}     # token -> groups (/_admin/tokens); none: no groups
        self.node_authorizer = NodeAuthorizer(self.store)
        self.token_issuer = TokenIssuer(self.store, self.settings)
        self.path_prefix = path_prefix.rstrip("/")
        self.requests = []
        self.connections_total = 0
        self.connections_open = 0
        self.watches_open = 0
        self.clients = {}          # user -> ClientCounters
        self.clock_offset = 0.0    # seconds added to the clock client certificates are checked at
        self.pki_dir = None        # the CA's directory (issue-client-cert)
        self.outage = False        # /_admin/outage: every API request reset, none answered
        self.open_connections = set()

    def client_counters(self, user):
        counters = self.clients.get(user)
        if counters is None:
            counters = self.clients[user] = ClientCounters()
        return counters

    def apply_settings(self, values):
        for key, value in values.items():
            if key not in DEFAULT_SETTINGS:
                raise st.bad_request(f"unknown setting {key}")
            self.settings[key] = value
        self.store.max_history_events = int(self.settings["history_max_events"])
        self.store.max_history_age = float(self.settings["history_max_age"])
        self.store.trim_history()

    # ---- connection loop ---------------------------------------------------------------------

    async def handle_connection(self, reader, writer):
        self.connections_total += 1
        self.connections_open += 1
        conn = Connection(reader, writer)
        self.open_connections.add(conn)
        try:
            while True:
                request = await conn.read_request()
                if request is None:
                    break
                if not await self.dispatch(conn, request):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
            pass
        finally:
            self.open_connections.discard(conn)
            self.connections_open -= 1
            if conn.client is not None:
                conn.client.connections_open -= 1
            try:
                writer.close()
            except (ConnectionError, OSError, RuntimeError):
                pass

    async def dispatch(self, conn, request):
        """Answers one request; returns whether the connection stays open."""
        record = {"method": request.method, "path": request.path, "query": request.query,
                  "user_agent": request.headers.get("user-agent", ""),
                  "accept_encoding": request.headers.get("accept-encoding", ""),
                  "content_type": request.headers.get("content-type", ""),
                  "accept": request.headers.get("accept", ""),
                  "time": time.time()}
        self.requests.append(record)
        del self.requests[:-2000]
        keep_alive = request.headers.get("connection", "").lower() != "close"
        try:
            if request.body is None:
                raise st.ApiError(413, "Request entity too large: limit is 3145728",
                                  "RequestEntityTooLarge")
            path = request.path
            if self.path_prefix:
                if not path.startswith(self.path_prefix + "/") and path != self.path_prefix:
                    raise st.ApiError(404, "the server could not find the requested resource")
                path = path[len(self.path_prefix):] or "/"
            if path.startswith("/_admin/"):
                code, body = self.admin(request, path[len("/_admin/"):], conn)
                await conn.send(code, body, keep_alive=keep_alive)
                if conn.client is None:  # admin traffic costs no client anything
                    conn.pending_in = conn.pending_out = 0
                return keep_alive
            if self.outage:
                # As a server that went away: no answer of any kind, discovery included.
                record["reset"] = record["outage"] = True
                conn.writer.transport.abort()
                return False
            if conn.cert_serial:
                record["cert_serial"] = conn.cert_serial
            request.user = self.authenticate(conn, request)
            request.groups = self.groups_of(conn, request)
            record["user"] = request.user
            conn.attribute(self.client_counters(request.user))
            result = await self.route(conn, request, path)
            if result is None:  # a watch wrote its own response
                self._count_code(conn, 200)
                return False if conn.writer.transport.is_closing() else keep_alive
            code, body = result
            record["code"] = code
            self._count_code(conn, code)
            await conn.send(code, body, request=request, keep_alive=keep_alive)
        except st.ApiError as err:
            record["code"] = err.code
            self._count_code(conn, err.code)
            await conn.send(err.code, err.body(), headers=err.headers, request=request,
                            keep_alive=keep_alive)
            return keep_alive
        except _ConnectionReset:
            record["reset"] = True
            return False
        except _RawResponse as raw:
            record["code"] = raw.code
            self._count_code(conn, raw.code)
            await conn.send(raw.code, raw.body, raw.content_type, raw.headers,
                            keep_alive=keep_alive)
        return keep_alive

    @staticmethod
    def _count_code(conn, code):
        if conn.client is not None:
            conn.client.codes[str(code)] = conn.client.codes.get(str(code), 0) + 1

    # ---- auth --------------------------------------------------------------------------------

    def authenticate(self, conn, request):
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):].strip()
            user = self.tokens.get(token)
            if user:
                return user
            account = self.token_issuer.authenticate(token)
            if account is not None:
                return account[0]
            raise st.ApiError(401, "Unauthorized", "Unauthorized")
        if conn.cert_user:
            self.check_cert_validity(conn)
            return conn.cert_user
        raise st.ApiError(401, "Unauthorized", "Unauthorized")

    def groups_of(self, conn, request):
        """The authenticated user's groups: the token's (as /_admin/tokens set them) or the
        client certificate's O values; every user is also in system:authenticated."""
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):].strip()
            groups = list(self.token_groups.get(token, ()))
            if token not in self.tokens:
                account = self.token_issuer.authenticate(token)
                groups = list(account[1]) if account is not None else []
        else:
            groups = list(conn.cert_groups)
        return groups + ["system:authenticated"]

    def authorize(self, user, verb, res, namespace, name, groups=(), field_selector=None,
                  subresource=None):
        """A node identity goes to the Node authorizer first, then (as `Node,RBAC`) to the user's
        ACL when one is set; any other user to its ACL (none set: everything allowed). A
        subresource is its own resource to both, as to RBAC (`pods/status`)."""
        node = node_name(user, groups)
        if node is not None:
            decision = self.node_authorizer.authorize(
                node, verb, res, namespace, name, field_selector or FieldSelector(res.name, ""),
                subresource)
            if decision.allowed:
                return
            if user not in self.acl or not self._acl_allows(user, verb, res, namespace, name,
                                                            subresource):
                raise st.forbidden(user, verb, res.name, res.group, namespace, name,
                                   decision.reason, subresource)
            return
        if user not in self.acl:
            return
        if not self._acl_allows(user, verb, res, namespace, name, subresource):
            raise st.forbidden(user, verb, res.name, res.group, namespace, name,
                               subresource=subresource)

    def admit_node_write(self, request, verb, res, namespace, name, body, subresource=None,
                         old=None):
        """NodeRestriction for a node identity's writes (no-op for anyone else); `old` is the
        stored object a write of a subresource changes."""
        node = node_name(request.user, request.groups)
        if node is not None:
            self.node_authorizer.admit(node, verb, res, namespace, name, body, subresource, old)

    def check_cert_validity(self, conn):
        """kube-apiserver's x509 authenticator verifies the client certificate on every request,
        at the request's time (a connection outlives its certificate): outside its validity
        period it is 401 Unauthorized. The clock is the server's plus `clock_offset`."""
        not_before, not_after = conn.cert_validity
        now = time.time() + self.clock_offset
        if now < not_before or now > not_after:
            raise st.ApiError(401, "Unauthorized", "Unauthorized")

    def _acl_allows(self, user, verb, res, namespace, name, subresource=None):
        """Whether the user's rules allow the request. As RBAC's rules: a subresource is named
        `pods/status` (or `*/status`), never matched by its resource's name; `*` matches all."""
        rules = self.acl.get(user)
        if rules is None:
            return True
        wanted = f"{res.name}/{subresource}" if subresource else res.name
        for rule in rules:
            if verb not in rule.get("verbs", []) and "*" not in rule.get("verbs", []):
                continue
            resources = rule.get("resources", [])
            if wanted not in resources and "*" not in resources and not (
                    subresource and f"*/{subresource}" in resources):
                continue
            if rule.get("namespaces") and namespace not in rule["namespaces"]:
                continue
            if rule.get("names") and name not in rule["names"]:
                continue
            return True
        return False

    # ---- routing -----------------------------------------------------------------------------

    async def route(self, conn, request, path):
        parts = [p for p in path.split("/") if p]
        if request.method == "GET":
            discovery = self.discovery(parts)
            if discovery is not None:
                self._count_verb(conn, "discovery")
                return 200, discovery
        if parts == ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"]:
            return self.self_subject_review(conn, request)
        if parts == ["apis", "authentication.k8s.io", "v1", "tokenreviews"]:
            return self.token_review(conn, request)
        if parts == ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"]:
            return self.self_subject_access_review(conn, request)
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            group, rest = "", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis" and parts[1] == "coordination.k8s.io" \
                and parts[2] == "v1":
            group, rest = "coordination.k8s.io", parts[3:]
        else:
            raise st.ApiError(404, "the server could not find the requested resource")
        namespace = None
        if len(rest) >= 2 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3 or rest[0] not in RESOURCES \
                or RESOURCES[rest[0]].group != group:
            raise st.ApiError(404, "the server could not find the requested resource")
        res = RESOURCES[rest[0]]
        name = rest[1] if len(rest) >= 2 else None
        subresource = rest[2] if len(rest) == 3 else None
        if (res.namespaced and name is not None and namespace is None) or (
                not res.namespaced and namespace is not None) or (
                subresource is not None and subresource not in res.subresources):
            raise st.ApiError(404, "the server could not find the requested resource")

        method = request.method
        if subresource is not None:
            verb = {"GET": "get", "PUT": "update", "PATCH": "patch",
                    "POST": "create"}.get(method)
            if verb not in res.subresources[subresource]:
                verb = None
            if verb is None:
                raise st.ApiError(405, "the server does not allow this method on the requested "
                                  "resource", "MethodNotAllowed")
        elif method == "GET":
            verb = "get" if name else ("watch" if _is_watch(request.query) else "list")
        elif method == "POST" and not name:
            verb = "create"
        elif method == "PUT" and name:
            verb = "update"
        elif method == "PATCH" and name:
            verb = "patch"
        elif method == "DELETE" and name:
            verb = "delete"
        else:
            raise st.ApiError(405, f"the server does not allow this method on the requested "
                              f"resource", "MethodNotAllowed")
        if res.namespaced and namespace is None and verb not in ("list", "watch"):
            raise st.ApiError(404, "the server could not find the requested resource")
        self._count_verb(conn, verb)

        field_selector = FieldSelector(res.name, request.query.get("fieldSelector"))
        label_selector = LabelSelector(request.query.get("labelSelector"))
        auth_name = name if name else field_selector.exact_name()
        self.authorize(request.user, verb, res, namespace, auth_name, request.groups,
                       field_selector, subresource)

        fault = self.faults.take(verb, f"{res.name}/{subresource}" if subresource else res.name,
                                 namespace, path, request.query, request.user)
        if fault is not None:
            if fault.compact:
                # As if another resource had been written and then compacted: everything up to
                # now, including the current revision, is gone.
                self.store.revision += 1
                self.store.compact()
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.reset:
                conn.writer.transport.abort()
                raise _ConnectionReset()
            if fault.status:
                self.raise_fault_status(fault, res, name)

        if res.name == "serviceaccounts" and subresource == "token":
            body = self._json_body(request)
            return 201, self.token_issuer.create(node_name(request.user, request.groups),
                                                 namespace, name, body)
        if verb == "get":
            await self.wait_for_revision(request.query.get("resourceVersion"))
            return 200, self.store.get(res.name, namespace, name)
        if subresource is not None:
            return 200, self.write_subresource(request, verb, res, namespace, name, subresource)
        if verb == "list":
            return 200, await self.list(res, namespace, request.query, field_selector,
                                        label_selector)
        if verb == "watch":
            await self.watch(conn, res, namespace, request.query, field_selector,
                             label_selector, fault)
            return None
        if verb == "delete":
            self.admit_node_write(request, verb, res, namespace, name, None)
            return self.delete(request, res, namespace, name)
        if verb == "patch":
            if _dry_run(request.query):
                return 200, self.dry_run_patch(request, res, namespace, name)
            return 200, self.patch(request, res, namespace, name)
        body = self.decode_body(request, res)
        self.admit_node_write(request, verb, res, namespace, name, body)
        if verb == "create" and _dry_run(request.query):
            return 201, self.dry_run_create(res, self._create_namespace(res, namespace), body)
        if verb == "update" and _dry_run(request.query):
            return self.dry_run_update(res, namespace, name, body)
        if verb == "create":
            return 201, self.store.create(res.name, self._create_namespace(res, namespace), body)
        if verb == "update":
            if body["metadata"].get("name") and body["metadata"]["name"] != name:
                raise st.bad_request("the name of the object (%s) does not match the name on "
                                     "the URL (%s)" % (body["metadata"]["name"], name))
            body["metadata"]["name"] = name
            obj, created = self.store.update(res.name, namespace, name, body,
                                             allow_create=res.name == "leases")
            return (201 if created else 200), obj
        raise AssertionError(verb)

    @staticmethod
    def _create_namespace(res, namespace):
        """A create's namespace: the URL's, "default" when it names none, none for a
        cluster-scoped resource (nodes)."""
        return (namespace or "default") if res.namespaced else None

    def _json_body(self, request):
        media = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if media not in ("application/json", "*/*", ""):
            raise st.ApiError(415, 'the body of the request was in an unknown format - accepted '
                              'media types include: application/json, application/yaml',
                              "UnsupportedMediaType")
        try:
            return json.loads(request.body or b"null")
        except ValueError:
            raise st.bad_request("the body of the request was in an unknown format") from None

    def token_review(self, conn, request):
        """POST /apis/authentication.k8s.io/v1/tokenreviews (tokens.py). Authorized as
        `create` of `tokenreviews` (cluster scope): a node may not; a user with an ACL needs a
        rule for it."""
        if request.method != "POST":
            raise st.ApiError(405, "the server does not allow this method on the requested "
                              "resource", "MethodNotAllowed")
        self._count_verb(conn, "create")
        node = node_name(request.user, request.groups)
        if node is not None or (request.user in self.acl and not self._acl_allows(
                request.user, "create", _TokenReviews, None, None)):
            raise st.forbidden(request.user, "create", "tokenreviews", "authentication.k8s.io",
                               None, None)
        return 201, self.token_issuer.review(self._json_body(request))

    def self_subject_access_review(self, conn, request):
        """POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews: whether the caller may
        do what `spec.resourceAttributes` says (any authenticated user may ask), decided by the
        same authorizers as its requests: the Node authorizer, then the ACL (none: allowed).
        `*` as verb or resource is allowed only by a rule saying `*`, as RBAC's."""
        if request.method != "POST":
            raise st.ApiError(405, "the server does not allow this method on the requested "
                              "resource", "MethodNotAllowed")
        self._count_verb(conn, "create")
        body = self._json_body(request)
        attrs = ((body or {}).get("spec") or {}).get("resourceAttributes") \
            if isinstance(body, dict) else None
        if not isinstance(attrs, dict) or not attrs.get("verb") or not attrs.get("resource"):
            raise st.invalid("SelfSubjectAccessReview", "authorization.k8s.io", "", [
                ("spec.resourceAttributes", "Required value: exactly one of nonResourceAttributes "
                 "or resourceAttributes must be specified", "FieldValueRequired")])
        group = attrs.get("group", "")
        resource = RESOURCES.get(attrs["resource"])
        if resource is None or resource.group != group:
            resource = _Reviewed(attrs["resource"], group)
        allowed, reason = True, ""
        try:
            self.authorize(request.user, attrs["verb"], resource, attrs.get("namespace") or None,
                           attrs.get("name") or None, request.groups)
        except st.ApiError as err:
            allowed, reason = False, err.message
        status = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return 201, {"kind": "SelfSubjectAccessReview",
                     "apiVersion": "authorization.k8s.io/v1",
                     "metadata": {"creationTimestamp": None},
                     "spec": body["spec"], "status": status}

    def self_subject_review(self, conn, request):
        """POST /apis/authentication.k8s.io/v1/selfsubjectreviews: who the caller is (GA in
        Kubernetes 1.28; any authenticated user may ask)."""
        if request.method != "POST":
            raise st.ApiError(405, "the server does not allow this method on the requested "
                              "resource", "MethodNotAllowed")
        self._count_verb(conn, "create")
        # Only rules naming this resource apply (a test's catch-all rules are for the resources
        # the daemon reads): e.g. {"resource": "selfsubjectreviews", "status": 404} stands for a
        # server older than 1.28.
        for rule in self.faults.rules:
            if rule.resource == "selfsubjectreviews" and rule.matches(
                    "create", "selfsubjectreviews", None, request.path, request.query,
                    request.user):
                if rule.times > 0:
                    rule.times -= 1
                if rule.status:
                    self.raise_fault_status(rule, _SelfSubjectReviews, None)
                break
        media = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if media == "application/vnd.kubernetes.protobuf":
            # kubectl auth whoami sends its (empty) review as protobuf and takes no 415 for an
            # answer; the review has no input, so the envelope's magic is all that is checked and
            # the answer is JSON (which client-go decodes by its Content-Type).
            if not (request.body or b"").startswith(b"k8s\x00"):
                raise st.bad_request("the body of the request was in an unknown format")
            body = {"kind": "SelfSubjectReview"}
        elif media not in ("application/json", "*/*", ""):
            raise st.ApiError(415, 'the body of the request was in an unknown format - accepted '
                              'media types include: application/json, application/yaml',
                              "UnsupportedMediaType")
        else:
            try:
                body = json.loads(request.body or b"{}")
            except ValueError:
                raise st.bad_request("the body of the request was in an unknown format") from None
        if not isinstance(body, dict) or body.get("kind", "SelfSubjectReview") != \
                "SelfSubjectReview":
            raise st.bad_request("the body of the request was in an unknown format")
        return 201, {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                     "metadata": {"creationTimestamp": None},
                     "status": {"userInfo": {"username": request.user,
                                             "groups": list(request.groups)}}}

    @staticmethod
    def _count_verb(conn, verb):
        if conn.client is not None:
            conn.client.requests[verb] = conn.client.requests.get(verb, 0) + 1

    def raise_fault_status(self, fault, res, name):
        code = int(fault.status)
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        if fault.body == "text":
            raise _RawResponse(code, fault.message or "Too many requests, please try again later.\n",
                               "text/plain; charset=utf-8", headers)
        if fault.body == "html":
            raise _RawResponse(code, f"<html><body><h1>{code} Bad Gateway</h1></body></html>",
                               "text/html", headers)
        if fault.body == "empty":
            raise _RawResponse(code, b"", "text/plain", headers)
        details = {"kind": res.name}
        if name:
            details["name"] = name
        if fault.retry_after is not None:
            details["retryAfterSeconds"] = int(fault.retry_after)
        if fault.spec.get("cause"):
            details["causes"] = [{"reason": fault.spec["cause"], "message": fault.spec["cause"]}]
        raise st.ApiError(code, fault.message or f"injected failure {code}", fault.reason,
                          details, headers)

    def discovery(self, parts):
        if parts == ["version"]:
            return VERSION_INFO
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}]}
        if parts == ["apis"]:
            groups = []
            for name in ("coordination.k8s.io", "authentication.k8s.io"):
                gv = {"groupVersion": f"{name}/v1", "version": "v1"}
                groups.append({"name": name, "versions": [gv], "preferredVersion": gv})
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        if parts == ["apis", "authentication.k8s.io", "v1"]:
            return {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": "authentication.k8s.io/v1",
                    "resources": [{"name": "selfsubjectreviews", "singularName":
                                   "selfsubjectreview", "namespaced": False,
                                   "kind": "SelfSubjectReview", "verbs": ["create"]},
                                  {"name": "tokenreviews", "singularName": "tokenreview",
                                   "namespaced": False, "kind": "TokenReview",
                                   "verbs": ["create"]}]}
        if parts == ["api", "v1"]:
            return {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                entry for r in RESOURCES.values() if not r.group for entry in r.discovery()]}
        if parts == ["apis", "coordination.k8s.io", "v1"]:
            return {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": "coordination.k8s.io/v1",
                    "resources": RESOURCES["leases"].discovery()}
        return None

    def decode_body(self, request, res):
        media = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if request.method != "PATCH" and media not in ("application/json", "application/yaml",
                                                       "*/*", ""):
            # Protobuf and CBOR are not served; client-go falls back to JSON on this 415.
            raise st.ApiError(415, f'the body of the request was in an unknown format - accepted '
                              f'media types include: application/json, application/yaml',
                              "UnsupportedMediaType")
        if media == "application/yaml":
            raise st.ApiError(415, "application/yaml bodies are not served by the test server",
                              "UnsupportedMediaType")
        try:
            body = json.loads(request.body or b"null")
        except ValueError:
            raise st.bad_request("the body of the request was in an unknown format") from None
        if request.method != "PATCH":
            check_body_kind(res, body)
        return body

    # ---- reads -------------------------------------------------------------------------------

    async def wait_for_revision(self, rv_text):
        rv = _parse_rv(rv_text)
        if rv is None or rv <= self.store.revision:
            return
        deadline = time.monotonic() + float(self.settings["too_large_wait"])
        while time.monotonic() < deadline and rv > self.store.revision:
            await asyncio.sleep(0.05)
        if rv > self.store.revision:
            raise st.ApiError(
                504, f"Timeout: Too large resource version: {rv}, current: {self.store.revision}",
                "Timeout", {"causes": [{"reason": "ResourceVersionTooLarge",
                                        "message": "Too large resource version"}],
                            "retryAfterSeconds": 1}, {"Retry-After": "1"})

    async def list(self, res, namespace, query, field_selector, label_selector):
        rv_text = query.get("resourceVersion")
        match = query.get("resourceVersionMatch") or ""
        limit = int(query.get("limit") or 0)
        token = query.get("continue") or ""
        if match not in ("", "NotOlderThan", "Exact"):
            raise st.invalid(res.kind + "List", "", "", [
                ("resourceVersionMatch", f'Unsupported value: "{match}"',
                 "FieldValueNotSupported")])
        start_key = None
        if token:
            if rv_text not in (None, "", "0"):
                raise st.bad_request("specifying resource version is not allowed when using "
                                     "continue")
            if match:
                raise st.bad_request("specifying resourceVersionMatch is not allowed when "
                                     "using continue")
            snap_rev, start_key = _decode_continue(token)
            if snap_rev < self.store.compacted_rev:
                inconsistent = _encode_continue(self.store.revision, start_key)
                raise st.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter, or use "
                    "the continue token in this response to retrieve the remainder of the "
                    "results. Continuing with the provided token results in an inconsistent "
                    "list - objects that were created, modified, or deleted between the time "
                    "the first chunk was returned and now may show up in the list.",
                    {"continue": inconsistent})
        else:
            if match == "NotOlderThan" and rv_text in (None, ""):
                raise st.invalid(res.kind + "List", "", "", [
                    ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                     "unless resourceVersion is provided", "FieldValueForbidden")])
            if match == "Exact" and rv_text in (None, "", "0"):
                raise st.invalid(res.kind + "List", "", "", [
                    ("resourceVersionMatch", "Forbidden: resourceVersionMatch \"exact\" is "
                     "forbidden for resourceVersion \"0\" or unset", "FieldValueForbidden")])
            rv = _parse_rv(rv_text)
            snap_rev = self.store.revision
            if rv:
                await self.wait_for_revision(rv_text)
                exact = match == "Exact" or (not match and limit > 0)
                if exact:
                    if rv < self.store.compacted_rev:
                        raise self.too_old(rv)
                    snap_rev = rv
                else:
                    snap_rev = self.store.revision
        state = (self.store.snapshot(res.name, snap_rev) if snap_rev != self.store.revision
                 else self.store.objects[res.name])
        items = []
        for key in sorted(state):
            if start_key is not None and key <= start_key:
                continue
            obj = state[key]
            if namespace and key[0] != namespace:
                continue
            if field_selector.matches(obj) and label_selector.matches(obj):
                items.append((key, obj))
        metadata = {"resourceVersion": str(snap_rev)}
        if limit > 0 and len(items) > limit:
            metadata["continue"] = _encode_continue(snap_rev, items[limit - 1][0])
            if not field_selector.terms and not label_selector.terms:
                metadata["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        out = []
        for _, obj in items:
            item = copy.deepcopy(obj)
            item.pop("kind", None)
            item.pop("apiVersion", None)
            out.append(item)
        return {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": metadata,
                "items": out}

    def too_old(self, rv):
        return st.ApiError(410, f"too old resource version: {rv} ({self.store.compacted_rev})",
                           self.settings["expired_reason"] or "")

    async def watch(self, conn, res, namespace, query, field_selector, label_selector, fault):
        rv = _parse_rv(query.get("resourceVersion"))
        send_initial = _parse_bool(query.get("sendInitialEvents"))
        match = query.get("resourceVersionMatch") or ""
        allow_bookmarks = _parse_bool(query.get("allowWatchBookmarks"))
        if send_initial:
            if match != "NotOlderThan" or not allow_bookmarks:
                raise st.invalid(res.kind + "List", "", "", [
                    ("sendInitialEvents", "Forbidden: sendInitialEvents requires "
                     "resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
                     "FieldValueForbidden")])
        elif match:
            raise st.invalid(res.kind + "List", "", "", [
                ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for "
                 "watch unless sendInitialEvents is provided", "FieldValueForbidden")])
        if "timeoutSeconds" in query:
            timeout = float(query["timeoutSeconds"] or 0)
        else:
            timeout = random.uniform(float(self.settings["watch_timeout_min"]),
                                     float(self.settings["watch_timeout_max"]))
        expired = rv is not None and rv > 0 and rv < self.store.compacted_rev and not send_initial
        if expired and self.settings["expired_watch_mode"] == "status":
            raise self.too_old(rv)

        # From here to add_watcher nothing awaits, so no change can slip between the replay
        # and the live stream.
        store = self.store
        replay_from = store.revision if (rv is None or rv == 0 or send_initial) else rv
        watcher = Watcher(res.name, namespace, field_selector, label_selector, replay_from)
        initial = []
        if expired:
            initial.append(("ERROR", st.status_body(
                410, self.settings["expired_reason"] or "",
                f"too old resource version: {rv} ({store.compacted_rev})")))
        elif replay_from == store.revision and (rv is None or rv == 0 or send_initial):
            for key in sorted(store.objects[res.name]):
                obj = store.objects[res.name][key]
                if watcher.matches(obj):
                    initial.append(("ADDED", copy.deepcopy(obj)))
            if send_initial:
                initial.append(("BOOKMARK", self.bookmark(res, store.revision, True)))
        else:
            for change in store.changes_after(rv):
                event = watcher.event_for(change)
                if event is not None:
                    initial.append(event)
            watcher.seen_rev = max(store.revision, rv)
        if not expired:
            store.add_watcher(watcher)
        self.watches_open += 1
        client = conn.client
        if client is not None:
            client.watches_open += 1
            client.watches_total += 1
        stream = WatchStream(conn, self.settings, fault)
        gone = asyncio.ensure_future(conn.reader.read(1))
        try:
            await stream.start()
            wf = stream.watch_fault
            if expired:
                await stream.send_events([_line({"type": t, "object": o}) for t, o in initial],
                                         res.kind, res.api_version, namespace, store.revision)
                await stream.finish()
                return
            if wf.get("end_immediately"):
                await stream.finish()
                return
            if wf.get("stall"):
                getter = asyncio.ensure_future(watcher.queue.get())
                while True:
                    await asyncio.wait({gone, getter}, return_when=asyncio.FIRST_COMPLETED)
                    if gone.done():
                        getter.cancel()
                        return
                    if getter.result()[0] == "close":
                        if getter.result()[1]:
                            conn.writer.transport.abort()
                            stream.cut = True
                        await stream.finish()
                        return
                    getter = asyncio.ensure_future(watcher.queue.get())
            if not await stream.send_events(
                    [_line({"type": t, "object": o}) for t, o in initial], res.kind,
                    res.api_version, namespace, store.revision):
                await stream.finish()
                return
            await self.stream_live(conn, stream, watcher, res, namespace, timeout,
                                   allow_bookmarks, gone)
        finally:
            self.watches_open -= 1
            if client is not None:
                client.watches_open -= 1
            store.remove_watcher(watcher)
            if not gone.done():
                gone.cancel()
                # Wait for the cancellation, or the next request's read finds the reader busy.
                try:
                    await gone
                except asyncio.CancelledError:
                    pass

    def bookmark(self, res, rev, initial_end=False):
        metadata = {"resourceVersion": str(rev), "creationTimestamp": None}
        if initial_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": res.kind, "apiVersion": res.api_version, "metadata": metadata}

    async def stream_live(self, conn, stream, watcher, res, namespace, timeout, allow_bookmarks,
                          gone):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        period = float(self.settings["bookmark_period"])
        next_bookmark = loop.time() + period
        final_bookmark_sent = False
        getter = asyncio.ensure_future(watcher.queue.get())
        try:
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                wake = deadline
                if allow_bookmarks:
                    wake = min(wake, next_bookmark)
                    if not final_bookmark_sent and deadline - 2 > now:
                        wake = min(wake, deadline - 2)
                done, _ = await asyncio.wait({gone, getter}, timeout=max(0.0, wake - now),
                                             return_when=asyncio.FIRST_COMPLETED)
                if gone in done:
                    return
                if getter not in done:
                    now = loop.time()
                    if allow_bookmarks and (now >= next_bookmark or
                                            (not final_bookmark_sent and now >= deadline - 2)):
                        if now >= deadline - 2:
                            final_bookmark_sent = True
                        next_bookmark = now + period
                        rev = max(watcher.seen_rev, watcher.min_rev)
                        if not await stream.send_events(
                                [_line({"type": "BOOKMARK", "object": self.bookmark(res, rev)})],
                                res.kind, res.api_version, namespace, rev):
                            break
                    continue
                items = [getter.result()]
                getter = None
                while not watcher.queue.empty():
                    items.append(watcher.queue.get_nowait())
                lines = []
                closing = None
                for item in items:
                    if item[0] == "close":
                        closing = item
                        break
                    etype, obj = item[1]
                    lines.append(_line({"type": etype, "object": obj}))
                if lines and not await stream.send_events(lines, res.kind, res.api_version,
                                                          namespace, watcher.seen_rev):
                    break
                if closing is not None:
                    if closing[1]:
                        conn.writer.transport.abort()
                        stream.cut = True
                    break
                getter = asyncio.ensure_future(watcher.queue.get())
        finally:
            if getter is not None and not getter.done():
                getter.cancel()
        await stream.finish()

    # ---- writes ------------------------------------------------------------------------------

    def patched(self, request, res, namespace, name):
        """The stored object with the request's merge patch applied; nothing stored."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        if content_type not in ("application/strategic-merge-patch+json",
                                "application/merge-patch+json"):
            raise st.ApiError(415, f"the body of the request was in an unknown format - "
                              f"accepted media types include: application/merge-patch+json, "
                              f"application/strategic-merge-patch+json", "UnsupportedMediaType")
        patch = self.decode_body(request, res)
        if not isinstance(patch, dict):
            raise st.bad_request("the body of the request was in an unknown format")
        current = self.store.get(res.name, namespace, name)
        merged = _merge_patch(current, patch)
        check_body_kind(res, merged)
        merged["metadata"]["name"] = name
        return merged

    def patch(self, request, res, namespace, name):
        obj, _ = self.store.update(res.name, namespace, name,
                                   self.patched(request, res, namespace, name),
                                   allow_create=False)
        return obj

    def write_subresource(self, request, verb, res, namespace, name, subresource):
        """PUT or PATCH of a subresource (pods/status): the whole object comes in and goes out,
        and the store keeps what the subresource may not change (podStatusStrategy). A missing
        object is 404 before admission, as upstream (subresources never create)."""
        if verb == "patch":
            body = self.patched(request, res, namespace, name)
        else:
            body = self.decode_body(request, res)
            if body["metadata"].get("name") and body["metadata"]["name"] != name:
                raise st.bad_request("the name of the object (%s) does not match the name on "
                                     "the URL (%s)" % (body["metadata"]["name"], name))
            body["metadata"]["name"] = name
        old = self.store.get(res.name, namespace, name)
        self.admit_node_write(request, verb, res, namespace, name, body, subresource, old)
        obj, _ = self.store.update(res.name, namespace, name, body, allow_create=False,
                                   subresource=subresource, dry_run=_dry_run(request.query))
        return obj

    def dry_run_create(self, res, namespace, body):
        """What create would return, nothing stored (dryRun=All): the object with the metadata
        the server would set, no resourceVersion."""
        check_body_kind(res, body)
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and not meta.get("generateName"):
            raise st.invalid(res.kind, res.group, "", [("metadata.name", "Required value: name "
                                                         "or generateName is required",
                                                         "FieldValueRequired")])
        meta["namespace"] = namespace
        meta.setdefault("name", meta.get("generateName", "") + uuid.uuid4().hex[:5])
        meta["uid"] = str(uuid.uuid4())
        return obj

    def dry_run_update(self, res, namespace, name, body):
        """What update would return, nothing stored (dryRun=All): 404 when there is no object,
        except for leases, created on update (201)."""
        check_body_kind(res, body)
        if self.store.objects[res.name].get((namespace, name)) is None:
            if res.name != "leases":
                raise st.not_found(res.name, res.group, name)
            body.setdefault("metadata", {})["name"] = name
            return 201, self.dry_run_create(res, namespace, body)
        obj = copy.deepcopy(body)
        obj.setdefault("metadata", {})["name"] = name
        obj["metadata"]["namespace"] = namespace
        return 200, obj

    def dry_run_patch(self, request, res, namespace, name):
        """What patch would return, nothing stored (dryRun=All); 404 when there is no object."""
        return self.patched(request, res, namespace, name)

    def delete(self, request, res, namespace, name):
        options = {}
        if request.body:
            try:
                options = json.loads(request.body) or {}
            except ValueError:
                raise st.bad_request("the body of the request was in an unknown format") from None
        grace = request.query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        grace = int(grace) if grace not in (None, "") else None
        obj, _ = self.store.delete(res.name, namespace, name, grace,
                                   options.get("preconditions"))
        if res.name == "pods":
            return 200, obj
        details = {"name": name, "kind": res.name, "uid": obj["metadata"]["uid"]}
        if res.group:
            details["group"] = res.group
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "details": details}

    # ---- admin -------------------------------------------------------------------------------

    def admin(self, request, command, conn=None):
        try:
            args = json.loads(request.body) if request.body else {}
        except ValueError:
            return 400, {"error": "body is not JSON"}
        method = request.method
        try:
            if command == "state" and method == "GET":
                return 200, {"revision": self.store.revision,
                             "compacted_revision": self.store.compacted_rev,
                             "watches": self.watches_open,
                             "connections_total": self.connections_total,
                             "connections_open": self.connections_open,
                             "outage": self.outage,
                             "token": self.main_token}
            if command == "requests":
                if method == "DELETE":
                    self.requests.clear()
                    return 200, {}
                return 200, {"requests": self.requests}
            if command == "clients":
                if method == "DELETE":
                    for counters in self.clients.values():
                        counters.reset()
                    return 200, {}
                return 200, {"clients": {user: c.as_dict() for user, c in self.clients.items()}}
            if command == "faults":
                if method == "DELETE":
                    self.faults.clear()
                else:
                    self.faults.add(args)
                return 200, {}
            if command == "settings" and method == "POST":
                self.apply_settings(args)
                return 200, self.settings
            if command == "drop-watches" and method == "POST":
                self.store.drop_watchers(bool(args.get("abort")))
                return 200, {}
            if command == "outage" and method == "POST":
                self.outage = bool(args.get("down", True))
                if self.outage:
                    # Every connection but this one goes, as when the process dies: open watches
                    # and idle keep-alive connections alike.
                    self.store.drop_watchers(True)
                    for other in list(self.open_connections):
                        if other is not conn:
                            other.writer.transport.abort()
                return 200, {"down": self.outage}
            if command == "compact" and method == "POST":
                self.store.compact()
                return 200, {"compacted_revision": self.store.compacted_rev}
            if command == "rotate-token" and method == "POST":
                new = args.get("token") or uuid.uuid4().hex
                user = self.tokens.pop(self.main_token, "test-admin")
                self.main_token = new
                self.tokens[new] = user
                return 200, {"token": new}
            if command == "tokens" and method == "POST":
                if args.get("user"):
                    self.tokens[args["token"]] = args["user"]
                    self.token_groups[args["token"]] = list(args.get("groups") or ())
                else:
                    self.tokens.pop(args["token"], None)
                    self.token_groups.pop(args["token"], None)
                return 200, {}
            handled = self.admin_credentials(command, method, args)
            if handled is not None:
                return handled
            if command == "acl" and method == "POST":
                if args.get("rules") is None:
                    self.acl.pop(args["user"], None)
                else:
                    self.acl[args["user"]] = args["rules"]
                return 200, {}
        except st.ApiError as err:
            return err.code, err.body()
        return 404, {"error": f"unknown admin command {method} {command}"}


    def admin_credentials(self, command, method, args):
        """The clock client certificates are checked at, and certificates issued on demand (so a
        test rotates them as the kubelet does). None: not one of these commands."""
        if command == "clock" and method == "POST":
            self.clock_offset = float(args.get("offset_seconds", 0))
            return 200, {"offset_seconds": self.clock_offset}
        if command == "issue-client-cert" and method == "POST":
            if not self.pki_dir:
                return 400, {"error": "the server has no CA to issue with"}
            path = args.get("path")
            if not path or not os.path.isabs(path):
                return 400, {"error": "path must be an absolute file path"}
            try:
                issued = pki.issue_client_cert(self.pki_dir, path, args.get("user", ""),
                                               args.get("groups", []), args.get("days", 1))
            except (ValueError, TypeError, OSError, subprocess.CalledProcessError) as err:
                return 400, {"error": f"cannot issue a certificate: {err}"}
            return 200, issued
        return None


class _SelfSubjectReviews:
    """What raise_fault_status reads of a resource, for selfsubjectreviews (not in RESOURCES:
    create-only, nothing stored)."""
    name = "selfsubjectreviews"
    group = "authentication.k8s.io"


class _Reviewed:
    """A resource a SelfSubjectAccessReview names that the server does not serve (or `*`): what
    the authorizers read of it."""

    def __init__(self, name, group):
        self.name = name
        self.group = group
        self.namespaced = True


class _ConnectionReset(Exception):
    """A fault reset the connection: nothing more is written on it."""


class _RawResponse(Exception):
    def __init__(self, code, body, content_type, headers):
        super().__init__(code)
        self.code = code
        self.body = body
        self.content_type = content_type
        self.headers = headers


class _TokenReviews:
    """tokenreviews as ACL rules name it (not in RESOURCES: cluster-scoped, create only)."""
    name = "tokenreviews"
    group = "authentication.k8s.io"
