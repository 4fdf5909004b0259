"""Dynamic config end to end: the real binary in cluster mode with --dynamic-config against the
test API server (and the real kube-apiserver where no fault is needed: api_servers.py). The test plays the DaemonSet: it restarts the daemon whenever it exits. Each
transition of dynamicconfig/ (docs/operations.md, "Dynamic config"): a live apply, a restart
apply, an invalid config rejected with an Event, a rollback after repeated crashes on trial, a
start with the API server down on the checkpoint, and corrupt checkpoints."""
import json
import re
import signal
import sys
from pathlib import Path

import pytest

from conftest import wait_for
from test_admin import get, metrics, sample
from test_cluster import DAEMON_USER, Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from api_servers import SERVERS, api_server  # noqa: E402

NS = "default"
NAME = "vm-config"
NODE = "e2e-node"
EXIT_RESTART = 5


def config_text(**fields):
    lines = ["apiVersion: volumemanager.io/v1alpha1", "kind: VolumeManagerConfiguration"]
    lines += [f"{k}: {json.dumps(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


class Node(Cluster):
    def __init__(self, tmp, server):
        super().__init__(tmp, server, "http1")
        self.dir = tmp / "dynamic-config"

    def start_dynamic(self, *extra, trial="10m"):
        """Starts the daemon; (probe, debug) URLs of this run's admin endpoints."""
        before = len(self.log())
        self.start("--dynamic-config", f"{NS}/{NAME}", "--dynamic-config-dir", str(self.dir),
                   "--dynamic-config-trial-duration", trial, *extra)

        def find():
            text = self.log()[before:]
            probe = re.findall(r"serving /healthz, /readyz and /metrics on ([0-9.:]+)", text)
            debug = re.findall(r"serving /debug/state and /configz on ([0-9.:]+)", text)
            return probe and debug and (f"http://{probe[0]}", f"http://{debug[0]}")
        return wait_for(find, what="this run's admin endpoints in the log")

    def configz(self, debug):
        return json.loads(get(debug + "/configz")[1])

    def assign(self, name=NAME, **fields):
        return self.put_configmap(name, {"volumemanager": config_text(**fields)})

    def wait_exit(self, timeout=30):
        code = self.proc.wait(timeout=timeout)
        self.proc = None
        self._log.close()
        return code

    def api_down(self):
        self.server.admin("POST", "faults", {"user": DAEMON_USER, "status": 503, "times": -1})

    def config_events(self, reason):
        return [e for e in self.events(NS) if e["reason"] == reason and
                e["involvedObject"]["kind"] == "ConfigMap"]


@pytest.fixture(params=SERVERS)
def node(request, tmp_path):
    with api_server(request.param, tmp_path) as server:
        n = Node(tmp_path, server)
        try:
            yield n
        finally:
            if n.proc is not None:
                n.stop(signal.SIGKILL)


def rv(obj):
    return obj["metadata"]["resourceVersion"]


@pytest.mark.test_server_only("503s for the daemon alone (fault hook) for the start with the API down")
def test_live_apply_then_restart_apply_then_a_start_with_the_api_down_uses_the_checkpoint(node):
    probe, debug = node.start_dynamic(trial="1s")
    wait_for(lambda: node.records(msg="Listed",
                                  reflector=f"dynamic config configmap {NS}/{NAME}-{NODE}"),
             what="the watches")
    assert node.configz(debug)["dynamicConfig"]["active"] is None
    pid = node.proc.pid

    # Live fields: applied in the running process, on trial, then last known good. -v 1 on the
    # command line wins over the config's verbosity.
    cm = node.assign(syncFrequency="3m", objectCacheTTL="7s", logging={"verbosity": 3})
    wait_for(lambda: (node.configz(debug)["dynamicConfig"]["lastKnownGood"] or {}).get(
        "resourceVersion") == rv(cm), what="the config applied and through its trial")
    z = node.configz(debug)
    assert z["volumemanager"]["syncFrequency"] == "3m"
    assert z["sources"]["syncFrequency"] == "dynamic"
    assert z["volumemanager"]["objectCacheTTL"] == "7s"
    assert z["volumemanager"]["logging"]["verbosity"] == 1
    assert z["sources"]["logging.verbosity"] == "flag"
    assert z["dynamicConfig"]["active"]["resourceVersion"] == rv(cm)
    assert z["dynamicConfig"]["lastError"] is None
    assert node.proc.poll() is None and node.proc.pid == pid
    families, _ = metrics(probe)
    assert sample(families, "volumemanager_dynamic_config_applies_total", mode="live") == 1
    assert sample(families, "volumemanager_dynamic_config_applies_total", mode="restart") == 0

    # A field that is not live: checkpointed, then a graceful exit with its own status.
    cm2 = node.assign(syncFrequency="3m", fsync=True)
    assert node.wait_exit() == EXIT_RESTART
    assert "changes fsync, which need a restart" in node.log()

    # Restarted with the API server down: it runs on the checkpoint.
    node.api_down()
    _, debug = node.start_dynamic()
    wait_for(lambda: node.configz(debug)["volumemanager"]["fsync"] is True,
             what="the checkpointed config")
    z = node.configz(debug)
    assert z["dynamicConfig"]["active"]["resourceVersion"] == rv(cm2)
    assert z["dynamicConfig"]["onTrial"] is True
    assert z["dynamicConfig"]["lastKnownGood"]["resourceVersion"] == rv(cm)
    assert z["sources"]["fsync"] == "dynamic"
    assert node.stop() == 0


def test_an_invalid_config_is_rejected_with_an_event_and_changes_nothing(node):
    probe, debug = node.start_dynamic()
    cm = node.assign(syncFrequency="0s")
    wait_for(lambda: node.config_events("DynamicConfigRejected"), what="the rejection Event")
    event = node.config_events("DynamicConfigRejected")[0]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == NAME
    assert event["involvedObject"]["uid"] == cm["metadata"]["uid"]
    assert "field syncFrequency: --sync-frequency: must be greater than 0" in event["message"]
    z = node.configz(debug)
    assert "must be greater than 0" in z["dynamicConfig"]["lastError"]
    assert z["dynamicConfig"]["active"] is None and z["dynamicConfig"]["assigned"] is None
    assert z["volumemanager"]["syncFrequency"] == "1m"
    assert sample(metrics(probe)[0], "volumemanager_dynamic_config_rejections_total") == 1
    assert not (node.dir / "assigned.json").exists()

    # This node's own ConfigMap wins over the shared one.
    mine = node.assign(name=f"{NAME}-{NODE}", syncFrequency="4m")
    wait_for(lambda: (node.configz(debug)["dynamicConfig"]["active"] or {}).get(
        "resourceVersion") == rv(mine), what="the per-node config applied")
    assert node.configz(debug)["dynamicConfig"]["active"]["name"] == f"{NAME}-{NODE}"
    assert node.proc.poll() is None


def test_repeated_crashes_on_trial_roll_back_to_the_last_known_good_config(node):
    good = node.assign(syncFrequency="2m")
    _, debug = node.start_dynamic(trial="1s")
    wait_for(lambda: (node.configz(debug)["dynamicConfig"]["lastKnownGood"] or {}).get(
        "resourceVersion") == rv(good), what="the first config last known good")
    assert node.stop() == 0

    _, debug = node.start_dynamic()
    # Passes validation, fails every start: a quantity is parsed when the daemon starts.
    bad = node.assign(syncFrequency="2m", nodeAllocatable={"cpu": "lots"})
    assert node.wait_exit() == EXIT_RESTART
    # As the DaemonSet would: restart it whenever it exits. Three starts fail, the fourth rolls
    # back.
    for _ in range(3):
        node.start("--dynamic-config", f"{NS}/{NAME}", "--dynamic-config-dir", str(node.dir))
        assert node.wait_exit() not in (0, EXIT_RESTART)
    probe, debug = node.start_dynamic()
    wait_for(lambda: node.config_events("DynamicConfigRolledBack"), what="the rollback Event")
    event = node.config_events("DynamicConfigRolledBack")[0]
    assert event["involvedObject"]["resourceVersion"] == rv(bad)
    assert "3 of 3 runs during its trial ended without a graceful stop" in event["message"]
    z = node.configz(debug)["dynamicConfig"]
    assert z["active"]["resourceVersion"] == rv(good)
    assert z["rolledBack"]["resourceVersion"] == rv(bad)
    assert "rolled back" in z["lastError"]
    assert sample(metrics(probe)[0], "volumemanager_dynamic_config_rollbacks_total") == 1
    # The rolled-back revision is not tried again: the daemon keeps running.
    assert node.proc.poll() is None
    assert node.stop() == 0


@pytest.mark.test_server_only("503s for the daemon alone (fault hook): the checkpoint is read with the API down")
def test_a_corrupt_checkpoint_falls_back_with_an_error(node):
    good = node.assign(syncFrequency="2m")
    _, debug = node.start_dynamic(trial="1s")
    wait_for(lambda: (node.configz(debug)["dynamicConfig"]["lastKnownGood"] or {}).get(
        "resourceVersion") == rv(good), what="the config last known good")
    assert node.stop() == 0
    node.api_down()

    # The assigned checkpoint corrupt: the last known good one.
    (node.dir / "assigned.json").write_text('{"kind": "VolumeManagerConfigCheckpoint", "ver')
    _, debug = node.start_dynamic()
    z = node.configz(debug)
    assert z["dynamicConfig"]["active"]["resourceVersion"] == rv(good)
    assert "assigned.json: corrupt" in z["dynamicConfig"]["lastError"]
    assert z["volumemanager"]["syncFrequency"] == "2m"
    assert "assigned.json: corrupt" in node.log()
    assert (node.dir / "assigned.json.corrupt").exists()
    assert node.stop() == 0

    # Both corrupt: the file and flags alone.
    (node.dir / "assigned.json").write_text("garbage")
    (node.dir / "last-known-good.json").write_text("garbage")
    _, debug = node.start_dynamic()
    z = node.configz(debug)
    assert z["dynamicConfig"]["active"] is None
    assert "using the file and flags alone" in z["dynamicConfig"]["lastError"]
    assert z["volumemanager"]["syncFrequency"] == "1m"
    assert node.stop() == 0


@pytest.mark.test_server_only("the start is refused before any request: one server is enough")
def test_a_newer_releases_checkpoint_refuses_the_start_and_stays_in_place(node):
    """A rollback to a release that reads an older checkpoint format (docs/upgrades.md): no
    start, exit 1, the error naming the file and its format version, and no checkpoint set aside
    or rewritten."""
    good = node.assign(syncFrequency="2m")
    _, debug = node.start_dynamic(trial="1s")
    wait_for(lambda: (node.configz(debug)["dynamicConfig"]["lastKnownGood"] or {}).get(
        "resourceVersion") == rv(good), what="the config last known good")
    assert node.stop() == 0
    assigned = node.dir / "assigned.json"
    doc = json.loads(assigned.read_text())
    assert doc["version"] == 1
    doc["version"] = 2
    assigned.write_text(json.dumps(doc) + "\n")
    before = {p.name: p.read_bytes() for p in node.dir.iterdir()}
    mark = len(node.log())
    node.start("--dynamic-config", f"{NS}/{NAME}", "--dynamic-config-dir", str(node.dir))
    assert node.wait_exit() == 1
    said = node.log()[mark:]
    assert (f"{assigned}: dynamic config checkpoint format version 2 is newer than this release "
            "reads (version 1)") in said, said
    assert "Refusing to start" in said, said
    assert {p.name: p.read_bytes() for p in node.dir.iterdir()} == before
