"""The daemon, end to end, in standalone mode: the upstream e2e behaviours for configMap, secret,
projected and downwardAPI volumes, updates, deletion, restarts, crashes and bad input."""
import base64
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (BIN, NODE, configmap, dot_entries, mounts_under, pod, secret,
                      visible_files, wait_for)

CM = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
PROJECTED = "kubernetes.io~projected"
DOWNWARD = "kubernetes.io~downward-api"


def cm_volume(name, cm, **kw):
    return {"name": name, "configMap": {"name": cm, **kw}}


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


# --- configMap ---------------------------------------------------------------------------------

def test_configmap_consumable_with_default_mode(env):
    env.put_object(configmap("cfg", {"data-1": "value-1", "data-2": "value-2"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    d = env.volume_dir("u1", CM, "v")
    files = wait_for(lambda: visible_files(d) or None, what="configMap files")
    assert files == {"data-1": b"value-1", "data-2": b"value-2"}
    assert mode_of(d / "data-1") == 0o644
    assert os.readlink(d / "data-1") == "..data/data-1"
    assert os.readlink(d / "..data").startswith("..")


def test_configmap_mappings_item_mode_default_mode_and_binary(env):
    env.put_object(configmap("cfg", {"data-1": "value-1", "data-2": "value-2"},
                             binary={"blob": base64.b64encode(bytes(range(256))).decode()}))
    env.put_pod(pod("p", [
        cm_volume("mapped", "cfg", items=[{"key": "data-2", "path": "path/to/data-2", "mode": 0o400}]),
        cm_volume("moded", "cfg", defaultMode=0o400),
    ], uid="u1"))
    env.start()
    mapped = env.volume_dir("u1", CM, "mapped")
    moded = env.volume_dir("u1", CM, "moded")
    wait_for(lambda: visible_files(mapped) and visible_files(moded), what="both volumes")
    assert visible_files(mapped) == {"path/to/data-2": b"value-2"}
    assert mode_of(mapped / "path/to/data-2") == 0o400
    files = visible_files(moded)
    assert files["blob"] == bytes(range(256))
    assert {mode_of(moded / k) for k in files} == {0o400}


def test_configmap_update_is_reflected(env):
    env.put_object(configmap("cfg", {"data-1": "value-1"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(d) == {"data-1": b"value-1"})
    env.put_object(configmap("cfg", {"data-1": "value-2", "data-3": "value-3"}))
    wait_for(lambda: visible_files(d) == {"data-1": b"value-2", "data-3": b"value-3"},
             what="the update")
    # The old version goes right after the swap, off the write's path (the removal queue).
    wait_for(lambda: dot_entries(d) == sorted(["..data", os.readlink(d / "..data")]),
             what="the old version removed")


def test_same_name_in_another_namespace_is_another_object(env):
    env.put_object(configmap("cfg", {"k": "default-ns"}))
    env.put_object(configmap("cfg", {"k": "other-ns"}, namespace="other"), name="other-cfg.yaml")
    p = pod("p", [cm_volume("v", "cfg")], uid="u1")
    p["metadata"]["namespace"] = "other"
    env.put_pod(p)
    env.start()
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"other-ns"})


def test_optional_configmap_create_update_delete(env):
    env.put_pod(pod("p", [cm_volume("v", "maybe", optional=True)], uid="u1"))
    env.start()
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: (d / "..data").is_dir(), what="an empty volume")
    assert visible_files(d) == {}
    env.put_object(configmap("maybe", {"k": "v1"}))
    wait_for(lambda: visible_files(d) == {"k": b"v1"}, what="create")
    env.put_object(configmap("maybe", {"k": "v2"}))
    wait_for(lambda: visible_files(d) == {"k": b"v2"}, what="update")
    os.remove(env.objects / "configmap-maybe.yaml")
    wait_for(lambda: visible_files(d) == {}, what="delete")


def test_missing_required_key_fails_without_a_directory(env):
    env.put_object(configmap("cfg", {"present": "x"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg", items=[{"key": "absent", "path": "a"}])],
                    uid="u1"))
    env.start()
    wait_for(lambda: "configmap references non-existent config key: absent" in env.log(),
             what="the FailedMount log line")
    failed = env.records(msg="FailedMount: MountVolume.SetUp failed", volume="v")
    assert failed and failed[0]["pod"] == "default/p-e2e-node" and failed[0]["podUID"] == "u1"
    assert failed[0]["err"] == "configmap references non-existent config key: absent"
    assert not env.volume_dir("u1", CM, "v").exists()


def test_deleted_object_keeps_last_content_and_reports(env):
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"})
    os.remove(env.objects / "configmap-cfg.yaml")
    wait_for(lambda: env.records(err='configmap "cfg" not found', volume="v"),
             what="not-found FailedMount")
    assert visible_files(d) == {"k": b"v1"}


# --- secret, downwardAPI, projected ----------------------------------------------------------

def test_secret_string_data_and_mode(env):
    env.put_object(secret("s", string_data={"password": "SECRET-MARKER-hunter2"},
                          data={"blob": base64.b64encode(b"\x00\x01").decode()}))
    env.put_pod(pod("p", [{"name": "v", "secret": {"secretName": "s", "defaultMode": 0o400}}],
                    uid="u1"))
    env.start()
    d = env.volume_dir("u1", SECRET, "v")
    wait_for(lambda: visible_files(d) == {"password": b"SECRET-MARKER-hunter2", "blob": b"\x00\x01"})
    assert mode_of(d / "password") == 0o400
    assert "SECRET-MARKER-hunter2" not in env.log()  # secret values never reach the log
    if str(d) in mounts_under(d):
        # On tmpfs, as the kubelet does: the bytes never reach the node's disk.
        assert mode_of(d) == 0o1777
    else:
        assert "cannot mount tmpfs" in env.log()  # unprivileged: said, not silent


def test_no_tmpfs_keeps_secrets_in_a_plain_directory(env):
    env.put_object(secret("s", string_data={"k": "SECRET-MARKER-v"}))
    env.put_pod(pod("p", [{"name": "v", "secret": {"secretName": "s"}}], uid="u1"))
    env.start("--no-tmpfs")
    d = env.volume_dir("u1", SECRET, "v")
    wait_for(lambda: visible_files(d) == {"k": b"SECRET-MARKER-v"})
    assert mounts_under(d) == []
    assert mode_of(d) == 0o777


def test_downward_api_fields(env):
    env.put_pod(pod("p", [{"name": "info", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}},
        {"path": "tier", "fieldRef": {"fieldPath": "metadata.annotations['note']"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory",
                                             "divisor": "1Mi"}},
    ]}}], uid="u1", labels={"key1": "value1", "tier": "front-end"},
        # A label value cannot hold a quote (the pod would be invalid); an annotation can.
        annotations={"a1": "x", "note": "front\"end"}, resources={"limits": {"memory": "64Mi"}}))
    env.start()
    d = env.volume_dir("u1", DOWNWARD, "info")
    files = wait_for(lambda: visible_files(d) if len(visible_files(d)) == 6 else None)
    assert files["labels"] == b'key1="value1"\ntier="front-end"'
    assert files["name"] == f"p-{NODE}".encode()
    assert files["namespace"] == b"default"
    assert files["tier"] == b'front"end'
    assert files["mem"] == b"64"
    assert b'a1="x"' in files["annotations"]
    assert b'note="front\\"end"' in files["annotations"]


