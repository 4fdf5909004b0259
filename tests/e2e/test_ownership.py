"""The daemon on a root dir it shares with a kubelet: it removes only what its ownership journal
says it set up, and a lost or damaged journal makes it own nothing."""
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import configmap, mounts_under, pod, secret, snapshot, visible_files, wait_for

CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
PROJECTED = "kubernetes.io~projected"
JOURNAL = "ownership.journal"


def can_mount_tmpfs(scratch: Path) -> bool:
    scratch.mkdir(parents=True, exist_ok=True)
    ok = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(scratch)],
                        stderr=subprocess.DEVNULL).returncode == 0
    if ok:
        subprocess.run(["umount", str(scratch)], check=True)
    scratch.rmdir()
    return ok


def plant_kubelet_volume(volume_dir: Path, files: dict, tmpfs: bool):
    """A volume as the kubelet leaves it: ..data -> a timestamp dir, one link per top-level name,
    optionally on its own tmpfs, plus a stale ..data_tmp (the kubelet's staging name)."""
    volume_dir.mkdir(parents=True)
    if tmpfs:
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(volume_dir)], check=True)
    ts = volume_dir / "..2025_01_02_03_04_05.1234567"
    ts.mkdir()
    for rel, data in files.items():
        p = ts / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(0o644)
    os.symlink(ts.name, volume_dir / "..data")
    os.symlink("..2025_01_01_00_00_00.1", volume_dir / "..data_tmp")
    for top in sorted({rel.split("/")[0] for rel in files}):
        os.symlink(f"..data/{top}", volume_dir / top)


def plant_unknown_pods(env, tmpfs_ok):
    """Pods the daemon never heard of, with every kind of volume, on tmpfs and not."""
    planted = env.root / "pods" / "kubelets-pod"
    plant_kubelet_volume(planted / "volumes" / CM / "cfg", {"app.properties": b"a=1\n"}, False)
    plant_kubelet_volume(planted / "volumes" / SECRET / "tls",
                         {"tls.crt": b"CERT", "tls.key": b"KEY"}, tmpfs_ok)
    plant_kubelet_volume(planted / "volumes" / PROJECTED / "kube-api-access-x",
                         {"token": b"t", "ca.crt": b"ca", "namespace": b"default"}, tmpfs_ok)
    plant_kubelet_volume(planted / "volumes" / PROJECTED / "bundle-plain",
                         {"cfg/a": b"1", "sec/b": b"2"}, False)
    (planted / "etc-hosts").write_text("127.0.0.1 localhost\n")
    (planted / "containers" / "app").mkdir(parents=True)
    # An empty kubelet pod dir too: rmdir would succeed, so only ownership protects it.
    (env.root / "pods" / "empty-kubelet-pod" / "volumes" / CM).mkdir(parents=True)
    return [planted, env.root / "pods" / "empty-kubelet-pod"]


def test_volumes_of_unknown_pods_survive_start_churn_and_restart_byte_for_byte(env, tmp_path):
    tmpfs_ok = can_mount_tmpfs(tmp_path / "probe")
    planted = plant_unknown_pods(env, tmpfs_ok)
    before = {p: snapshot(p) for p in planted}
    mounts_before = mounts_under(env.root)

    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_object(secret("s", string_data={"s": "SECRET-MARKER-x"}))
    env.put_pod(pod("own", [{"name": "v", "configMap": {"name": "cfg"}},
                            {"name": "sv", "secret": {"secretName": "s"}}], uid="own"))
    env.start()
    own = env.volume_dir("own", CM, "v")
    wait_for(lambda: visible_files(own) == {"k": b"v1"}, what="the daemon's own volume")

    # Churn: another pod comes and goes, the object changes, the daemon restarts and crashes.
    env.put_pod(pod("other", [{"name": "v", "configMap": {"name": "cfg"}}], uid="other"))
    wait_for(lambda: visible_files(env.volume_dir("other", CM, "v")), what="the second pod")
    os.remove(env.pods / "other.yaml")
    wait_for(lambda: not (env.root / "pods" / "other").exists(), what="the second pod's teardown")
    env.put_object(configmap("cfg", {"k": "v2"}))
    wait_for(lambda: visible_files(own) == {"k": b"v2"}, what="the edit")
    assert env.stop() == 0
    mark = len(env.log())
    env.start()
    wait_for(lambda: "reconstructed 2 volume(s)" in env.log()[mark:],
             what="reconstruction of its own two volumes")
    env.put_object(configmap("cfg", {"k": "v3"}))
    wait_for(lambda: visible_files(own) == {"k": b"v3"}, what="an edit after the restart")
    env.stop(signal.SIGKILL)
    env.start()
    env.put_object(configmap("cfg", {"k": "v4"}))
    wait_for(lambda: visible_files(own) == {"k": b"v4"}, what="an edit after a crash")

    for p in planted:
        assert snapshot(p) == before[p], f"{p} was touched"
    assert set(mounts_before) <= set(mounts_under(env.root)), "a planted tmpfs was unmounted"
    assert "kubelets-pod" not in env.log()

    # The daemon's own pod going still tears its volumes and dirs down.
    os.remove(env.pods / "own.yaml")
    wait_for(lambda: not (env.root / "pods" / "own").exists(), what="the own pod's teardown")
    for p in planted:
        assert snapshot(p) == before[p], f"{p} was touched"
    assert env.stop() == 0


