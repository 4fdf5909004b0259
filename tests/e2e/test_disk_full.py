"""The root dir filling up mid-write, at daemon level: on a small tmpfs (out of bytes, and out of
inodes) and on a loop-mounted ext4 image (out of bytes, and remounted read-only). A remount that runs out of space keeps the volume's last
complete content, the failure is logged (and posted as a FailedMount Event in cluster mode), the
operation backs off (the delay grows), and once space returns every volume converges and no debris
of the failed writes is left.

Needs root (mount). The tmpfs cases run wherever the daemon's other tmpfs tests run; the ext4 case
is skipped, saying why, only when no loop device can be set up here.
"""
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (NODE, Env, configmap, mounts_under, parse_log_line, pod, secret,
                      skip_needs_root, skip_unless_root, visible_files, wait_for)
from test_ownership import can_mount_tmpfs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))
from harness import TestApiServer  # noqa: E402
from test_cluster import Cluster, Sampler  # noqa: E402

CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
DELAY = re.compile(r"^(?:(\d+)m)?(?:(\d+)(ms|s))?$")  # the kubelet's durationBeforeRetry


def small_payload(gen):
    return {f"k{i}": f"gen={gen} key=k{i}\n" + "s" * 500 for i in range(3)}


def big_payload(gen):
    """Far more than the space left: 6 files of 96 KiB, so the write fails part way through."""
    return {f"k{i}": f"gen={gen} key=k{i}\n" + "b" * (96 * 1024) for i in range(6)}


def as_bytes(data):
    return {k: v.encode() for k, v in data.items()}


