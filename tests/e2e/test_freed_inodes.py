"""What becomes of a version the daemon replaced in a volume it owns, by the kind of filesystem
under --root-dir, with the default 30 s --unpublished-grace.

On an ext4 without a journal the kernel keeps an inode freed in an earlier second from being
reused for a minute or more, and every later create walks past it: the daemon removes the
replaced version at once there (its removal thread, right after the write), so the next writes
reuse its inodes. On any other filesystem (here: an ext4 with a journal) the replaced version waits
out the grace period. Either way the volume shows the new content in full at every instant, and
nothing but the replaced version goes early. Needs root and a loop device; skipped, saying why,
where there is none."""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (Env, configmap, dot_entries, mounts_under, pod, skip_needs_root,
                      skip_unless_root, visible_files, wait_for)

CM = "kubernetes.io~configmap"


def mount_ext4(root: Path, image: Path, journal: bool):
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    features = [] if journal else ["-O", "^has_journal"]
    subprocess.run(["mkfs.ext4", "-q", "-F", *features, str(image)], check=True)
    r = subprocess.run(["mount", "-o", "loop", str(image), str(root)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        skip_needs_root(f"no loop device can be set up in this sandbox: {r.stderr.strip()}")


@pytest.mark.parametrize("journal", [False, True], ids=["no-journal", "journal"])
def test_replaced_version_of_an_owned_volume_goes_at_once_only_where_freed_inodes_wait(
        tmp_path, journal):
    skip_unless_root("loop-mounts an ext4 image")
    env = Env(tmp_path)
    env.unpublished_grace = "30s"
    mount_ext4(env.root, tmp_path / "root.ext4", journal)
    try:
        env.put_object(configmap("cfg", {"k": "v1"}))
        env.put_pod(pod("p", [{"name": "v", "configMap": {"name": "cfg"}}], uid="u1"))
        env.start()
        d = env.volume_dir("u1", CM, "v")
        wait_for(lambda: visible_files(d) == {"k": b"v1"}, what="first version")
        first = os.readlink(d / "..data")
        # Crash debris of another writer: it keeps its grace period in both cases.
        debris = d / "..2020_01_01_00_00_00.1"
        debris.mkdir()

        env.put_object(configmap("cfg", {"k": "v2"}))
        wait_for(lambda: visible_files(d) == {"k": b"v2"}, what="second version")
        second = os.readlink(d / "..data")
        assert second != first
        if journal:
            time.sleep(1.5)
            assert (d / first).is_dir(), "the replaced version went before its grace period"
            assert set(dot_entries(d)) == {"..data", first, second, debris.name}
        else:
            wait_for(lambda: not (d / first).exists(), timeout=5,
                     what="the replaced version removed at once")
            assert set(dot_entries(d)) == {"..data", second, debris.name}
        assert debris.is_dir(), "another writer's dir went before its grace period"
        assert visible_files(d) == {"k": b"v2"}
        assert env.stop() == 0
    finally:
        env.stop(signal.SIGKILL)  # no-op once stopped
        for m in mounts_under(tmp_path):
            subprocess.run(["umount", "-l", m], check=False)
