"""API outage soak: the real daemon in cluster mode while the test API server (and the network in
front of it) fails in every way it can, over and over, and the objects keep changing.

Every few seconds one fault starts and later ends: the server down (connections refused, open ones
reset), every request reset, 410 Gone (history compacted and watches refused with 410), 429 with
Retry-After, 5xx (500, 502 with a proxy's HTML body, 503, 504), watches stalled after their
headers, watches cut mid-event, the token rotated on the server before the daemon's token file.
All the while a writer changes one ConfigMap or Secret every ~150 ms, and a sampler reads every
volume every few ms as a container would. Asserted:

* no volume ever disappears or shows no content (0 volumes removed);
* every volume only moves forward: each object's version seen in it never goes back (so no
  volume shows content older than it showed before a fault), and no volume mixes two versions
  of one object (torn);
* after the last fault (and after every 8th) the volumes reach at least the API's versions of the
  moment it ended, within 1 s of the last retry the reflectors' backoff had scheduled
  (`make soak`; the short version only bounds it by two of the longest waits, as a loaded CI
  machine may be slow), and the measured times are reported;
* at the end every volume holds exactly the API's content; the daemon ran throughout.

`VM_SOAK_SECONDS` sets how long faults are injected (default 40: the `make test` version; `make
soak` runs 600), `VM_SOAK_SEED` the random seed (printed), `VM_SOAK_REPORT` a file for the
figures as JSON (RELIABILITY.md, "API outage soak").
"""
import json
import os
import random
import re
import socket
import statistics
import struct
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import visible_files, wait_for
from test_cluster import (CM, DAEMON_TOKEN, DAEMON_USER, PROJECTED, RECOVERY_BOUND_S, SECRET,
                          Cluster, TcpForwarder, cm_volume, free_port, secret_volume)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from harness import TestApiServer  # noqa: E402

SOAK_SECONDS = float(os.environ.get("VM_SOAK_SECONDS", "40"))
SEED = int(os.environ.get("VM_SOAK_SEED", str(int(time.time()))))
REPORT = os.environ.get("VM_SOAK_REPORT")

CONFIGMAPS = ["cm-0", "cm-1", "cm-2"]
SECRETS = ["sec-0", "sec-1"]
PODS = 4
MARKER = "SECRET-MARKER-SOAK"


def cm_data(name, n):
    return {"a": f"{name}={n}", "b": f"{name}={n}", "c": f"{name}={n}"}


def secret_data(name, n):
    return {"x": f"{MARKER}-{name}={n}", "y": f"{MARKER}-{name}={n}"}


def payload_versions(files):
    """{object name: [versions seen]} of a volume's visible files (every value is 'name=n')."""
    out = {}
    for value in files.values():
        text = value.decode()
        if text.startswith(MARKER + "-"):
            text = text[len(MARKER) + 1:]
        name, _, n = text.rpartition("=")
        out.setdefault(name, []).append(int(n))
    return out


def read_volume(volume):
    """{file: bytes} of one version of a volume, read as a container reads it: through the
    `..data` link once resolved (the kubelet's promise is that a version dir, once published, is
    complete), with each visible name a link into it. None when the volume is not there."""
    try:
        version = volume / os.readlink(volume / "..data")
        visible = {e for e in os.listdir(volume) if not e.startswith("..")}
        files = {name: (version / name).read_bytes() for name in os.listdir(version)}
    except (FileNotFoundError, NotADirectoryError):
        return None
    if visible != set(files):
        return {name: files.get(name, b"missing=-1") for name in visible | set(files)}
    return files


class SwitchableForwarder(TcpForwarder):
    """The API server's address as the daemon knows it: down() makes it refuse connections and
    resets the open ones (the server gone), up() serves again on the same port."""

    def down(self):
        self.stopping = True
        self.listener.close()
        for s in self.sockets:
            # Reset, not closed: the pipe threads blocked in recv() on them return at once (a
            # bare close() would leave those connections open and silent).
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
        self.sockets = []

    def up(self):
        self.stopping = False
        self.start()


