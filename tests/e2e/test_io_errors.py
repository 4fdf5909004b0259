"""I/O errors (EIO) under the root dir, at daemon level: the real binary runs with the I/O-error
shim (io_error_shim.c, LD_PRELOAD) on a real root dir, and the test makes one kind of filesystem
call after another fail with EIO below it (file writes, fsyncs, file creation, mkdir, symlink,
rename), each while both objects change. The kernel here offers no failing block device
(RELIABILITY.md, "Disk full and I/O errors").

For each kind of failing call: every volume keeps its last complete content (a sampler reading
them every 3 ms sees each version whole, in order, nothing in between), no staging link or
unpublished version dir stays behind, every attempt is logged naming the pod, the volume, the
object(s) and the error, the attempts back off (each one waits at least the delay the one before
announced, and every injected failure belongs to a logged attempt: no silent tight loop), and
once the errors stop every volume converges. Cluster mode also posts a FailedMount Event.
"""
import os
import signal
import sys
from datetime import datetime
from pathlib import Path

import pytest

from conftest import NODE, Env, configmap, pod, secret, visible_files, wait_for
from test_disk_full import DELAY, VersionSampler, as_bytes, no_debris, small_payload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from harness import TestApiServer  # noqa: E402
from test_cluster import Cluster  # noqa: E402

SHIM = os.environ.get("VM_IO_ERROR_SHIM", "build/lib/libio_error_shim.so")
CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
PROJECTED = "kubernetes.io~projected"
EIO_TEXT = "input/output error"

# The shim's operation names (io_error_shim.c), in the order the phases switch them on, with the
# word the daemon's error names the failed call by.
PHASES = [("write", "write"), ("fsync", "fsync"), ("create", "create"), ("mkdir", "mkdir"),
          ("symlink", "symlink"), ("rename", "rename")]


class IoErrors:
    """The shim for the daemons this test starts: EIO for calls below `fault_dir` while on."""

    def __init__(self, tmp: Path, fault_dir: Path, monkeypatch):
        shim = Path(SHIM).resolve()
        assert shim.is_file(), f"{shim}: the I/O-error shim is not built (make test-build)"
        self.control = tmp / "io-errors.on"
        self.log = tmp / "io-errors.log"
        # Only the daemon's process inherits these (the test starts nothing else afterwards).
        monkeypatch.setenv("LD_PRELOAD", str(shim))
        monkeypatch.setenv("VM_IO_ERROR_DIR", str(fault_dir))
        monkeypatch.setenv("VM_IO_ERROR_CONTROL", str(self.control))
        monkeypatch.setenv("VM_IO_ERROR_LOG", str(self.log))

    def fail(self, op):
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(op + "\n")
        os.replace(tmp, self.control)  # the shim never reads a half-written file

    def stop(self):
        self.control.unlink()

    def injected(self, op, below):
        """Paths of the failures of `op` the shim injected at or below dir `below`."""
        if not self.log.exists():
            return []
        prefix = str(below) + "/"
        out = []
        for line in self.log.read_text().splitlines():
            got_op, path = line.split(" ", 1)
            if got_op == op and (path + "/").startswith(prefix):
                out.append(path)
        return out


def failed_mounts(daemon, volume, pod_uid):
    """FailedMount records of `volume` of the pod, oldest first."""
    return daemon.records(msg="FailedMount: MountVolume.SetUp failed", volume=volume,
                          podUID=pod_uid)


def delay_s(text):
    m = DELAY.match(text)
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0) / (1000 if m.group(3) == "ms" else 1)


def timestamp(record):
    return datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def assert_backs_off(records):
    """Each attempt announced a longer delay than the one before, and came no sooner than the
    delay the one before announced (the log's time has milliseconds)."""
    delays = [delay_s(r["durationBeforeRetry"]) for r in records]
    assert all(b > a for a, b in zip(delays, delays[1:])), delays
    for before, after in zip(records, records[1:]):
        gap = timestamp(after) - timestamp(before)
        assert gap >= delay_s(before["durationBeforeRetry"]) - 0.002, \
            (f"retried {gap:.3f}s after an attempt that announced "
             f"{before['durationBeforeRetry']}", records)


def payload(gen):
    return small_payload(gen)


def secret_payload(gen):
    return {k: f"SECRET-MARKER {v}" for k, v in small_payload(gen).items()}


def bundle_payload(gen):
    out = {f"cfg/{k}": v for k, v in payload(gen).items()}
    out.update({f"sec/{k}": v for k, v in secret_payload(gen).items()})
    return out


