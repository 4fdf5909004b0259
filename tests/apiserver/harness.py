"""Starts kube-test-apiserver for a test and talks to it (API and admin endpoint).

Usage:
    with TestApiServer() as server:
        code, body = server.request("GET", "/api/v1/namespaces/default/configmaps")
        set_pod_status(server, "default", "web", {"phase": "Running", "podIP": "10.0.0.5"})
        server.admin("POST", "faults", {"verb": "list", "status": 500})
"""

import json
import os
import socket
import ssl
import subprocess
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "kube-test-apiserver")


class TestApiServer:
    __test__ = False  # not a pytest test class
    def __init__(self, token="test-token", path_prefix="", client_cert_user=None):
        self.token = token
        self.path_prefix = path_prefix
        self.client_cert_user = client_cert_user
        self.dir = None
        self.proc = None

    def __enter__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="kube-test-apiserver-")
        self.kubeconfig = os.path.join(self.dir.name, "kubeconfig")
        cmd = ["/usr/bin/python3", SERVER, "--listen", "127.0.0.1:0", "--kubeconfig-out",
               self.kubeconfig, "--token", self.token, "--exit-on-stdin-close"]
        if self.path_prefix:
            cmd += ["--path-prefix", self.path_prefix]
        if self.client_cert_user:
            cmd += ["--client-cert-user", self.client_cert_user]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("ready "):
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r}")
        self.url = line.split(" ", 1)[1]
        parts = urllib.parse.urlsplit(self.url)
        self.host, self.port = parts.hostname, parts.port
        self.pki = self.kubeconfig + ".pki"
        self.ca_file = os.path.join(self.pki, "ca.crt")
        self.ssl_context = ssl.create_default_context(cafile=self.ca_file)
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.dir.cleanup()

    def connect(self, client_cert=False):
        context = self.ssl_context
        if isinstance(client_cert, str):  # one PEM file with certificate and key
            context = ssl.create_default_context(cafile=self.ca_file)
            context.load_cert_chain(client_cert)
        elif client_cert:
            context = ssl.create_default_context(cafile=self.ca_file)
            context.load_cert_chain(os.path.join(self.pki, "client.crt"),
                                    os.path.join(self.pki, "client.key"))
        raw = socket.create_connection((self.host, self.port), timeout=10)
        return context.wrap_socket(raw, server_hostname=self.host)

    def raw_request(self, method, path, body=None, token=None, headers=None, client_cert=False):
        """Sends one request on a new connection; returns (status, headers, body bytes) with the
        body exactly as sent (chunk framing removed for non-watch responses)."""
        sock = self.connect(client_cert)
        try:
            request = request_bytes(f"{self.host}:{self.port}", method,
                                    f"{self.path_prefix}{path}", body,
                                    self.token if token is None else token, headers)
            status, resp_headers, rest = self._exchange(sock, request)
        finally:
            sock.close()
        if resp_headers.get("transfer-encoding") == "chunked":
            rest = dechunk(rest)[0]
        return status, resp_headers, rest

    def request(self, method, path, body=None, **kwargs):
        """(status, decoded JSON body or text)."""
        status, headers, data = self.raw_request(method, path, body, **kwargs)
        if headers.get("content-encoding") == "gzip":
            import gzip
            data = gzip.decompress(data)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data.decode("utf-8", "replace")

    def admin(self, method, command, body=None):
        status, data = self.request(method, f"/_admin/{command}", body)
        if status != 200:
            raise RuntimeError(f"admin {command}: {status} {data}")
        return data

    def watch_events(self, path, **kwargs):
        """Runs a watch to its end; returns (status, list of decoded events, chunk sizes, complete)
        where complete says whether the stream ended with the terminating chunk."""
        status, headers, data = self.raw_request_stream(method="GET", path=path, **kwargs)
        body, chunks, complete = dechunk(data)
        events = [json.loads(line) for line in body.split(b"\n") if line.strip()]
        return status, events, chunks, complete

    def raw_request_stream(self, method, path, token=None):
        sock = self.connect()
        try:
            head = (f"{method} {self.path_prefix}{path} HTTP/1.1\r\nHost: {self.host}\r\n"
                    f"Authorization: Bearer {token or self.token}\r\nConnection: close\r\n\r\n")
            return self._exchange(sock, head.encode(), timeout_ends_stream=True)
        finally:
            sock.close()

    @staticmethod
    def _exchange(sock, request, timeout_ends_stream=False):
        """Sends `request`, reads until the server closes or resets (or, for a watch stream,
        a read times out); returns (status, lower-cased headers, raw body bytes)."""
        sock.sendall(request)
        ends = (ConnectionResetError, ssl.SSLError)
        if timeout_ends_stream:
            ends += (socket.timeout,)
        response = b""
        while True:
            try:
                piece = sock.recv(65536)
            except ends:
                break
            if not piece:
                break
            response += piece
        head, _, rest = response.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        return int(lines[0].split(" ")[1]), headers, rest


_PORTS_GIVEN = set()


def free_port():
    """A port nothing listens on now, for a server a test starts later. The kernel may give a
    port back again once its socket is closed, so a port handed out before in this process is
    never handed out again: two servers of one test (etcd's client and peer ports and
    kube-apiserver's) cannot be given the same one."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError("no port left that this process has not handed out")


def request_bytes(host, method, path, body=None, token=None, headers=None):
    """One HTTP/1.1 request (Connection: close, JSON accepted; a JSON body unless `body` is
    bytes), with a bearer `token` when given; `headers` added last."""
    send = {"Host": host, "Connection": "close", "Accept": "application/json"}
    if token:
        send["Authorization"] = f"Bearer {token}"
    data = b""
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        send.setdefault("Content-Type", "application/json")
    send.update(headers or {})
    send["Content-Length"] = str(len(data))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in send.items()) + "\r\n"
    return head.encode() + data


def dechunk(data):
    """(body, list of chunk sizes, whether the terminating chunk arrived)."""
    body, sizes = b"", []
    while data:
        line, sep, rest = data.partition(b"\r\n")
        if not sep:
            return body, sizes, False
        size = int(line.split(b";")[0], 16)
        if size == 0:
            return body, sizes, True
        chunk = rest[:size]
        body += chunk
        sizes.append(len(chunk))
        if len(chunk) < size:
            return body, sizes, False
        data = rest[size + 2:]
    return body, sizes, False


def set_pod_status(server, namespace, name, status, token=None):
    """Writes `status` into a pod as a kubelet reports it: a merge PATCH of the pod's `status`
    subresource (a create resets the status, and an update of the pod keeps it), as `token`'s
    user (default: the server's admin). `server` is a TestApiServer or any server object with
    the same `request(method, path, body, token=, headers=)`. Returns the pod as stored."""
    code, pod = server.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                               {"status": status}, token=token,
                               headers={"Content-Type": "application/merge-patch+json"})
    if code != 200:
        raise RuntimeError(f"status of pod {namespace}/{name}: {code} {pod}")
    return pod


def configmap(name, data=None, namespace="default", **extra):
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace}, "data": data or {}}
    obj.update(extra)
    return obj