class Objects:
    """The ConfigMaps and Secrets and their current version numbers, changed through the test's
    own (admin) token, which no fault rule touches."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.version = {}
        self.lock = threading.Lock()
        self.changes = 0

    def put(self, name, n):
        if name in CONFIGMAPS:
            self.cluster.put_configmap(name, cm_data(name, n))
        else:
            self.cluster._put("/api/v1/namespaces/default/secrets", name, {
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": "default"},
                "stringData": secret_data(name, n)})
        with self.lock:
            self.version[name] = n
            self.changes += 1

    def current(self):
        with self.lock:
            return dict(self.version)


class Mutator:
    def __init__(self, objects, rng):
        self.objects = objects
        self.rng = rng
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stopping:
            name = self.rng.choice(CONFIGMAPS + SECRETS)
            self.objects.put(name, self.objects.current()[name] + 1)
            time.sleep(0.1 + self.rng.random() * 0.1)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping = True
        self.thread.join()


class ForwardOnlySampler:
    """Reads every volume every few ms and checks each state as a container would see it: present
    with content, one version per object (not torn), never older than seen before."""

    def __init__(self, volumes):
        self.volumes = volumes  # path -> the objects it shows
        self.last = {v: {} for v in volumes}
        self.violations = []
        self.samples = 0
        self.pending = []  # [fault record, ended (time.time()), {object: version}]
        self.stopping = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def shown(self, volume):
        """{object: version} last seen in `volume`."""
        return dict(self.last[volume])

    def _run(self):
        while not self.stopping:
            self.sample()
            time.sleep(0.004)

    def sample(self):
        for volume, objects in self.volumes.items():
            files = read_volume(volume) or read_volume(volume)
            if files is None:
                self.violations.append((time.time(), str(volume), "removed"))
                continue
            seen = payload_versions(files)
            if set(seen) != set(objects):
                self.violations.append((time.time(), str(volume), "incomplete", sorted(files)))
                continue
            for name, versions in seen.items():
                if len(set(versions)) != 1:
                    self.violations.append((time.time(), str(volume), "torn", name, versions))
                    continue
                previous = self.last[volume].get(name, -1)
                if versions[0] < previous:
                    self.violations.append((time.time(), str(volume), "older", name,
                                            previous, versions[0]))
                self.last[volume][name] = max(previous, versions[0])
        self.samples += 1
        now = time.time()
        with self.lock:
            for entry in list(self.pending):
                record, ended, target = entry
                if all(self.last[v].get(o, -1) >= target[o]
                       for v, objs in self.volumes.items() for o in objs):
                    record["recovery_s"] = round(now - ended, 3)
                    self.pending.remove(entry)

    def expect(self, record, ended, target):
        """Records in `record` how long after `ended` every volume showed at least `target`."""
        with self.lock:
            self.pending.append((record, ended, target))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping = True
        self.thread.join()
        self.sample()


class Faults:
    """Starts and ends each kind of fault. start() returns what end() needs."""

    KINDS = ["server-down", "connection-reset", "410-gone", "429", "5xx", "stalled-watch",
             "cut-watch", "token-rotated"]

    def __init__(self, cluster, forwarder, rng):
        self.cluster = cluster
        self.server = cluster.server
        self.forwarder = forwarder
        self.rng = rng
        self.token_generation = 0

    def rule(self, **rule):
        self.server.admin("POST", "faults", dict(rule, user=DAEMON_USER, times=-1))

    def start(self, kind):
        if kind == "server-down":
            self.forwarder.down()
        elif kind == "connection-reset":
            self.rule(reset=True)
            self.server.admin("POST", "drop-watches", {"abort": True})
        elif kind == "410-gone":
            # Watches resume from a compacted revision (the ERROR event), and every new watch is
            # refused with 410 for as long as it lasts: the reflectors relist.
            self.server.admin("POST", "compact")
            self.rule(verb="watch", status=410, reason="Expired")
            self.server.admin("POST", "drop-watches", {"abort": False})
        elif kind == "429":
            self.rule(status=429, retry_after=1)
            self.server.admin("POST", "drop-watches", {"abort": False})
        elif kind == "5xx":
            code = self.rng.choice([500, 502, 503, 504])
            self.rule(status=code, body="html" if code == 502 else "status")
            self.server.admin("POST", "drop-watches", {"abort": self.rng.random() < 0.5})
            return code
        elif kind == "stalled-watch":
            self.rule(verb="watch", watch={"stall": True})
            self.server.admin("POST", "drop-watches", {"abort": True})
        elif kind == "cut-watch":
            self.rule(verb="watch", watch={"close_after_bytes": self.rng.randrange(20, 400),
                                           "abort": self.rng.random() < 0.5})
            self.server.admin("POST", "drop-watches", {"abort": False})
        elif kind == "token-rotated":
            # The server takes the next token at once; the daemon's token file follows when the
            # fault ends (as a projected token the kubelet rotates late): 401s until then.
            old = self.current_token()
            self.token_generation += 1
            new = self.current_token()
            self.cluster.markers.add(new)
            self.server.admin("POST", "tokens", {"token": new, "user": DAEMON_USER})
            self.server.admin("POST", "tokens", {"token": old})
            self.server.admin("POST", "drop-watches", {"abort": False})
        return None

    def current_token(self):
        return DAEMON_TOKEN if self.token_generation == 0 else \
            f"{DAEMON_TOKEN}-{self.token_generation}"

    def end(self, kind):
        self.server.admin("DELETE", "faults")
        if kind == "server-down":
            self.forwarder.up()
        elif kind == "stalled-watch":
            self.server.admin("POST", "drop-watches", {"abort": False})
        elif kind == "token-rotated":
            self.cluster.rotate_token_file(self.current_token())


LOG_RETRY = re.compile(r"^(\S+Z) \S (.*?): .*; (?:relisting|re-watching) in (\d+) ms$")


def pending_retry(log_text, until):
    """The latest moment (time.time()) at which a retry announced in the log before `until` is
    due (each reflector's last announcement): how long recovery may take by the backoff alone."""
    latest = {}
    for line in log_text.splitlines():
        m = LOG_RETRY.match(line)
        if not m:
            continue
        at = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=timezone.utc).timestamp()
        if at > until:
            break
        latest[m.group(2)] = at + int(m.group(3)) / 1000
    return max(latest.values(), default=until)