def test_a_lost_or_damaged_journal_means_owning_and_removing_nothing(env):
    env.put_object(configmap("cfg", {"k": "v1"}))
    cases = {
        "lost": lambda j: j.unlink(),
        "corrupt": lambda j: j.write_bytes(j.read_bytes()[:-3] + b"X" + j.read_bytes()[-2:]),
        "old version": lambda j: j.write_bytes(
            j.read_bytes().replace(b"volumemanager-ownership v3", b"volumemanager-ownership v0")),
    }
    for name, damage in cases.items():
        uid = "u-" + name.replace(" ", "-")
        env.put_pod(pod("p", [{"name": "v", "configMap": {"name": "cfg"}}], uid=uid))
        env.start()
        vol = env.volume_dir(uid, CM, "v")
        wait_for(lambda: visible_files(vol) == {"k": b"v1"}, what=f"{name}: the volume")
        assert env.stop() == 0
        journal = env.state / JOURNAL
        damage(journal)
        before = snapshot(env.root / "pods" / uid)
        os.remove(env.pods / "p.yaml")  # its pod is gone while the daemon is down
        mark = len(env.log())
        env.start()
        wait_for(lambda: "reconstructed 0 volume(s)" in env.log()[mark:],
                 what=f"{name}: reconstruction")
        # A new pod is still served (and recorded): the daemon works, it just owns nothing old.
        env.put_pod(pod("q", [{"name": "v", "configMap": {"name": "cfg"}}], uid=uid + "-q"))
        wait_for(lambda: visible_files(env.volume_dir(uid + "-q", CM, "v")), what="a new pod")
        assert snapshot(env.root / "pods" / uid) == before, f"{name}: an unowned volume changed"
        if name != "lost":
            assert "ownership journal not trusted" in env.log()[mark:]
            assert (env.state / (JOURNAL + ".rejected")).exists()
        os.remove(env.pods / "q.yaml")
        wait_for(lambda: not (env.root / "pods" / (uid + "-q")).exists(), what="q's teardown")
        assert env.stop() == 0
        assert (env.root / "pods" / uid).exists()


def test_a_newer_releases_journal_refuses_the_start_and_leaves_everything_in_place(env):
    """A rollback to a release that reads an older journal format (docs/upgrades.md): the journal
    is neither set aside nor replaced, the daemon does not start (exit 1) and says which file and
    which version, and the volumes of a pod gone meanwhile stay on disk."""
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("p", [{"name": "v", "configMap": {"name": "cfg"}}], uid="u1"))
    env.start()
    vol = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(vol) == {"k": b"v1"}, what="the volume")
    assert env.stop() == 0
    journal = env.state / JOURNAL
    text = journal.read_bytes()
    assert text.startswith(b"volumemanager-ownership v3\n")
    journal.write_bytes(b"volumemanager-ownership v4\n" + text[text.index(b"\n") + 1:])
    os.remove(env.pods / "p.yaml")  # its pod is gone while the daemon is down
    state_before = {p.name: p.read_bytes() for p in env.state.iterdir() if p.name != "leader.lock"}
    root_before = snapshot(env.root)
    mark = len(env.log())
    env.start()
    assert env.proc.wait(timeout=30) == 1
    env.stop()
    said = env.log()[mark:]
    assert (f"{journal}: ownership journal format version 4 is newer than this release reads "
            "(versions 1 to 3)") in said, said
    assert "Refusing to start" in said, said
    assert {p.name: p.read_bytes() for p in env.state.iterdir()
            if p.name != "leader.lock"} == state_before
    assert snapshot(env.root) == root_before


