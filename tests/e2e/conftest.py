"""Fixtures for end-to-end tests of the volumemanager binary in standalone mode.

Each test gets fresh pod, object and root directories and a helper that starts the real binary
(VOLUMEMANAGER_BIN) on them, waits for conditions on disk and stops it.

Every Secret value an end-to-end test writes contains SECRET_MARKER. Whatever a daemon of any test
emits is searched for it, as is and base64-encoded (at each alignment): its whole log (text or
JSON) after the test, and, when the test's body ends with the daemon still running, every admin
endpoint (/metrics, /healthz, /readyz?verbose, /debug/state, /configz). One occurrence fails the
test.
"""
import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "realkube"))
from machine import machine_state  # noqa: E402
from netns import NODE_IP, NodeNetwork  # noqa: E402, F401

BIN = os.environ.get("VOLUMEMANAGER_BIN", "build/bin/volumemanager")
NODE = "e2e-node"
SECRET_MARKER = "SECRET-MARKER"


def marker_forms(marker=SECRET_MARKER):
    """`marker` as bytes, and the base64 text it becomes inside any encoded value: for each of
    the three alignments, the characters that only its own bytes determine."""
    raw = marker.encode()
    forms = [raw]
    for skip in range(3):
        whole = raw[skip:]
        whole = whole[:len(whole) // 3 * 3]
        forms.append(base64.b64encode(whole))
    return forms


def find_markers(data: bytes, marker=SECRET_MARKER):
    """Each form of `marker` found in `data`, with some context."""
    found = []
    for form in marker_forms(marker):
        at = data.find(form)
        if at >= 0:
            found.append(data[max(0, at - 120):at + len(form) + 40])
    return found


# Every DaemonProcess of the running test (and of module-scoped fixtures), for the marker checks.
_DAEMONS = []


def readyz(process, timeout=10):
    """(status, body) of `process`'s /readyz?verbose (a DaemonProcess, or anything with its
    admin_addresses()): 200 and the checks when ready, 503 and the failing ones when not."""
    probe, _ = process.admin_addresses()
    try:
        with urllib.request.urlopen(probe + "/readyz?verbose", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_for(predicate, timeout=10.0, what="condition"):
    """Polls `predicate` every 10 ms until it is truthy; fails the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (FileNotFoundError, NotADirectoryError):
            pass
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def visible_files(volume_dir):
    """What a container sees: every regular file reached through non-'..' entries, by path."""
    out = {}
    root = Path(volume_dir)
    if not root.is_dir():
        return out
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".."):
            continue
        stack = [entry]
        while stack:
            p = stack.pop()
            try:
                if p.is_dir():
                    stack.extend(p.iterdir())
                elif p.is_file():
                    out[str(p.relative_to(root))] = p.read_bytes()
            except FileNotFoundError:
                pass
    return out


def snapshot(path):
    """Everything below `path`, without following links: type, mode, owner, bytes or target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            rel = str(p.relative_to(path))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", st.st_mode, st.st_uid, st.st_gid)
            else:
                out[rel] = ("file", st.st_mode, st.st_uid, p.read_bytes())
    return out


def dot_entries(volume_dir):
    return sorted(e.name for e in Path(volume_dir).iterdir() if e.name.startswith(".."))


# A text log line: `<ts> <level letter> <payload>`; a structured payload is klog's text form,
# `"message" key="value" n=3` (logging/structured_log.h), strings quoted as Go's strconv.Quote.
TEXT_LINE = re.compile(r"^(\S+) ([A-Z]) (.*)$")
QUOTED = r'"(?:[^"\\]|\\.)*"'
FIELD = re.compile(r' ([a-z][A-Za-z0-9]*)=(' + QUOTED + r'|-?[0-9]+|true|false)')
LEVELS = {"T": "trace", "D": "debug", "I": "info", "W": "warning", "E": "error", "C": "critical"}


def go_unquote(quoted):
    """The string a Go-quoted literal stands for (\\xHH bytes that are not UTF-8 become U+FFFD)."""
    out = bytearray()
    body = quoted[1:-1]
    i = 0
    simple = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, '"': 34, "\\": 92}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
        elif body[i + 1] in simple:
            out.append(simple[body[i + 1]])
            i += 2
        elif body[i + 1] == "x":
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        elif body[i + 1] == "u":
            out += chr(int(body[i + 2:i + 6], 16)).encode()
            i += 6
        else:
            raise ValueError(f"bad escape in {quoted!r}")
    return out.decode(errors="replace")


def parse_log_line(line):
    """One log line as a dict: `level`, `msg` and each key of a structured line, for either
    --log-format; None for a line that is neither JSON nor `<ts> <level> <payload>`."""
    if line.startswith("{"):
        return json.loads(line)
    m = TEXT_LINE.match(line)
    if not m:
        return None
    record = {"ts": m.group(1), "level": LEVELS.get(m.group(2), m.group(2)), "msg": m.group(3)}
    payload = m.group(3)
    head = re.match(QUOTED, payload)
    if not head:
        return record
    fields, pos = {}, head.end()
    for f in FIELD.finditer(payload, pos):
        if f.start() != pos:
            return record
        value = f.group(2)
        fields.setdefault(f.group(1), go_unquote(value) if value.startswith('"') else json.loads(value))
        pos = f.end()
    if pos != len(payload):
        return record  # not exactly the structured form: the payload is the message
    record["msg"] = go_unquote(head.group(0))
    record.update(fields)
    return record


@contextlib.contextmanager
def killed_after(daemon):
    """Yields `daemon` (a fixture's cluster); after the test kills it if it still runs and checks
    that no secret reached its output, killing it in any case."""
    try:
        yield daemon
        if daemon.proc is not None:
            daemon.stop(signal.SIGKILL)
        daemon.assert_no_secret_leaked()
    finally:
        if daemon.proc is not None:
            daemon.stop(signal.SIGKILL)


class DaemonProcess:
    """The real binary, its output appended to `log_path`."""

    def __init__(self, log_path: Path):
        self.proc = None
        self.log_path = log_path
        self._log = None
        self.scraped = []  # (what, bytes) of admin endpoints read while it ran
        self.wrapper = []  # a command that runs the binary (its arguments follow), e.g. unshare
        _DAEMONS.append(self)

    def scrape_admin(self):
        """Reads every admin endpoint of the running daemon (those it has announced)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        address = r"([0-9a-f.:\[\]]+)"
        log = self.log()
        probe = re.findall(r"serving /healthz, /readyz and /metrics on " + address, log)
        debug = re.findall(r"serving /debug/state and /configz on " + address, log)
        urls = []
        if probe:
            urls += [f"http://{probe[-1]}{p}" for p in ("/metrics", "/healthz", "/readyz?verbose")]
        if debug:
            urls += [f"http://{debug[-1]}{p}" for p in ("/debug/state", "/configz")]
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    self.scraped.append((url, r.read()))
            except urllib.error.HTTPError as e:
                self.scraped.append((url, e.read()))
            except OSError:
                pass  # stopping, or the endpoint failed to bind (a test of that)

    def leaked_markers(self):
        """Where a marker shows in its log or in what was scraped from it."""
        out = []
        raw = self.log_path.read_bytes() if self.log_path.exists() else b""
        out += [(str(self.log_path), f) for f in find_markers(raw)]
        for url, body in self.scraped:
            out += [(url, f) for f in find_markers(body)]
        return out

    def run(self, args):
        self._log = open(self.log_path, "ab")
        # Free ports for the admin endpoints, so that daemons of tests running at once never
        # compete for the default ones (admin_addresses() reads them from the log), unless the
        # test names them (a config file names its own).
        admin = []
        if not any(str(a) == "--config" or str(a).startswith("--config=") for a in args):
            for flag in ("--healthz-bind-address", "--debug-bind-address"):
                if flag not in args:
                    admin += [flag, "127.0.0.1:0"]
        self.proc = subprocess.Popen([*self.wrapper, BIN, *args, *admin], stdout=self._log,
                                     stderr=subprocess.STDOUT)
        return self.proc

    def admin_addresses(self, timeout=10.0):
        """(probe, debug) base URLs of the latest run's admin endpoints, from its log lines."""
        def find():
            address = r"([0-9a-f.:\[\]]+)"
            probe = re.findall(r"serving /healthz, /readyz and /metrics on " + address, self.log())
            debug = re.findall(r"serving /debug/state and /configz on " + address, self.log())
            return probe and debug and (f"http://{probe[-1]}", f"http://{debug[-1]}")
        return wait_for(find, timeout=timeout, what="the admin endpoints' addresses in the log")

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc is None:
            return None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._log.close()
        self.proc = None
        return rc

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def records(self, **keys):
        """The log's lines (either format) as dicts, those whose fields equal `keys`; a key's
        value may also be a predicate."""
        out = []
        # The file as written (a subclass's log() may return the messages only).
        text = DaemonProcess.log(self)
        for line in text.splitlines():
            if line.startswith("{") and not line.endswith("}"):
                continue  # still being written
            r = parse_log_line(line)
            if r is None:
                continue
            if all(k in r and (v(r[k]) if callable(v) else r[k] == v) for k, v in keys.items()):
                out.append(r)
        return out


class Env(DaemonProcess):
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.pods = tmp / "pods"
        self.objects = tmp / "objects"
        self.root = tmp / "root"
        self.state = tmp / "state"
        for d in (self.pods, self.objects, self.root):
            d.mkdir()
        super().__init__(tmp / "daemon.log")
        # No other writer touches these volumes: old versions may go at once, so tests can
        # expect exactly one version dir.
        self.unpublished_grace = "0s"

    # --- manifests -------------------------------------------------------------------------
    def write_yaml(self, directory: Path, name: str, obj):
        """Writes like an editor does: a temp file renamed into place."""
        tmp = directory / f".{name}.tmp"
        tmp.write_text(yaml.safe_dump_all(obj) if isinstance(obj, list) else yaml.safe_dump(obj))
        os.replace(tmp, directory / name)

    def put_pod(self, pod, name=None):
        self.write_yaml(self.pods, name or f"{pod['metadata']['name']}.yaml", pod)

    def put_object(self, obj, name=None):
        self.write_yaml(self.objects, name or f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml", obj)

    def volume_dir(self, uid, plugin, volume):
        return self.root / "pods" / uid / "volumes" / plugin / volume

    # --- daemon ----------------------------------------------------------------------------
    def start(self, *extra):
        return self.run(
            ["--root-dir", str(self.root), "--state-dir", str(self.state), "--node-name", NODE,
             "--pod-manifest-path", str(self.pods), "--object-manifest-path", str(self.objects),
             "--unpublished-grace", self.unpublished_grace, "-v", "1", *extra])


# A test that cannot run without root, or without what only root may do here (mount, a loop
# device, a bind mount), skips with a reason that starts with NEEDS_ROOT: `make test`'s skip
# report (tests/skip_report.py) counts it as a root skip, and under CI (CI=true, as root) one
# fails the run. Every other skip says why too.
NEEDS_ROOT = "needs root"


def skip_unless_root(what):
    """Skips the test, saying "needs root: <what>", unless it runs as root."""
    if os.geteuid() != 0:
        pytest.skip(f"{NEEDS_ROOT}: {what}")


def skip_needs_root(what):
    """Skips the test as a root skip whatever the uid: a privilege root lacks here (a sandbox
    without CAP_SYS_ADMIN, no loop device); `what` says what failed."""
    pytest.skip(f"{NEEDS_ROOT}: {what}")


def needs_root(what):
    """skip_unless_root as a mark (`pytestmark = needs_root(...)` for a whole module)."""
    return pytest.mark.skipif(os.geteuid() != 0, reason=f"{NEEDS_ROOT}: {what}")


@pytest.fixture
def node_network():
    """A node network of the test's own (tests/realkube/netns.py): the test's main thread, and
    every process and thread it starts from then on (the daemon, the API server), run in a new
    network namespace with the node's address NODE_IP; `node_network.pods.set_up(name)` gives a
    pod an address of its own in a further namespace (veth pair), where `pods.listen(ip)` opens
    its application's socket. Pods are then called at their own addresses, never loopback."""
    if os.geteuid() != 0:
        pytest.skip(f"{NEEDS_ROOT}: network namespaces for the pods' own addresses")
    with NodeNetwork() as network:
        yield network


def mounts_under(path):
    """Mount points at or below `path` (from /proc/self/mounts), deepest first."""
    prefix = str(path)
    found = []
    with open("/proc/self/mounts") as f:
        for line in f:
            target = line.split()[1].replace("\\040", " ")
            if target == prefix or target.startswith(prefix + "/"):
                found.append(target)
    return sorted(found, key=len, reverse=True)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "test_server_only(why): a cluster-mode test that needs what only the test API "
        "server offers (a fault hook, an ACL); not run against the real kube-apiserver")
    config.addinivalue_line(
        "markers", "real_server_only(why): a test of the real kube-apiserver's own behaviour")
    config.addinivalue_line(
        "markers", "real_kubelet: a test beside the real kubelet (VM_API_SERVERS=kubelet, inside "
        "the node namespace of tests/realkube/kubelet_tier.py)")


def _server_of(item):
    """'real' or 'test' for a test parametrized by API server (its `cluster`-style fixture's
    param, or a `server` param), else None."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        if value == "real":
            return "real"
        if value in ("test", "http1", "h2"):
            return "test"
    return None


def pytest_collection_modifyitems(config, items):
    """Under VM_API_SERVERS without `test` (the real-Kubernetes tier) only tests parametrized by
    the real server run; a `test_server_only` test is never parametrized so (deselected, not
    skipped: it runs in the test server's tier), nor a variant its module lists in
    REAL_SERVER_EXCLUDES ({(fixture, param): why}). Without `real`, `real_server_only` tests are
    deselected the same way. Tests marked `real_kubelet` run only under `kubelet` (the
    real-kubelet tier, in its node namespace), and nothing else does."""
    servers = [s for s in os.environ.get("VM_API_SERVERS", "test").split(",") if s]
    keep, drop = [], []
    for item in items:
        if item.get_closest_marker("real_kubelet") or "kubelet" in servers:
            (keep if item.get_closest_marker("real_kubelet") and "kubelet" in servers
             else drop).append(item)
            continue
        server = _server_of(item)
        if server is None and item.get_closest_marker("real_server_only"):
            server = "real"
        excludes = getattr(item.module, "REAL_SERVER_EXCLUDES", {})
        params = getattr(getattr(item, "callspec", None), "params", {})
        if server == "real" and (item.get_closest_marker("test_server_only") or
                                 any(params.get(k) == v for k, v in excludes)):
            drop.append(item)
        elif "test" not in servers and server != "real":
            drop.append(item)
        elif "real" not in servers and server == "real":
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(autouse=True)
def cluster_mode_tests_say_where_they_run(request):
    """A test that starts the test API server runs against the real one too (parametrized by
    server) or says why not (`test_server_only`): tests/realkube/README.md lists them all."""
    apiserver = str(Path(__file__).resolve().parents[1] / "apiserver")
    if apiserver not in sys.path:
        sys.path.insert(0, apiserver)
    import harness
    started = []
    original = harness.TestApiServer.__enter__

    def enter(self):
        started.append(self)
        return original(self)
    harness.TestApiServer.__enter__ = enter
    try:
        yield
    finally:
        harness.TestApiServer.__enter__ = original
    if started and _server_of(request.node) is None and \
            not request.node.get_closest_marker("test_server_only"):
        pytest.fail("a cluster-mode test must run against the real kube-apiserver too "
                    "(parametrize it by server: api_servers.py) or say why it cannot "
                    "(@pytest.mark.test_server_only(why))", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Once a test's body has run, every daemon still running is scraped (before fixtures stop
    it)."""
    yield
    for daemon in list(_DAEMONS):
        daemon.scrape_admin()


@pytest.fixture(autouse=True)
def no_secret_marker_in_any_output():
    """After each test (its daemons stopped by then), no daemon's log or scraped endpoint shows a
    secret value."""
    yield
    leaks = []
    for daemon in list(_DAEMONS):
        leaks += daemon.leaked_markers()
        daemon.scraped = []
        if daemon.proc is None:
            _DAEMONS.remove(daemon)
    assert not leaks, f"secret values in the daemon's output: {leaks[:5]}"


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    if e.proc is not None:
        e.stop(signal.SIGKILL)
    # Volumes of a daemon killed mid-test stay mounted, as after a crash; unmount them so the
    # temporary dir can go.
    for m in mounts_under(tmp_path):
        subprocess.run(["umount", "-l", m], check=False)


def pod(name, volumes, mounts=None, uid=None, labels=None, annotations=None, resources=None):
    """A Pod manifest whose one container mounts every volume (or `mounts`)."""
    mounts = mounts if mounts is not None else [v["name"] for v in volumes]
    meta = {"name": name}
    if uid:
        meta["uid"] = uid
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    container = {"name": "app", "image": "busybox",
                 "volumeMounts": [{"name": m, "mountPath": f"/mnt/{m}"} for m in mounts]}
    if resources:
        container["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [container], "volumes": volumes}}


def configmap(name, data=None, binary=None, namespace=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}
    if binary:
        obj["binaryData"] = binary
    return obj


def secret(name, string_data=None, data=None):
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}
    if string_data:
        obj["stringData"] = string_data
    if data:
        obj["data"] = data
    return obj


@pytest.fixture(scope="session", autouse=True)
def machine_before():
    """The machine's state before the session's first test (for the real-Kubernetes tier's
    last test, test_realkube_machine.py)."""
    return machine_state()
