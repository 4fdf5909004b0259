"""The kubelet's side of a volume, for end-to-end tests of cluster mode: its AtomicWriter algorithm
(docs/kubelet-behavior.md §2), step for step, in Python, so that the daemon shares volumes with a
writer that behaves like the kubelet's (its own ..data_tmp staging link, timestamp dir names,
removal of the previous version right after the swap).
"""
import datetime
import os
import random
import shutil
from pathlib import Path


def _ts_dir_name():
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("..%Y_%m_%d_%H_%M_%S.") + str(random.randrange(10**9, 10**10))


def set_up(volume_dir, payload, mode=0o644):
    """What the kubelet does at a pod's first sync: the volume dir (0777) and its content."""
    volume_dir = Path(volume_dir)
    volume_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(volume_dir, 0o777)
    write(volume_dir, payload, mode)


def write(volume_dir, payload, mode=0o644):
    """One AtomicWriter.Write of `payload` (path -> bytes or str). Returns True when it published a
    new version, False when the content on disk was already equal."""
    volume_dir = Path(volume_dir)
    payload = {p: (v.encode() if isinstance(v, str) else v) for p, v in payload.items()}
    data = volume_dir / "..data"
    try:
        old = os.readlink(data)
    except FileNotFoundError:
        old = None
    old_dir = volume_dir / old if old else None
    removals = set()
    if old_dir is not None and old_dir.is_dir():
        keep = set()
        for p in payload:
            parts = p.split("/")
            for i in range(1, len(parts) + 1):
                keep.add("/".join(parts[:i]))
        for root, dirs, files in os.walk(old_dir):
            for name in dirs + files:
                rel = os.path.relpath(os.path.join(root, name), old_dir)
                if rel not in keep:
                    removals.add(rel)
    changed = old_dir is None or any(
        not (old_dir / p).exists() or (old_dir / p).read_bytes() != b for p, b in payload.items())
    if changed or removals:
        ts = _ts_dir_name()
        ts_dir = volume_dir / ts
        ts_dir.mkdir()
        os.chmod(ts_dir, 0o755)
        for p, b in payload.items():
            f = ts_dir / p
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b)
            os.chmod(f, mode)
        os.symlink(ts, volume_dir / "..data_tmp")
        os.rename(volume_dir / "..data_tmp", data)
    for p in payload:
        first = p.split("/")[0]
        if not os.path.lexists(volume_dir / first):
            os.symlink(f"..data/{first}", volume_dir / first)
    for r in removals:
        if "/" not in r and os.path.lexists(volume_dir / r):
            os.unlink(volume_dir / r)
    if (changed or removals) and old_dir is not None and old_dir.is_dir():
        shutil.rmtree(old_dir)
    return changed or bool(removals)