def test_downward_api_follows_label_changes(env):
    p = pod("p", [{"name": "info", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}],
        uid="u1", labels={"a": "1"})
    env.put_pod(p)
    env.start()
    d = env.volume_dir("u1", DOWNWARD, "info")
    wait_for(lambda: visible_files(d) == {"labels": b'a="1"'})
    p["metadata"]["labels"] = {"a": "2"}
    env.put_pod(p)
    wait_for(lambda: visible_files(d) == {"labels": b'a="2"'}, what="label update")


def test_projected_combined(env):
    env.put_object(configmap("cfg", {"c": "from-cm"}))
    env.put_object(secret("s", string_data={"s": "SECRET-MARKER-from-secret"}))
    env.put_pod(pod("p", [{"name": "all", "projected": {"sources": [
        {"configMap": {"name": "cfg", "items": [{"key": "c", "path": "cm/c"}]}},
        {"secret": {"name": "s", "items": [{"key": "s", "path": "secret/s"}]}},
        {"downwardAPI": {"items": [{"path": "podname", "fieldRef": {"fieldPath": "metadata.name"}}]}},
    ]}}], uid="u1"))
    env.start()
    d = env.volume_dir("u1", PROJECTED, "all")
    wait_for(lambda: visible_files(d) == {"cm/c": b"from-cm", "secret/s": b"SECRET-MARKER-from-secret",
                                          "podname": f"p-{NODE}".encode()})
    env.put_object(secret("s", string_data={"s": "SECRET-MARKER-rotated"}))
    wait_for(lambda: visible_files(d).get("secret/s") == b"SECRET-MARKER-rotated", what="secret rotation")


