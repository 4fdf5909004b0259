"""Hostile or half-made inputs to the real binary: a pod manifest broken while it is edited, a
--config that is a device, a FIFO or too big, a FIFO as the ownership journal, a symlink planted
as the node's lock, an object manifest dir removed and restored, duplicate keys in a manifest.
Each must get a clear message naming what is wrong, and nothing that works may be torn down or
hang."""
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request

from conftest import BIN, configmap, pod, secret, visible_files, wait_for
from test_standalone import CM, cm_volume

SECRETS = "kubernetes.io~secret"


def fetch_json(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def fetch_text(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


# --- 1. a pod manifest broken while it is edited -------------------------------------------------

def _start_with_a_pod(env):
    env.put_object(configmap("cfg", {"k": "v1"}))
    manifest = env.pods / "web.json"
    tmp = env.pods / ".web.json.tmp"
    tmp.write_text(json.dumps(pod("web", [cm_volume("v", "cfg")], uid="u1"), indent=1))
    os.replace(tmp, manifest)
    env.start()
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"}, what="the volume")
    return manifest, d


def _assert_held(env, manifest, d, why):
    """The volume stays, is still refreshed (the pod is alive in the daemon), and the log names
    the file and why."""
    wait_for(lambda: env.records(file=str(manifest)) and any(
        why in r.get("err", "") and "keeping its last good pod" in r.get("msg", "")
        for r in env.records(file=str(manifest))), what=f"an error naming {manifest}: {why}")
    env.put_object(configmap("cfg", {"k": "v2"}))
    wait_for(lambda: visible_files(d) == {"k": b"v2"}, what="the held pod's volume refreshed")
    env.put_object(configmap("cfg", {"k": "v1"}))
    wait_for(lambda: visible_files(d) == {"k": b"v1"}, what="the held pod's volume refreshed")


def test_a_truncated_pod_manifest_keeps_its_pod_until_fixed_or_removed(env):
    manifest, d = _start_with_a_pod(env)
    good = manifest.read_text()
    manifest.write_text(good[: len(good) // 2])  # an editor's half-saved file, in place
    _assert_held(env, manifest, d, "invalid")
    # Reported once per content, not at each relist or event.
    held = [r for r in env.records(file=str(manifest)) if "keeping" in r.get("msg", "")]
    assert len(held) == 1, held
    manifest.write_text(good)  # fixed: the pod goes on, its volume never left
    time.sleep(0.5)
    assert visible_files(d) == {"k": b"v1"}
    manifest.unlink()  # removed: now the pod goes, and its volume with it
    wait_for(lambda: not d.exists(), what="the removed pod's volume torn down")


def test_an_unreadable_pod_manifest_keeps_its_pod(env):
    manifest, d = _start_with_a_pod(env)
    good = manifest.read_text()
    # Root reads a mode-000 file all the same, so unreadable is made in ways that fail for root
    # too: a symlink loop (stat fails with ELOOP), then a file over the 10 MiB limit.
    manifest.unlink()
    os.symlink(manifest.name, manifest)
    _assert_held(env, manifest, d, "Too many levels of symbolic links")
    big = env.pods / ".web.json.tmp"
    big.write_text(good)
    os.truncate(big, 11 << 20)
    os.replace(big, manifest)
    _assert_held(env, manifest, d, "larger than the limit")
    if os.geteuid() != 0:
        manifest.write_text(good)
        manifest.chmod(0)
        _assert_held(env, manifest, d, "Permission denied")
        manifest.chmod(0o644)
    tmp = env.pods / ".web.json.tmp"
    tmp.write_text(good)
    os.replace(tmp, manifest)
    time.sleep(0.5)
    assert visible_files(d) == {"k": b"v1"}
    assert env.proc.poll() is None


# --- 2. --config and the ownership journal: only regular files, bounded -------------------------

def _run_to_exit(args, timeout=10):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def test_config_that_is_a_device_a_fifo_or_too_big_is_refused_at_once(tmp_path):
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.yaml"
    big.write_text("rootDir: /r\n")
    os.truncate(big, (1 << 20) + 1)
    for path, why in [("/dev/zero", "not a regular file (a character device)"),
                      (str(fifo), "not a regular file (a FIFO)"),
                      (str(big), "larger than the limit of 1048576 bytes")]:
        start = time.monotonic()
        rc, out = _run_to_exit(["--config", path])
        assert time.monotonic() - start < 5, path
        assert rc == 2, (path, out)
        assert f"--config: {path}: {why}" in out, out


def test_a_fifo_as_the_ownership_journal_does_not_hang_the_start(env):
    env.state.mkdir()
    os.mkfifo(env.state / "ownership.journal")
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("web", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    # Not trusted, set aside (as any unreadable journal), named in the log; the daemon serves.
    wait_for(lambda: "not a regular file (a FIFO)" in env.log(), what="the journal's error")
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")) == {"k": b"v1"})
    assert (env.state / "ownership.journal").is_file()


# --- 3. a symlink planted as the node's lock ----------------------------------------------------

def test_a_symlinked_lock_file_is_an_error_logged_once_and_shown(env):
    env.state.mkdir()
    target = env.tmp / "elsewhere"
    target.write_text("precious\n")
    lock = env.state / "leader.lock"
    os.symlink(target, lock)
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("web", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    probe, debug = env.admin_addresses()
    wait_for(lambda: "is a symlink" in env.log(), what="the lock error in the log")
    wait_for(lambda: re.search(r"^volumemanager_leader_election_lock_error 1$",
                               fetch_text(probe + "/metrics"), re.M), what="the lock error metric")
    assert re.search(r"^volumemanager_leader_election_leader 0$", fetch_text(probe + "/metrics"),
                     re.M)
    state = wait_for(lambda: fetch_json(debug + "/debug/state").get("leaderElection"))
    assert "is a symlink" in (state["lastError"] or ""), state
    assert state["isLeader"] is False
    time.sleep(1.5)  # a few retries (400 ms apart): still one line
    assert env.log().count("is a symlink") == 1, env.log()
    assert not env.volume_dir("u1", CM, "v").exists()  # no writes without the lock
    assert target.read_text() == "precious\n"
    lock.unlink()  # fixed: the daemon takes the lock and writes
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")) == {"k": b"v1"}, timeout=15)
    assert fetch_json(debug + "/debug/state")["leaderElection"]["lastError"] is None
    assert re.search(r"^volumemanager_leader_election_leader 1$", fetch_text(probe + "/metrics"),
                     re.M)
    assert "usable again" in env.log()


# --- 4. an object manifest dir removed and restored ---------------------------------------------

def test_an_object_dir_removed_and_restored_is_followed_by_its_watch(env):
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("web", [cm_volume("v", "cfg")], uid="u1"))
    started = time.monotonic()
    env.start()
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"})
    # The relist runs 20 s after the start: a change that lands before then came by the watch.
    saved = env.tmp / "objects.saved"
    shutil.move(env.objects, saved)
    time.sleep(0.3)
    new = env.tmp / "objects.new"
    new.mkdir()
    env.write_yaml(new, "configmap-cfg.yaml", configmap("cfg", {"k": "v2"}))
    os.rename(new, env.objects)
    wait_for(lambda: visible_files(d) == {"k": b"v2"}, timeout=8, what="the restored dir's change")
    assert time.monotonic() - started < 18, "arrived by the relist, not the watch"
    # And the restored dir is watched: the next change lands too.
    env.put_object(configmap("cfg", {"k": "v3"}))
    wait_for(lambda: visible_files(d) == {"k": b"v3"}, timeout=5)
    assert time.monotonic() - started < 19


# --- 5. duplicate keys --------------------------------------------------------------------------

def test_duplicate_keys_fail_the_manifest_naming_the_key(env):
    (env.objects / "dup.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dup}\ndata:\n  k: a\n  k: b\n")
    (env.objects / "dup.json").write_text(
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dupj"},'
        '"data":{"k":"a","k":"b"}}')
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("web", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")) == {"k": b"v1"})
    wait_for(lambda: 'duplicate mapping key \\"k\\"' in env.log() or
             'duplicate mapping key "k"' in env.log(), what="the YAML duplicate named")
    wait_for(lambda: 'duplicate key \\"k\\"' in env.log() or 'duplicate key "k"' in env.log(),
             what="the JSON duplicate named")
    assert "line 6" in env.log()