def put_objects(env, gen):
    """Both objects in one manifest file, so they change together: an object change lets a
    failed volume retry at once (volume_manager.cc, OnObjectChanged), and the attempts after it
    must follow the backoff."""
    env.put_object([configmap("cfg", payload(gen)), secret("sec", string_data=secret_payload(gen))],
                   name="objects.yaml")


def test_standalone_io_errors_keep_content_back_off_and_converge(tmp_path, monkeypatch):
    env = Env(tmp_path)
    errors = IoErrors(tmp_path, env.root, monkeypatch)
    try:
        run_standalone(env, errors)
    finally:
        env.stop(signal.SIGKILL)  # no-op once stopped


def run_standalone(env, errors):
    gen = 1
    put_objects(env, gen)
    bundle_spec = {"name": "bundle", "projected": {"sources": [
        {"configMap": {"name": "cfg", "items": [{"key": k, "path": f"cfg/{k}"}
                                                for k in payload(gen)]}},
        {"secret": {"name": "sec", "items": [{"key": k, "path": f"sec/{k}"}
                                             for k in payload(gen)]}}]}}
    env.put_pod(pod("p1", [{"name": "cfg", "configMap": {"name": "cfg"}},
                           {"name": "sec", "secret": {"secretName": "sec"}}, bundle_spec],
                    uid="p1"))
    # --no-tmpfs: the secret volume is on the root dir too; --fsync: files and dirs are synced.
    env.start("--no-tmpfs", "--fsync")
    cfg_names = {"object": "configmap/default/cfg"}
    volumes = {  # (pod UID, volume) -> (dir, what its FailedMount lines name, content at a gen)
        ("p1", "cfg"): (env.volume_dir("p1", CM, "cfg"), cfg_names,
                        lambda g: as_bytes(payload(g))),
        ("p1", "sec"): (env.volume_dir("p1", SECRET, "sec"), {"object": "secret/default/sec"},
                        lambda g: as_bytes(secret_payload(g))),
        ("p1", "bundle"): (env.volume_dir("p1", PROJECTED, "bundle"),
                           {"objects": "configmap/default/cfg,secret/default/sec"},
                           lambda g: as_bytes(bundle_payload(g))),
    }
    first_gen = {key: gen for key in volumes}
    for vdir, _, content in volumes.values():
        wait_for(lambda: visible_files(vdir) == content(gen) and no_debris(vdir), timeout=60,
                 what=f"{vdir}: first content")
    p2 = env.volume_dir("p2", CM, "cfg")
    with VersionSampler(*[v[0] for v in volumes.values()]) as sampler:
        for op, call in PHASES:
            seen_before = {key: len(failed_mounts(env, key[1], key[0])) for key in volumes}
            errors.fail(op)
            gen += 1
            put_objects(env, gen)
            if op == "write":
                # A new pod's first mount fails too: no ..data appears.
                env.put_pod(pod("p2", [{"name": "cfg", "configMap": {"name": "cfg"}}],
                                uid="p2"))
            for (uid, name), (vdir, names, content) in volumes.items():
                before = seen_before[(uid, name)]
                records = wait_for(lambda: failed_mounts(env, name, uid)[before:]
                                   if len(failed_mounts(env, name, uid)) >= before + 3 else None,
                                   timeout=60, what=f"three failed attempts of {vdir} ({op})")
                for r in records:
                    assert r["pod"] == f"default/{uid}-{NODE}", r
                    assert all(r.get(k) == v for k, v in names.items()), (names, r)
                    assert EIO_TEXT in r["err"].lower() and r["err"].startswith(call), r
                assert_backs_off(records)
                # Every injected failure is one logged attempt (one may be in flight).
                injected = errors.injected(op, vdir)
                logged = len(failed_mounts(env, name, uid)) - before
                assert logged <= len(injected) <= logged + 1, (op, vdir, logged, injected)
                # The last complete content, and nothing of the failed writes.
                assert visible_files(vdir) == content(gen - 1), (op, vdir)
                assert no_debris(vdir), (op, vdir, os.listdir(vdir))
            if op == "write":
                wait_for(lambda: len(failed_mounts(env, "cfg", "p2")) >= 2, timeout=60,
                         what="two failed first mounts of p2")
                assert not (p2 / "..data").exists() and not os.path.islink(p2 / "..data")
            errors.stop()
            for vdir, _, content in volumes.values():
                wait_for(lambda: visible_files(vdir) == content(gen) and no_debris(vdir),
                         timeout=60, what=f"{vdir} converged once {op} works again")
            if op == "write":
                wait_for(lambda: visible_files(p2) == as_bytes(payload(gen)) and no_debris(p2),
                         timeout=60, what="p2's volume set up once writes work again")
                # From now on p2's volume goes through the same faults as p1's.
                volumes[("p2", "cfg")] = (p2, cfg_names, lambda g: as_bytes(payload(g)))
                first_gen[("p2", "cfg")] = gen
                sampler.add(p2)
    for key, (vdir, _, content) in volumes.items():
        # Each version whole, in order, and nothing else (no version written in part).
        assert sampler.seen[vdir] == [content(g) for g in range(first_gen[key], gen + 1)], \
            (vdir, [sorted(s) for s in sampler.seen[vdir]])
    assert env.stop() == 0


