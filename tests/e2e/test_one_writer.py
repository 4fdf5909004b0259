"""One writer for real: a daemon writes nothing to the state dir or the root dir before it holds
the node's lock (no journal rewrite, no reconstruction), yet a standby is Ready, so a surge
rollout (maxSurge 1, maxUnavailable 0) does not stall; the flock is taken with
--leader-elect=false too. A holder that loses the lock changes nothing under the root dir from then
on (the I/O shim's trace of every call there, io_error_shim.c)."""
import calendar
import json
import os
import re
import signal
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from api_servers import SERVERS
from conftest import (DaemonProcess, configmap, mounts_under, pod, readyz, secret, visible_files,
                      wait_for)
from test_election import holder, second_daemon, writers
from test_standalone import CM, cm_volume

SECRET = "kubernetes.io~secret"
JOURNAL = "ownership.journal"
SHIM = os.environ.get("VM_IO_ERROR_SHIM", "build/lib/libio_error_shim.so")
# The name the removal queue gives an entry it has claimed (atomicwriter/removal_queue.h).
REMOVING = "..volumemanager_removing."


def journal_volumes(state):
    """The volumes the ownership journal lists as owned (the records replayed in order)."""
    owned = set()
    path = state / JOURNAL
    if not path.exists():
        return owned
    for line in path.read_text().splitlines()[1:]:
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[2] != "volume" or parts[1] not in ("+", "-"):
            continue  # a dir record, a volume dir's inode, or an incomplete last line
        (owned.add if parts[1] == "+" else owned.discard)(parts[3])
    return owned


def disk_volumes(root):
    """The volume dirs under the root dir, as the journal names them."""
    return {str(p.relative_to(root)) for p in root.glob("pods/*/volumes/*/*") if p.is_dir()}


def journal_matches_disk(env, what):
    wait_for(lambda: journal_volumes(env.state) == disk_volumes(env.root),
             what=f"{what}: the journal listing exactly the volumes on disk "
                  f"(journal {sorted(journal_volumes(env.state))}, "
                  f"disk {sorted(disk_volumes(env.root))})")


def test_a_successor_takes_over_the_volumes_its_predecessor_set_up_while_it_waited(env):
    """Two daemons on one state dir and root dir: while the first holds the lock, pods come and go
    and it sets them up; it is killed; the second takes over and tears those volumes down when
    their pods go (not "left in place"). The journal matches the disk at every step."""
    env.put_object(configmap("cfg", {"k": "0"}))
    env.put_object(secret("s", string_data={"s": "x"}))
    env.put_pod(pod("p0", [cm_volume("v", "cfg")], uid="u0"))
    env.start()
    a = wait_for(lambda: holder(env), what="the first daemon holding the lock")
    wait_for(lambda: visible_files(env.volume_dir("u0", CM, "v")) == {"k": b"0"},
             what="the first pod's volume")
    journal_matches_disk(env, "before the newcomer")
    inode = os.stat(env.state / JOURNAL).st_ino

    b = second_daemon(env, "b")
    try:
        wait_for(lambda: f"held by {a}: waiting" in b.log(), what="the second daemon waiting")
        # It has not touched the journal (no rewrite: same inode), nor reconstructed anything.
        assert os.stat(env.state / JOURNAL).st_ino == inode
        assert "reconstructed" not in b.log()

        # Pods come and go while the first daemon holds the lock.
        env.put_pod(pod("p1", [cm_volume("v", "cfg")], uid="u1"))
        env.put_pod(pod("p2", [cm_volume("v", "cfg"), {"name": "sv", "secret": {"secretName": "s"}}],
                        uid="u2"))
        wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")) == {"k": b"0"},
                 what="p1's volume")
        wait_for(lambda: visible_files(env.volume_dir("u2", SECRET, "sv")) == {"s": b"x"},
                 what="p2's secret volume")
        journal_matches_disk(env, "after two new pods")
        os.remove(env.pods / "p0.yaml")
        wait_for(lambda: not (env.root / "pods" / "u0").exists(), what="p0's teardown")
        journal_matches_disk(env, "after a pod went")
        assert writers(b) == set()

        env.stop(signal.SIGKILL)
        b_id = wait_for(lambda: holder(b), timeout=5, what="the second daemon holding the lock")
        wait_for(lambda: "reconstructed 3 volume(s)" in b.log(),
                 what="the successor adopting the three volumes its predecessor set up")
        journal_matches_disk(env, "after the takeover")

        # Their pods go: the successor tears their volumes down.
        os.remove(env.pods / "p1.yaml")
        os.remove(env.pods / "p2.yaml")
        wait_for(lambda: not (env.root / "pods" / "u1").exists()
                 and not (env.root / "pods" / "u2").exists(), what="the successor's teardowns")
        assert "left in place" not in b.log()
        assert mounts_under(env.root / "pods") == []
        journal_matches_disk(env, "after the teardowns")
        assert writers(b) <= {b_id}
        assert b.stop() == 0
    finally:
        b.stop(signal.SIGKILL)


