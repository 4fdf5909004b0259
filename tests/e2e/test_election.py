"""One writer per node: two daemons on one node (a DaemonSet rolling update with surge) share the
node's lock (a flock in the state dir); only the holder writes, and a successor takes over at once
after a graceful stop or a kill -9."""
import re
import signal
import time

from conftest import DaemonProcess, configmap, pod, visible_files, wait_for
from test_standalone import CM, cm_volume

HOLDING = re.compile(r"holding the node's lock \(.*\) as (\S+): writing")
WRITE = re.compile(r'"(?:MountVolume.SetUp succeeded|Volume updated|Volume checked, unchanged)" '
                   r'.* writer="([^"]+)"')


def second_daemon(env, name):
    """Another daemon on the same node: same root dir, state dir and manifests."""
    other = DaemonProcess(env.tmp / f"{name}.log")
    other.run(["--root-dir", str(env.root), "--state-dir", str(env.state), "--node-name", "e2e-node",
               "--pod-manifest-path", str(env.pods), "--object-manifest-path",
               str(env.objects), "--unpublished-grace", "0s", "-v", "1"])
    return other


def holder(process):
    m = HOLDING.findall(process.log())
    return m[-1] if m else None


def writers(process):
    return set(WRITE.findall(process.log()))


def test_only_the_lock_holder_writes_and_a_successor_takes_over_at_once(env):
    env.put_object(configmap("cfg", {"k": "0"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    d = env.volume_dir("u1", CM, "v")
    env.start()
    a = wait_for(lambda: holder(env), what="the first daemon holding the lock")
    wait_for(lambda: visible_files(d) == {"k": b"0"}, what="the first content")

    b = second_daemon(env, "b")
    try:
        wait_for(lambda: f"held by {a}: waiting" in b.log(), what="the second daemon waiting")
        env.put_object(configmap("cfg", {"k": "1"}))
        wait_for(lambda: visible_files(d) == {"k": b"1"}, what="an update while both run")
        time.sleep(0.3)
        wait_for(lambda: writers(env) == {a}, what="the write logged with its writer")
        assert writers(b) == set()  # waiting: it wrote nothing

        # A graceful stop releases the lock: the successor takes over and writes.
        assert env.stop() == 0
        b_id = wait_for(lambda: holder(b), timeout=5, what="the second daemon holding the lock")
        assert b_id != a
        env.put_object(configmap("cfg", {"k": "2"}))
        wait_for(lambda: visible_files(d) == {"k": b"2"}, what="the successor's write")
        wait_for(lambda: writers(b) == {b_id}, what="the write logged with its writer")

        # kill -9: the kernel frees the flock; a third daemon takes over at its next attempt.
        c = second_daemon(env, "c")
        wait_for(lambda: f"held by {b_id}: waiting" in c.log(), what="the third daemon waiting")
        b.stop(signal.SIGKILL)
        c_id = wait_for(lambda: holder(c), timeout=5, what="the third daemon holding the lock")
        env.put_object(configmap("cfg", {"k": "3"}))
        wait_for(lambda: visible_files(d) == {"k": b"3"}, what="the third daemon's write")
        wait_for(lambda: writers(c) == {c_id}, what="the write logged with its writer")
        assert c.stop() == 0
    finally:
        b.stop(signal.SIGKILL)


def test_without_leader_election_writes_start_at_once_under_the_flock(env):
    # --leader-elect=false adds no Lease; the flock is always taken (test_one_writer.py).
    env.put_object(configmap("cfg", {"k": "0"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start("--leader-elect=false")
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")) == {"k": b"0"},
             what="the content")
    assert holder(env)