@pytest.mark.test_server_only("every fault of the test server's, over and over")
def test_api_outage_soak(tmp_path):
    rng = random.Random(SEED)
    print(f"soak: seed {SEED}, {SOAK_SECONDS:.0f} s of faults")
    with TestApiServer() as server:
        cluster = Cluster(tmp_path, server)
        forwarder = SwitchableForwarder(free_port(), server.port)
        forwarder.start()
        try:
            run_soak(cluster, forwarder, rng)
        finally:
            if cluster.proc is not None:
                cluster.stop()
            forwarder.stop()


def run_soak(cluster, forwarder, rng):
    cluster.write_kubeconfig(port=forwarder.port, token_file=True)
    cluster.markers.add(MARKER)
    objects = Objects(cluster)
    for name in CONFIGMAPS + SECRETS:
        objects.put(name, 0)
    # Each pod: a configMap volume (optional, so an outage mistaken for "not found" would empty
    # it), a secret volume, and a projected volume of another ConfigMap and Secret.
    volumes = {}
    for i in range(PODS):
        cm, sec = CONFIGMAPS[i % 3], SECRETS[i % 2]
        pcm, psec = CONFIGMAPS[(i + 1) % 3], SECRETS[(i + 1) % 2]
        projected = {"name": "bundle", "projected": {"sources": [
            {"configMap": {"name": pcm, "items": [{"key": "a", "path": "cm-a"},
                                                  {"key": "b", "path": "cm-b"}]}},
            {"secret": {"name": psec, "items": [{"key": "x", "path": "sec-x"},
                                                {"key": "y", "path": "sec-y"}]}}]}}
        uid = cluster.create_pod(f"web-{i}", [cm_volume("cfg", cm, optional=True),
                                              secret_volume("tls", sec), projected])
        cluster.kubelet_sets_up(uid, CM, "cfg", cm_data(cm, 0))
        cluster.kubelet_sets_up(uid, SECRET, "tls", secret_data(sec, 0))
        pdata = cm_data(pcm, 0)
        sdata = secret_data(psec, 0)
        cluster.kubelet_sets_up(uid, PROJECTED, "bundle", {
            "cm-a": pdata["a"], "cm-b": pdata["b"], "sec-x": sdata["x"], "sec-y": sdata["y"]})
        volumes[cluster.volume_dir(uid, CM, "cfg")] = {cm}
        volumes[cluster.volume_dir(uid, SECRET, "tls")] = {sec}
        volumes[cluster.volume_dir(uid, PROJECTED, "bundle")] = {pcm, psec}

    # Resyncs every 500 ms: the daemon re-verifies every volume all through each fault.
    cluster.start("--sync-frequency", "500ms", "-v", "2")
    cluster.wait_synced(*[f"configmap default/{n}" for n in CONFIGMAPS],
                        *[f"secret default/{n}" for n in SECRETS])

    faults = Faults(cluster, forwarder, rng)
    mutator = Mutator(objects, rng)
    long_run = SOAK_SECONDS > 120
    figures = {"seed": SEED, "fault_seconds": SOAK_SECONDS, "faults": {}, "records": []}
    started = time.monotonic()
    with ForwardOnlySampler(volumes) as sampler:
        mutator.start()
        try:
            order = []
            while time.monotonic() - started < SOAK_SECONDS:
                if not order:
                    order = rng.sample(Faults.KINDS, len(Faults.KINDS))
                kind = order.pop()
                hold = rng.uniform(1.0, 8.0) if long_run else rng.uniform(1.0, 3.0)
                since = time.time()
                record = {"kind": kind, "hold_s": round(hold, 2), "recovery_s": None}
                record["detail"] = faults.start(kind)
                time.sleep(hold)
                faults.end(kind)
                ended = time.time()
                sampler.expect(record, ended, objects.current())
                assert cluster.proc.poll() is None, f"the daemon exited during the {kind}"
                record["failed_requests"] = len([
                    r for r in cluster.daemon_requests(since)
                    if r["time"] <= ended and (r.get("reset") or r.get("code", 200) >= 400)])
                figures["records"].append(record)
                figures["faults"][kind] = figures["faults"].get(kind, 0) + 1
                # The next fault comes 0-4 s later, whether or not the daemon has caught up:
                # its backoff grows, as in a long outage. Every 8th fault (a quiet spell)
                # waits for recovery first.
                if len(figures["records"]) % 8 == 0:
                    wait_recovered(cluster, sampler, record, ended)
                time.sleep(rng.uniform(0.0, 4.0))
            last = figures["records"][-1]
            wait_recovered(cluster, sampler, last, ended)
        finally:
            mutator.stop()
        figures["fault_phase_s"] = round(time.monotonic() - started, 1)
        final = objects.current()

        def expected(volume):
            names = volumes[volume]
            if len(names) == 1:
                (name,) = names
                data = cm_data(name, final[name]) if name in CONFIGMAPS else \
                    secret_data(name, final[name])
                return {k: v.encode() for k, v in data.items()}
            pcm = next(n for n in names if n in CONFIGMAPS)
            psec = next(n for n in names if n in SECRETS)
            p, s = cm_data(pcm, final[pcm]), secret_data(psec, final[psec])
            return {"cm-a": p["a"].encode(), "cm-b": p["b"].encode(),
                    "sec-x": s["x"].encode(), "sec-y": s["y"].encode()}
        wait_for(lambda: all(visible_files(v) == expected(v) for v in volumes),
                 timeout=RECOVERY_BOUND_S, what="every volume equal to the API's content")
    records = figures["records"]
    recovered = [r["recovery_s"] for r in records if r["recovery_s"] is not None]
    figures.update(
        faults_total=len(records), samples=sampler.samples, object_changes=objects.changes,
        volumes=len(volumes), violations=len(sampler.violations),
        failed_requests=sum(r["failed_requests"] for r in records),
        recovered_before_next_fault=len(recovered),
        recovery_s={"median": statistics.median(recovered), "max": max(recovered)},
        after_last_fault=records[-1]["recovery_detail"],
        restarts=0)
    print("soak figures: " + json.dumps({k: v for k, v in figures.items() if k != "records"}))
    if REPORT:
        Path(REPORT).write_text(json.dumps(figures, indent=1) + "\n")
    assert sampler.violations == [], sampler.violations[:20]
    assert cluster.proc.poll() is None
    assert figures["failed_requests"] > 0, "no fault ever reached the daemon"
    if long_run:
        late = [r["recovery_detail"] for r in records if "recovery_detail" in r and
                r["recovery_detail"]["beyond_backoff_s"] > 1.0]
        assert not late, f"recovered more than 1 s after the backoff: {late}"
    cluster.assert_no_secret_leaked()


def wait_recovered(cluster, sampler, record, ended):
    """Waits until every volume shows at least the API's versions of the moment the fault of
    `record` ended, and records how long that took beyond the last retry the daemon had
    announced by then (its backoff). The bound is two of the reflectors' longest waits plus 1 s:
    the retry after a fault may find its resourceVersion compacted by an earlier one (410) and
    relist after one more wait, as client-go's reflector does."""
    wait_for(lambda: record["recovery_s"] is not None, timeout=2 * RECOVERY_BOUND_S,
             what=f"every volume at the API's versions of the end of the {record['kind']}")
    due = pending_retry(cluster.log(), ended + record["recovery_s"])
    record["recovery_detail"] = {
        "kind": record["kind"], "recovery_s": record["recovery_s"],
        "backoff_pending_s": round(max(0.0, due - ended), 3),
        "beyond_backoff_s": round(max(0.0, ended + record["recovery_s"] - max(ended, due)), 3)}