# --- pod lifecycle, restarts, crashes ----------------------------------------------------------

def test_pod_deletion_cleans_up(env):
    env.put_object(configmap("cfg", {"k": "v"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")))
    os.remove(env.pods / "p.yaml")
    wait_for(lambda: not (env.root / "pods" / "u1").exists(), what="pod dir removal")


def test_restart_without_rewrite_and_after_changes_while_down(env):
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"})
    before = os.readlink(d / "..data")
    assert env.stop() == 0

    env.start()
    wait_for(lambda: "reconstructed 1 volume(s)" in env.log(), what="reconstruction")
    time.sleep(0.5)  # several reconciler passes
    assert os.readlink(d / "..data") == before  # verified, not rewritten
    assert env.stop() == 0

    env.put_object(configmap("cfg", {"k": "v2"}))  # changed while the daemon is down
    env.start()
    wait_for(lambda: visible_files(d) == {"k": b"v2"}, what="the change made while down")
    # The old version goes right after the swap that made the new content visible.
    wait_for(lambda: dot_entries(d) == sorted(["..data", os.readlink(d / "..data")]),
             what="the old version removed")


def test_sigkill_during_updates_then_restart_is_consistent(env):
    n_pods = 5
    env.put_object(configmap("cfg", {"a": "0", "b": "0"}))
    for i in range(n_pods):
        env.put_pod(pod(f"p{i}", [cm_volume("v", "cfg")], uid=f"u{i}"))
    env.start()
    dirs = [env.volume_dir(f"u{i}", CM, "v") for i in range(n_pods)]
    wait_for(lambda: all(visible_files(d) for d in dirs))
    for version in range(1, 40):
        env.put_object(configmap("cfg", {"a": str(version), "b": str(version)}))
        time.sleep(0.003 * (version % 5))
    env.stop(signal.SIGKILL)
    for d in dirs:
        files = visible_files(d)
        assert files["a"] == files["b"], f"torn volume {d}: {files}"
    env.start()
    wait_for(lambda: all(visible_files(d) == {"a": b"39", "b": b"39"} for d in dirs),
             what="the last version everywhere")
    for d in dirs:
        # Debris goes with the first write; the old version right after the last swap.
        wait_for(lambda: dot_entries(d) == sorted(["..data", os.readlink(d / "..data")]),
                 what=f"no debris left in {d}")


def test_sigterm_stops_gracefully(env):
    # Exit status 0 only comes from a graceful stop: when in-flight writes outlast the grace period
    # the daemon exits with 3 (4 when the stop itself failed), so a hanging stop fails here.
    env.put_object(configmap("cfg", {"k": "v"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "v")))
    assert env.stop(signal.SIGTERM, timeout=30) == 0
    log = env.log()
    assert "SIGTERM: stopping" in log
    assert any(line.rstrip().endswith(" stopped") for line in log.splitlines())


# --- bad input -----------------------------------------------------------------------------------

def test_invalid_manifests_are_reported_and_others_served(env):
    env.put_object(configmap("cfg", {"k": "v"}))
    (env.pods / "broken.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: [oops\n")
    env.put_pod(pod("traversal", [cm_volume("v", "cfg", items=[{"key": "k", "path": "../../escape"}])],
                    uid="bad"))
    env.put_pod(pod("good", [cm_volume("v", "cfg")], uid="good"))
    (env.objects / "broken.yaml").write_text("kind: ConfigMap\ndata: {k: [1]}\n")
    env.start()
    wait_for(lambda: visible_files(env.volume_dir("good", CM, "v")) == {"k": b"v"})
    log = env.log()
    assert "broken.yaml" in log
    assert "must not contain '..'" in log
    assert not (env.root / "pods" / "bad").exists()
    assert not list(env.tmp.rglob("escape"))


def test_hostile_symlinks_in_a_volume_dir_are_not_followed(env):
    outside = env.tmp / "outside"
    outside.mkdir()
    (outside / "k").write_text("precious")
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start()
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"})
    live = os.readlink(d / "..data")
    # Replace the live version dir and ..data_tmp with links that point outside.
    subprocess.run(["rm", "-rf", str(d / live)], check=True)
    os.symlink(outside, d / live)
    os.symlink(outside, d / "..data_tmp")
    env.put_object(configmap("cfg", {"k": "v2"}))
    wait_for(lambda: visible_files(d) == {"k": b"v2"}, what="the update")
    assert (outside / "k").read_text() == "precious"
    assert sorted(p.name for p in outside.iterdir()) == ["k"]


def test_bad_flags_exit_2_with_a_message(tmp_path):
    r = subprocess.run([BIN, "--sync-frequency", "10", "--pod-manifest-path", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "--sync-frequency: invalid duration \"10\": missing unit" in r.stderr
    r = subprocess.run([BIN, "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--config-map-and-secret-change-detection-strategy" in r.stdout
    r = subprocess.run([BIN, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("volumemanager ")


def test_help_is_for_people_and_an_empty_value_is_that_value(tmp_path):
    """--help groups the flags, names types, values, exit codes and preflight; --flag= is empty."""
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for text in ["Pod sources", "Objects (ConfigMaps and Secrets):", "Cluster mode",
                 "Writing volumes:", "Admin endpoints", "Logging:", "Leader election",
                 "--sync-frequency DURATION=1m", "--debug-bind-address ADDR=127.0.0.1:10359",
                 "Get|Cache|Watch=Watch", "kubelet|self", "volumemanager preflight",
                 "Exit codes:", "  5  stopped to be restarted onto a new dynamic config"]:
        assert text in r.stdout, text
    assert " TEXT" not in r.stdout
    # The README's "empty: not served", followed by another flag: not a swallowed argument.
    r = subprocess.run([BIN, "--pod-manifest-path", str(tmp_path), "--healthz-bind-address=",
                        "--v=2", "--validate-only"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    effective = json.loads(r.stdout)["volumemanager"]
    assert effective["healthzBindAddress"] == ""
    assert effective["logging"]["verbosity"] == 2
    r = subprocess.run([BIN, "--pod-manifest-path", str(tmp_path),
                        "--config-map-and-secret-change-detection-strategy=watch"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "(valid: Get, Cache or Watch; did you mean Watch?)" in r.stderr
    r = subprocess.run([BIN, "--pod-manifest-path", str(tmp_path), "--sync-frequncy=1m"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "unknown flag --sync-frequncy (did you mean --sync-frequency?)" in r.stderr


@pytest.mark.parametrize("strategy", ["Get", "Cache"])
def test_get_and_cache_strategies_refresh_at_the_periodic_resync(env, strategy):
    """Without change events, the per-pod resync (--sync-frequency) is the propagation bound."""
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg")], uid="u1"))
    env.start("--config-map-and-secret-change-detection-strategy", strategy,
              "--object-cache-ttl", "0s", "--sync-frequency", "500ms")
    d = env.volume_dir("u1", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"})
    env.put_object(configmap("cfg", {"k": "v2"}))
    wait_for(lambda: visible_files(d) == {"k": b"v2"}, timeout=10, what="the resync")


def test_json_log_format_writes_one_object_per_line(env):
    env.put_object(configmap("cfg", {"k": "v"}))
    env.put_pod(pod("p", [cm_volume("v", "cfg", items=[{"key": "missing", "path": "x"}])],
                    uid="u1"))
    env.start("--log-format", "json")
    wait_for(lambda: "FailedMount" in env.log(), what="a FailedMount line")
    env.stop()
    lines = [l for l in env.log().splitlines() if l.strip()]
    records = [json.loads(l) for l in lines]
    failed = [r for r in records if "FailedMount" in r["msg"]]
    assert failed and failed[0]["level"] == "warning"
    assert failed[0]["volume"] == "v" and failed[0]["pod"] == "default/p-e2e-node"