@pytest.mark.test_server_only("the fault is the node's filesystem calls; the server only takes "
                              "the Event, which the real-server tests post too")
def test_cluster_mode_io_errors_post_failed_mount_events_and_converge(tmp_path, monkeypatch):
    with TestApiServer() as server:
        cluster = Cluster(tmp_path, server)
        try:
            run_cluster(cluster, IoErrors(tmp_path, cluster.root, monkeypatch))
            cluster.assert_no_secret_leaked()
        finally:
            if cluster.proc is not None:
                cluster.stop(signal.SIGKILL)


def run_cluster(cluster, errors):
    cluster.put_configmap("app", payload(1))
    uid = cluster.create_pod("web", [{"name": "cfg", "configMap": {"name": "app"}}])
    # No other writer: the version a write replaces may go at once (no_debris holds at once).
    cluster.start("--volume-ownership", "self", "--unpublished-grace", "0s")
    cfg = cluster.volume_dir(uid, CM, "cfg")
    wait_for(lambda: visible_files(cfg) == as_bytes(payload(1)), timeout=60,
             what="first content")
    errors.fail("write")
    cluster.put_configmap("app", payload(2))
    events = wait_for(lambda: [e for e in cluster.events() if e["reason"] == "FailedMount"
                               and e["involvedObject"]["uid"] == uid], timeout=60,
                      what="a FailedMount event")
    assert events[0]["type"] == "Warning"
    message = events[0]["message"]
    assert message.startswith('MountVolume.SetUp failed for volume "cfg" : write '), message
    assert EIO_TEXT in message.lower(), message
    records = wait_for(lambda: failed_mounts(cluster, "cfg", uid)
                       if len(failed_mounts(cluster, "cfg", uid)) >= 2 else None,
                       timeout=60, what="a second failed attempt, later")
    assert all(r["object"] == "configmap/default/app" for r in records), records
    assert_backs_off(records)
    assert visible_files(cfg) == as_bytes(payload(1))
    assert no_debris(cfg), os.listdir(cfg)
    errors.stop()
    wait_for(lambda: visible_files(cfg) == as_bytes(payload(2)) and no_debris(cfg),
             timeout=60, what="converged once writes work again")
    assert cluster.stop() == 0


def test_pod_removed_while_the_ownership_journal_cannot_be_written(tmp_path, monkeypatch):
    """EIO on the state dir: the teardown of a removed pod's volume fails when the journal
    cannot record the release; once writes work again the retry releases it and removes the dirs
    the daemon made (RELIABILITY.md, "Disk full and I/O errors", finding 2)."""
    env = Env(tmp_path)
    errors = IoErrors(tmp_path, env.state, monkeypatch)
    try:
        env.put_object(configmap("cfg", payload(1)))
        env.put_pod(pod("p1", [{"name": "cfg", "configMap": {"name": "cfg"}}], uid="p1"))
        env.start("--no-tmpfs")
        vdir = env.volume_dir("p1", CM, "cfg")
        wait_for(lambda: visible_files(vdir) == as_bytes(payload(1)), timeout=60,
                 what="first content")
        errors.fail("write")
        (env.pods / "p1.yaml").unlink()
        failed = wait_for(lambda: env.records(msg="UnmountVolume.TearDown failed", podUID="p1",
                                              volume="cfg"), timeout=60,
                          what="a teardown failing on the journal")
        assert EIO_TEXT in failed[0]["err"].lower() and "ownership.journal" in failed[0]["err"]
        assert errors.injected("write", env.state)
        errors.stop()
        # The pod dir and everything below it were the daemon's: all of it goes.
        wait_for(lambda: not (env.root / "pods" / "p1").exists(), timeout=60,
                 what="the removed pod's dirs gone once the journal can be written")
        assert not env.records(podUID="p1", msg=lambda m: "left in place" in m), \
            "the daemon took its own volume for one it did not set up"
        assert env.stop() == 0
    finally:
        env.stop(signal.SIGKILL)  # no-op once stopped