def journal_state(env):
    """The state volumemanager_ownership_journal_state reports (the one whose value is 1)."""
    probe, _ = env.admin_addresses()
    with urllib.request.urlopen(probe + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return re.findall(r'volumemanager_ownership_journal_state\{state="([a-z_]+)"\} 1', text)


def test_a_journal_of_another_root_dir_means_owning_and_removing_nothing(env):
    """--root-dir changed (here: the same tree under another path): the journal's paths are not
    this root's; owning nothing, the daemon removes nothing, says so, and keeps the old journal."""
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("p", [{"name": "v", "configMap": {"name": "cfg"}}], uid="u1"))
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")) == {"k": b"v1"},
             what="the volume")
    assert env.stop() == 0
    os.remove(env.pods / "p.yaml")  # its pod is gone while the daemon is down
    old_journal = (env.state / JOURNAL).read_bytes()
    old_root = env.root
    env.root = env.tmp / "other-root"
    os.rename(old_root, env.root)
    before = snapshot(env.root / "pods" / "u1")
    mark = len(env.log())
    env.start()
    wait_for(lambda: "reconstructed 0 volume(s)" in env.log()[mark:], what="reconstruction")
    assert "ownership journal of another root dir" in env.log()[mark:]
    assert f"root dir {old_root}, not {env.root}" in env.log()[mark:]
    assert journal_state(env) == ["other_root_dir"]
    # A new pod is served; the old one, gone, is not torn down: not this root's to remove.
    env.put_pod(pod("q", [{"name": "v", "configMap": {"name": "cfg"}}], uid="u2"))
    wait_for(lambda: visible_files(env.volume_dir("u2", CM, "v")), what="a new pod")
    assert snapshot(env.root / "pods" / "u1") == before, "a volume of another root's journal changed"
    kept = [p for p in env.state.iterdir() if p.name.endswith(".rejected")]
    assert len(kept) == 1 and kept[0].read_bytes() == old_journal, kept
    assert env.stop() == 0


def test_a_root_not_on_its_recorded_filesystem_waits_then_adopts(env):
    """The kubelet's filesystem not mounted on the root dir yet (a start before the mount):
    the daemon waits and retries, removing and setting up nothing; once it is mounted, it adopts
    its volumes and proceeds (here: tears down the volume of a pod gone while it was down)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: mounts a tmpfs and bind-mounts it on the root dir")
    disk = env.tmp / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(disk)], check=True)
    (disk / "root").mkdir()
    subprocess.run(["mount", "--bind", str(disk / "root"), str(env.root)], check=True)
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("gone", [{"name": "v", "configMap": {"name": "cfg"}}], uid="u-gone"))
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("u-gone", CM, "v")) == {"k": b"v1"},
             what="the volume")
    assert env.stop() == 0

    os.remove(env.pods / "gone.yaml")  # gone while the daemon is down
    env.put_pod(pod("new", [{"name": "v", "configMap": {"name": "cfg"}}], uid="u-new"))
    subprocess.run(["umount", str(env.root)], check=True)
    assert not (env.root / "pods" / "u-gone").exists()
    mark = len(env.log())
    env.start()
    wait_for(lambda: len(re.findall("waiting for that filesystem", env.log()[mark:])) >= 2,
             what="two attempts, each saying what it waits for")
    log = env.log()[mark:]
    assert "recorded on tmpfs" in log, log
    assert "reconstructed" not in log
    assert journal_state(env) == ["waiting_for_filesystem"]
    probe, _ = env.admin_addresses()
    try:
        urllib.request.urlopen(probe + "/readyz?verbose", timeout=10)
        raise AssertionError("ready while waiting for the root's filesystem")
    except urllib.error.HTTPError as e:
        assert b"waiting for the root dir's recorded filesystem" in e.read()
    # Nothing set up on the wrong filesystem: the new pod waits too.
    assert not (env.root / "pods" / "u-new").exists()
    assert (disk / "root" / "pods" / "u-gone").exists(), "released or removed while waiting"

    subprocess.run(["mount", "--bind", str(disk / "root"), str(env.root)], check=True)
    wait_for(lambda: "reconstructed 1 volume(s)" in env.log()[mark:], timeout=30,
             what="adoption once the filesystem is mounted")
    wait_for(lambda: not (env.root / "pods" / "u-gone").exists(), what="the gone pod's teardown")
    wait_for(lambda: visible_files(env.volume_dir("u-new", CM, "v")) == {"k": b"v1"},
             what="the new pod's volume")
    assert journal_state(env) == ["trusted"]
    assert env.stop() == 0