def test_a_standby_is_ready_while_the_old_pod_holds_the_lock(env):
    """A surge update (maxSurge 1, maxUnavailable 0): the new pod must become Ready while the old
    one still holds the lock, or the rollout never stops the old one."""
    env.put_object(configmap("cfg", {"k": "0"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    a = wait_for(lambda: holder(env), what="the first daemon holding the lock")
    b = second_daemon(env, "b")
    try:
        wait_for(lambda: f"held by {a}: waiting" in b.log(), what="the standby waiting")
        status, body = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(readyz(b)),
                                what=f"the standby Ready (last: {readyz(b)})")
        assert "volume-reconstruction" in body
        _, debug = b.admin_addresses()
        with urllib.request.urlopen(debug + "/debug/state", timeout=5) as r:
            state = json.loads(r.read())
        assert state["leaderElection"]["isLeader"] is False
        assert state["leaderElection"]["leader"] == a
        assert writers(b) == set()
        # The rollout stops the old pod; the standby takes over and stays Ready.
        assert env.stop() == 0
        wait_for(lambda: holder(b), timeout=5, what="the standby holding the lock")
        wait_for(lambda: readyz(b)[0] == 200, what="Ready after the takeover")
        assert b.stop() == 0
    finally:
        b.stop(signal.SIGKILL)


def test_without_leader_election_the_flock_is_still_taken(env):
    """--leader-elect=false adds no Lease, but two daemons on one state dir still never both
    write: the flock is always taken."""
    env.put_object(configmap("cfg", {"k": "0"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    d = env.volume_dir("u1", CM, "v")
    env.start("--leader-elect=false")
    a = wait_for(lambda: holder(env), what="the first daemon holding the flock")
    wait_for(lambda: visible_files(d) == {"k": b"0"}, what="the content")
    b = DaemonProcess(env.tmp / "b.log")
    b.run(["--root-dir", str(env.root), "--state-dir", str(env.state), "--node-name", "e2e-node",
           "--pod-manifest-path", str(env.pods), "--object-manifest-path", str(env.objects),
           "--unpublished-grace", "0s", "-v", "1", "--leader-elect=false"])
    try:
        wait_for(lambda: f"held by {a}: waiting" in b.log(), what="the second daemon waiting")
        env.put_object(configmap("cfg", {"k": "1"}))
        wait_for(lambda: visible_files(d) == {"k": b"1"}, what="an update by the holder")
        assert writers(b) == set()
        assert re.search(r"Lease|lease", b.log()) is None
        assert env.stop() == 0
        b_id = wait_for(lambda: holder(b), timeout=5, what="the second daemon taking over")
        env.put_object(configmap("cfg", {"k": "2"}))
        wait_for(lambda: visible_files(d) == {"k": b"2"}, what="the successor's write")
        wait_for(lambda: writers(b) == {b_id}, what="the write logged with its writer")
        assert b.stop() == 0
    finally:
        b.stop(signal.SIGKILL)


def lose_the_lock(env, tmp_path, timeout):
    """Makes the lock file unusable under the holder (a symlink planted at its path): every
    renewal fails, the term ends at the renew deadline (10 s) and the daemon exits 6, within
    `timeout` seconds. Returns the lock's path (unlink it to make it usable again)."""
    lock = env.state / "leader.lock"
    lock.unlink()
    os.symlink(tmp_path / "elsewhere", lock)
    assert env.proc.wait(timeout=timeout) == 6
    env.proc = None
    env._log.close()
    return lock


def test_a_holder_that_loses_the_lock_after_writing_restarts(env, tmp_path):
    """The lock made unusable under the holder (a symlink planted at its path: every renewal
    fails): at the renew deadline the holder writes nothing more and exits (6) instead of
    campaigning again with a journal and volumes it no longer knows (a successor may rewrite
    both meanwhile). Restarted, it reads them afresh and tears down what the successor set up."""
    env.put_object(configmap("cfg", {"k": "0"}))
    env.put_pod(pod("p0", [cm_volume("v", "cfg")], uid="u0"))
    env.start()
    a = wait_for(lambda: holder(env), what="the first daemon holding the lock")
    wait_for(lambda: visible_files(env.volume_dir("u0", CM, "v")) == {"k": b"0"},
             what="the first pod's volume")
    b = second_daemon(env, "b")
    try:
        wait_for(lambda: f"held by {a}: waiting" in b.log(), what="the second daemon waiting")
        lock = lose_the_lock(env, tmp_path, timeout=30)
        assert "after writing: no new writes; restarting" in env.log()
        lock.unlink()  # usable again: the waiting daemon takes it
        b_id = wait_for(lambda: holder(b), timeout=10, what="the second daemon taking the lock")
        # The successor sets up a pod; the restarted first daemon waits, takes over when the
        # successor stops, and tears that pod's volume down when it goes.
        env.put_pod(pod("p1", [cm_volume("v", "cfg")], uid="u1"))
        wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")) == {"k": b"0"},
                 what="p1's volume, by the successor")
        wait_for(lambda: writers(b) == {b_id}, what="the write logged with its writer")
        mark = len(env.log())
        env.start()
        wait_for(lambda: f"held by {b_id}: waiting" in env.log()[mark:],
                 what="the restarted daemon waiting")
        assert b.stop() == 0
        wait_for(lambda: holder(env) not in (None, a, b_id), timeout=5,
                 what="the restarted daemon holding the lock")
        os.remove(env.pods / "p1.yaml")
        wait_for(lambda: not (env.root / "pods" / "u1").exists(), what="p1's teardown")
        assert "left in place" not in env.log()[mark:]
        journal_matches_disk(env, "after the teardown")
        assert env.stop() == 0
    finally:
        b.stop(signal.SIGKILL)


def trace_calls(path):
    """The I/O shim's trace, oldest first: (start in ns since the epoch, operation, paths)."""
    calls = []
    for line in path.read_text().splitlines():
        stamp, op, paths = line.split(" ", 2)
        seconds, nanos = stamp.split(".")
        calls.append((int(seconds) * 10**9 + int(nanos), op, paths.split(" ")))
    return sorted(calls)


def log_time_ns(record):
    """A JSON log line's time (microseconds, UTC) in ns since the epoch."""
    t = datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return (calendar.timegm(t.timetuple()) * 10**6 + t.microsecond) * 1000


def removal_entry(paths):
    """The removal queue's claimed entry a call is on (the path of its claimed name), or None."""
    for path in reversed(paths):  # a claim's rename: its destination
        head, sep, tail = path.partition("/" + REMOVING)
        if sep:
            return head + sep + tail.split("/", 1)[0]
    return None


def unpublished_versions(volume_dir):
    """Version dirs (or claimed entries) in a volume dir that `..data` does not name."""
    live = os.readlink(volume_dir / "..data")
    return [e.name for e in volume_dir.iterdir() if e.name.startswith("..") and e.is_dir()
            and not e.is_symlink() and e.name != live]


def test_nothing_is_written_or_removed_under_the_root_once_the_lock_is_lost(env, tmp_path):
    """The moment the holder's term ends, its writes stop, and so do its removals: the removal
    queue's worker (replaced versions) and queued teardowns alike, even with both still busy, on
    a disk whose unlinks are slow. The I/O shim traces every call under the root dir with the time
    it began; after the daemon's own line saying the lock is lost (written once the write gate is
    closed) nothing may begin there but the rest of what was already running: the operations the
    daemon names as finishing after the loss (at most the pool's size) and the one removal the
    queue had in hand."""
    shim = Path(SHIM).resolve()
    assert shim.is_file(), f"{shim}: the I/O-error shim is not built (make test-build)"
    trace = tmp_path / "io-trace.log"
    # Each unlink and rmdir below the root sleeps first: a replaced version (2 keys) takes the
    # removal queue 0.3 s, a teardown (8 keys: 23 calls) a pool thread 2.3 s.
    env.wrapper = ["/usr/bin/env", f"LD_PRELOAD={shim}", f"VM_IO_ERROR_DIR={env.root}",
                   f"VM_IO_TRACE_LOG={trace}", "VM_IO_SLOW_UNLINK_MS=100"]
    replaced, torn_down = 200, 60
    env.put_object(configmap("rewritten", {"k0": "0", "k1": "0"}))
    env.put_object(configmap("removed", {f"k{i}": "0" for i in range(8)}))
    for i in range(replaced):
        env.put_pod(pod(f"r{i}", [cm_volume("v", "rewritten")], uid=f"r{i}"))
    for i in range(torn_down):
        env.put_pod(pod(f"t{i}", [cm_volume("v", "removed")], uid=f"t{i}"))
    rewritten = [env.volume_dir(f"r{i}", CM, "v") for i in range(replaced)]
    removed = [env.root / "pods" / f"t{i}" for i in range(torn_down)]

    def all_show(dirs, key, value):
        def check():
            for d in dirs:
                try:
                    if (d / key).read_bytes() != value:
                        return False
                except OSError:
                    return False
            return True
        return check

    env.start("--log-format", "json")
    a = wait_for(lambda: holder(env), timeout=60, what="the daemon holding the lock")
    wait_for(all_show(rewritten, "k0", b"0"), timeout=180, what="the rewritten pods' volumes")
    wait_for(all_show([p / "volumes" / CM / "v" for p in removed], "k7", b"0"), timeout=180,
             what="the removed pods' volumes")

    # Every volume of the first pods gets a new version; the ones they replace go to the removal
    # queue (grace 0 s: due at once), which removes one at a time, 0.3 s each.
    env.put_object(configmap("rewritten", {"k0": "1", "k1": "1"}))
    wait_for(all_show(rewritten, "k0", b"1"), timeout=180, what="the rewritten pods' new content")
    # The other pods go (their teardowns queue up behind the pool's threads), and the lock is
    # made unusable: every renewal fails from now on and the term ends at the renew deadline
    # (10 s), both queues still busy.
    for i in range(torn_down):
        os.remove(env.pods / f"t{i}.yaml")
    lose_the_lock(env, tmp_path, timeout=120)

    # The daemon's line, the first to say so (the graceful stop repeats it): the gate is closed
    # before it is logged (Daemon: OnLockChanged, then LostAfterWriting), and its time is taken
    # when it is logged, shown in whole microseconds (the moment lies within the one shown).
    lost = env.records(msg=lambda m: "after writing: no new writes; restarting" in m)
    assert lost, env.log()[-2000:]
    moment = log_time_ns(lost[0]) + 999
    calls = trace_calls(trace)
    before = [c for c in calls if c[0] <= moment]
    after = [c for c in calls if c[0] > moment]

    # What makes the test worth anything: both kinds of removal were going on when the lock was
    # lost, and were not done.
    claimed = {removal_entry(p) for _, op, p in before if op == "rename" and removal_entry(p)}
    done = {removal_entry(p) for _, op, p in before
            if op == "rmdir" and removal_entry(p) == p[0]}
    assert done, "no replaced version was removed before the lock was lost"
    left = {str(d): unpublished_versions(d) for d in rewritten if unpublished_versions(d)}
    assert left, (f"every replaced version was removed ({len(claimed)} claimed) before the lock "
                  f"was lost: the test proves nothing for the removal queue")
    pods_dir = str(env.root / "pods")
    gone = {p[0] for _, op, p in before if op == "rmdir" and os.path.dirname(p[0]) == pods_dir}
    assert gone & {str(p) for p in removed}, "no teardown was done before the lock was lost"
    still = [p for p in removed if p.exists()]
    assert still, "every removed pod's volume was torn down before the lock was lost"

    # The operations running when the lock was lost finish, each logged with its writer; nothing
    # else of theirs begins.
    late = env.records(msg="Operation finished after the node's lock was lost")
    pool = int(os.environ.get("UV_THREADPOOL_SIZE", "4"))
    assert len(late) <= pool, late
    assert all(r["writer"] == a and r["podUID"].startswith("t") for r in late), late
    late_pods = {f"{pods_dir}/{r['podUID']}" for r in late}
    violations, entries = [], []
    for t, op, paths in after:
        entry = removal_entry(paths)
        if entry is not None:
            # The removal in hand goes on (its remaining unlinks): the worker asks before each
            # entry, so one entry at most.
            if entry not in entries:
                entries.append(entry)
            if entries.index(entry) == 0:
                continue
        elif any(p == d or p.startswith(d + "/") for p in paths for d in late_pods):
            continue
        shown = " ".join(os.path.relpath(p, env.root) for p in paths)
        violations.append(f"+{(t - moment) / 1e6:.1f} ms {op} {shown}")
    assert not violations, (
        f"{len(violations)} call(s) under the root dir began after the daemon's line saying the "
        f"lock was lost (time after that line, path below the root dir; {len(entries)} claimed "
        f"removal(s) had calls after it, one allowed; {len(late)} operation(s) logged as "
        f"finishing after it, their calls allowed):\n" + "\n".join(violations[:60]))
    # The teardowns that had not started never will: those pods' volumes are whole.
    for p in still:
        assert visible_files(p / "volumes" / CM / "v") == {f"k{i}": b"0" for i in range(8)}, p


@pytest.mark.parametrize("server_kind", SERVERS)
def test_a_rollout_that_changes_the_lock_type_keeps_one_writer(tmp_path, server_kind):
    """Cluster mode: the old daemon on a Lease, the new one on the file lock. The flock is taken
    whatever lock is configured, so the new one waits for it and writes nothing until the old one
    stops; the Lease adds visibility, not exclusion."""
    from api_servers import api_server
    from test_cluster import Cluster

    # The chart's RBAC with the Lease lock (a Role for its Lease) on the real server.
    with api_server(server_kind, tmp_path,
                    chart_values=("--set", "leaderElection.resourceLock=leases")) as server:
        a = Cluster(tmp_path, server, server_kind)
        b = DaemonProcess(tmp_path / "b.log")
        try:
            a.put_configmap("cfg", {"k": "0"})
            uid = a.create_pod("p", [{"name": "v", "configMap": {"name": "cfg"}}])
            # In the release's namespace, as the chart runs it (its Lease Role is there).
            a.start("--leader-elect-resource-lock", "leases", "--leader-elect-resource-namespace",
                    "kube-system", "--volume-ownership", "self")
            a_id = wait_for(lambda: holder(a), what="the old daemon holding flock and Lease")
            locks = re.search(r"holding the node's lock \((.*)\) as", a.log()).group(1)
            assert locks.startswith("file ") and " and lease " in locks, locks
            d = a.volume_dir(uid, CM, "v")
            wait_for(lambda: visible_files(d) == {"k": b"0"}, what="the old daemon's write")
            b.run(["--kubeconfig", str(a.kubeconfig), "--root-dir", str(a.root), "--state-dir",
                   str(a.state), "--node-name", "e2e-node", "-v", "1",
                   "--leader-elect-resource-lock", "file", "--volume-ownership", "self"])
            wait_for(lambda: f"held by {a_id}: waiting" in b.log(), what="the new daemon waiting")
            a.put_configmap("cfg", {"k": "1"})
            wait_for(lambda: visible_files(d) == {"k": b"1"}, what="an update by the old daemon")
            time.sleep(0.5)
            assert writers(b) == set()
            assert a.stop() == 0
            b_id = wait_for(lambda: holder(b), timeout=5, what="the new daemon taking over")
            a.put_configmap("cfg", {"k": "2"})
            wait_for(lambda: visible_files(d) == {"k": b"2"}, what="the new daemon's write")
            # Its log line follows the rename (the write's completion, on the loop).
            wait_for(lambda: writers(b) == {b_id}, what="the new daemon's write logged as its own")
            assert b.stop() == 0
        finally:
            b.stop(signal.SIGKILL)
            a.stop(signal.SIGKILL)


@pytest.mark.parametrize("server_kind", SERVERS)
def test_a_newcomer_waiting_for_the_lock_counts_no_start_of_a_config_on_trial(tmp_path,
                                                                             server_kind):
    """Dynamic config during a surge: the trial's count of starts is written only by the daemon
    holding the lock; the newcomer counts its start once it takes over."""
    from api_servers import api_server
    from test_dynamic_config import NAME, NS, Node

    def assigned(node):
        return json.loads((node.dir / "assigned.json").read_text())["record"]

    with api_server(server_kind, tmp_path) as server:
        node = Node(tmp_path, server)
        b = DaemonProcess(tmp_path / "b.log")
        try:
            node.assign(syncFrequency="2m")
            node.start_dynamic(trial="10m")
            a_id = wait_for(lambda: holder(node), what="the first daemon holding the lock")
            wait_for(lambda: (node.dir / "assigned.json").exists()
                     and assigned(node)["starts"] == 1, what="its start counted")
            before = (node.dir / "assigned.json").read_bytes()
            b.run(["--kubeconfig", str(node.kubeconfig), "--root-dir", str(node.root),
                   "--state-dir", str(node.state), "--node-name", "e2e-node", "-v", "1",
                   "--dynamic-config", f"{NS}/{NAME}", "--dynamic-config-dir", str(node.dir),
                   "--dynamic-config-trial-duration", "10m"])
            wait_for(lambda: f"held by {a_id}: waiting" in b.log(), what="the newcomer waiting")
            time.sleep(0.5)
            assert (node.dir / "assigned.json").read_bytes() == before  # nothing counted
            assert node.stop() == 0  # the first daemon's clean exit is recorded
            wait_for(lambda: holder(b), timeout=5, what="the newcomer taking over")
            # Its own start counted on top of the first run and its clean exit.
            wait_for(lambda: assigned(node)["starts"] == 2, what="the newcomer's start counted")
            assert assigned(node)["cleanExits"] == 1
            assert b.stop() == 0
            assert assigned(node)["cleanExits"] == 2
        finally:
            b.stop(signal.SIGKILL)
            node.stop(signal.SIGKILL)