class Filler:
    """Takes the free space (bytes or inodes) of the filesystem at `root`, leaving `leave` bytes
    (whole blocks) or inodes free, or makes it read-only; release() undoes it."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / "filler"
        self.dir.mkdir()
        self.read_only = False

    def fill_bytes(self, leave):
        big = self.dir / "big"
        fd = os.open(big, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for chunk in (65536, 512):  # then smaller writes into the last block
                try:
                    while True:
                        os.write(fd, b"\0" * chunk)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
            os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
        finally:
            os.close(fd)

    def fill_inodes(self, leave):
        n = 0
        try:
            while True:
                (self.dir / f"i{n}").touch()
                n += 1
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
        for i in range(leave):
            (self.dir / f"i{n - 1 - i}").unlink()

    def remount_read_only(self):
        """An I/O error's usual end on a real disk (ext4 errors=remount-ro): every write fails
        with EROFS."""
        subprocess.run(["mount", "-o", "remount,ro", str(self.root)], check=True)
        self.read_only = True

    def release(self):
        if self.read_only:
            subprocess.run(["mount", "-o", "remount,rw", str(self.root)], check=True)
            self.read_only = False
        shutil.rmtree(self.dir)
        self.dir.mkdir()


def read_version(volume):
    """{path: bytes} of the version `..data` points to, read through the link once resolved (a
    published version dir is complete and never changes; reading file by file through the
    top-level links can straddle a swap); None when there is none or it went while being read."""
    try:
        version = volume / os.readlink(volume / "..data")
        out = {}
        for dirpath, _, filenames in os.walk(version, onerror=on_walk_error):
            for f in filenames:
                p = Path(dirpath) / f
                out[str(p.relative_to(version))] = p.read_bytes()
        return out
    except (FileNotFoundError, NotADirectoryError):
        return None


def on_walk_error(e):
    raise e


class VersionSampler(Sampler):
    """Records each version a volume shows (read_version), every few ms, in order."""

    def _sample(self):
        for v in self.volumes:
            files = read_version(v)
            if files is not None and (not self.seen[v] or self.seen[v][-1] != files):
                self.seen[v].append(files)


def failures(log, volume, pod_name):
    """(error, backoff seconds) of each FailedMount log line for `volume` of `pod_name` (its
    keys: logging/structured_log.h)."""
    out = []
    for line in log.splitlines():
        r = parse_log_line(line)
        if not r or r.get("msg") != "FailedMount: MountVolume.SetUp failed" or \
                r.get("volume") != volume or "durationBeforeRetry" not in r:
            continue
        # Standalone names a static pod <name>-<node>.
        if r.get("pod", "").split("/")[-1] in (pod_name, f"{pod_name}-{NODE}"):
            m = DELAY.match(r["durationBeforeRetry"])
            delay = int(m.group(1) or 0) * 60 + \
                int(m.group(2) or 0) / (1000 if m.group(3) == "ms" else 1)
            out.append((r["err"], delay))
    return out


def no_debris(volume_dir):
    names = set(os.listdir(volume_dir))
    dots = {n for n in names if n.startswith("..")}
    return dots == {"..data", os.readlink(volume_dir / "..data")}


def mount_root(kind, root: Path, tmp: Path):
    """Mounts a small filesystem of `kind` at `root`. Returns a cleanup function."""
    if kind == "tmpfs-bytes":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(root)],
                       check=True)
    elif kind == "tmpfs-inodes":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=400,mode=0755", "tmpfs",
                        str(root)], check=True)
    else:
        image = tmp / "root.ext4"
        with open(image, "wb") as f:
            f.truncate(8 << 20)
        # No blocks reserved for root (the daemon runs as root: it would write into them).
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-N", "256", str(image)], check=True)
        r = subprocess.run(["mount", "-o", "loop", str(image), str(root)], capture_output=True,
                           text=True)
        if r.returncode != 0:
            skip_needs_root(f"no loop device can be set up in this sandbox: {r.stderr.strip()}")

    def cleanup():
        for m in mounts_under(root):
            subprocess.run(["umount", "-l", m], check=False)
    return cleanup


@pytest.fixture
def small_root(request, tmp_path):
    skip_unless_root("mounts a small filesystem")
    if not can_mount_tmpfs(tmp_path / "probe"):
        skip_needs_root("mount of a tmpfs refused (no mount permission in this sandbox)")
    return tmp_path


# How each case takes the space away, and the error every failed attempt must name.
FAULTS = {
    # a few files' worth left, not the whole write
    "tmpfs-bytes": (lambda f: f.fill_bytes(leave=32 * 1024), "no space left on device"),
    # a version dir and a file or two, not the whole write
    "tmpfs-inodes": (lambda f: f.fill_inodes(leave=3), "no space left on device"),
    "ext4-loop": (lambda f: f.fill_bytes(leave=32 * 1024), "no space left on device"),
    "ext4-loop-read-only": (lambda f: f.remount_read_only(), "read-only file system"),
}


@pytest.mark.parametrize("kind", list(FAULTS))
def test_standalone_root_dir_fills_up_mid_write_then_space_returns(small_root, kind):
    env = Env(small_root)
    cleanup = mount_root(kind, env.root, small_root)
    try:
        run_standalone(env, kind)
    finally:
        env.stop(signal.SIGKILL)  # no-op once stopped
        cleanup()


def run_standalone(env, kind):
    env.put_object(configmap("cfg", small_payload(1)))
    env.put_object(secret("sec", string_data=small_payload(1)))
    env.put_pod(pod("p1", [{"name": "cfg", "configMap": {"name": "cfg"}},
                           {"name": "sec", "secret": {"secretName": "sec"}}], uid="p1"))
    # --no-tmpfs: the secret volume lives on the small root dir too.
    env.start("--no-tmpfs")
    cfg, sec = env.volume_dir("p1", CM, "cfg"), env.volume_dir("p1", SECRET, "sec")
    wait_for(lambda: visible_files(cfg) == as_bytes(small_payload(1)) and
             visible_files(sec) == as_bytes(small_payload(1)), timeout=60, what="first content")
    filler = Filler(env.root)
    take_away, error = FAULTS[kind]
    take_away(filler)
    with VersionSampler(cfg, sec) as sampler:
        env.put_object(configmap("cfg", big_payload(2)))
        env.put_object(secret("sec", string_data=big_payload(2)))
        # A new pod's first mount fails too, and leaves no volume dir.
        env.put_pod(pod("p2", [{"name": "cfg", "configMap": {"name": "cfg"}}], uid="p2"))
        # The failures are logged, and retried later and later.
        for name, pod_name in (("cfg", "p1"), ("sec", "p1"), ("cfg", "p2")):
            wait_for(lambda: len(failures(env.log(), name, pod_name)) >= 3, timeout=60,
                     what=f"three failed attempts of {pod_name}/{name}")
            got = failures(env.log(), name, pod_name)
            assert all(error in e.lower() for e, _ in got), got
            delays = [d for _, d in got]
            assert delays == sorted(delays) and delays[-1] > delays[0], delays
        # While it lasts: the last complete content, nothing half-written left behind.
        assert visible_files(cfg) == as_bytes(small_payload(1))
        assert no_debris(cfg) and no_debris(sec), (os.listdir(cfg), os.listdir(sec))
        p2 = env.volume_dir("p2", CM, "cfg")
        assert not p2.exists() or not (p2 / "..data").exists()
        # Space returns: everything converges at the next retry.
        filler.release()
        for d in (cfg, sec, p2):
            wait_for(lambda: visible_files(d) == as_bytes(big_payload(2)) and no_debris(d),
                     timeout=180, what=f"{d} converged once space returned")
    for d in (cfg, sec):
        # The old version, then the new, nothing in between (no version written in part).
        assert sampler.seen[d] == [as_bytes(small_payload(1)), as_bytes(big_payload(2))], \
            [sorted(s) for s in sampler.seen[d]]
    assert env.stop() == 0


@pytest.mark.test_server_only("the fault is the node's disk; the server only takes the Event, "
                              "which the real-server tests post too")
def test_cluster_mode_disk_full_posts_failed_mount_events_and_converges(small_root):
    with TestApiServer() as server:
        cluster = Cluster(small_root, server)
        cleanup = mount_root("tmpfs-bytes", cluster.root, small_root)
        try:
            run_cluster(cluster)
            cluster.assert_no_secret_leaked()
        finally:
            if cluster.proc is not None:
                cluster.stop(signal.SIGKILL)
            cleanup()


def run_cluster(cluster):
    cluster.put_configmap("app", small_payload(1))
    uid = cluster.create_pod("web", [{"name": "cfg", "configMap": {"name": "app"}}])
    # The daemon sets volumes up itself (--volume-ownership self): the root dir is its alone, so
    # the version a write replaces may go at once (no_debris holds as soon as the new one is live).
    cluster.start("--volume-ownership", "self", "--unpublished-grace", "0s")
    cfg = cluster.volume_dir(uid, CM, "cfg")
    wait_for(lambda: visible_files(cfg) == as_bytes(small_payload(1)), timeout=60,
             what="first content")
    filler = Filler(cluster.root)
    filler.fill_bytes(leave=32 * 1024)
    cluster.put_configmap("app", big_payload(2))
    events = wait_for(lambda: [e for e in cluster.events() if e["reason"] == "FailedMount"
                               and e["involvedObject"]["uid"] == uid], timeout=60,
                      what="a FailedMount event")
    assert events[0]["type"] == "Warning"
    assert events[0]["message"].startswith('MountVolume.SetUp failed for volume "cfg" : ')
    assert "no space left on device" in events[0]["message"].lower(), events[0]["message"]
    wait_for(lambda: len(failures(cluster.log(), "cfg", "web")) >= 2, timeout=60,
             what="a second failed attempt, later")
    assert visible_files(cfg) == as_bytes(small_payload(1))
    assert no_debris(cfg), os.listdir(cfg)
    filler.release()
    wait_for(lambda: visible_files(cfg) == as_bytes(big_payload(2)) and no_debris(cfg),
             timeout=180, what="converged once space returned")
    assert cluster.stop() == 0
