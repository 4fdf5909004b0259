"""Manifests caught mid-change, end to end (manifestdir/manifest_grace.h): a file caught
mid-write is no error, an unlink followed by a re-create (`git checkout`) is one change that
leaves live volumes alone, a file that stays invalid is logged once, listed in /debug/state and
counted by volumemanager_manifest_errors, and its recovery is logged once. The settle time is
set per test so that no outcome depends on how fast the machine is: an hour where nothing may be
reported, 0s where the report must come at once."""
import json
import os
import urllib.request

import yaml

from conftest import configmap, pod, visible_files, wait_for
from test_standalone import CM, cm_volume


def debug_state(env):
    _, debug = env.admin_addresses()
    with urllib.request.urlopen(debug + "/debug/state", timeout=30) as r:
        return json.loads(r.read())


def manifest_errors(env):
    probe, _ = env.admin_addresses()
    with urllib.request.urlopen(probe + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("volumemanager_manifest_errors{"):
            source = line.split('source="')[1].split('"')[0]
            out[source] = float(line.rsplit(" ", 1)[1])
    return out


def test_a_pod_manifest_caught_mid_write_is_no_error(env):
    """`cat > file`: the file exists empty, then gets its content."""
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("first", [cm_volume("v", "cfg")], uid="first"))
    env.start("--manifest-settle-time", "1h")
    # Running (past its first read of the directory, which reports at once).
    wait_for(lambda: visible_files(env.volume_dir("first", CM, "v")) == {"k": b"v1"},
             what="the first pod's volume")
    path = env.pods / "late.yaml"
    with open(path, "w") as f:
        f.flush()
        os.fsync(f.fileno())
        # The empty file has been read once a later manifest's volume is there.
        env.put_pod(pod("marker", [cm_volume("v", "cfg")], uid="marker"))
        wait_for(lambda: visible_files(env.volume_dir("marker", CM, "v")) == {"k": b"v1"},
                 what="the marker pod's volume")
        f.write(yaml.safe_dump(pod("late", [cm_volume("v", "cfg")], uid="late")))
    wait_for(lambda: visible_files(env.volume_dir("late", CM, "v")) == {"k": b"v1"},
             what="the late pod's volume")
    assert not env.records(file=str(path), level=lambda lv: lv != "debug"), \
        "a line about the file caught mid-write"
    assert not env.records(level="error")
    assert debug_state(env)["rejectedManifests"] == []
    assert manifest_errors(env) == {"pods": 0, "objects": 0}


def test_an_unlink_and_recreate_leaves_live_volumes_alone(env):
    """`git checkout examples` unlinks the files it restores and creates them again."""
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("web", [cm_volume("v", "cfg")], uid="web"))
    env.start("--manifest-settle-time", "1h")
    d = env.volume_dir("web", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"}, what="the volume")
    pod_file = env.pods / "web.yaml"
    cm_file = env.objects / "configmap-cfg.yaml"
    pod_bytes, cm_bytes = pod_file.read_bytes(), cm_file.read_bytes()
    os.unlink(pod_file)
    os.unlink(cm_file)
    # Both removals have been seen once a later object's change has landed.
    env.put_object(configmap("other", {"k": "x"}))
    env.put_pod(pod("marker", [cm_volume("v", "other")], uid="marker"))
    wait_for(lambda: visible_files(env.volume_dir("marker", CM, "v")) == {"k": b"x"},
             what="the marker pod's volume")
    cm_file.write_bytes(cm_bytes)
    pod_file.write_bytes(pod_bytes)
    env.put_object(configmap("cfg", {"k": "v2"}))  # then a real change lands as usual
    wait_for(lambda: visible_files(d) == {"k": b"v2"}, what="the change after the re-create")
    # (The marker pod may be read before its object: its own FailedMount is not the point.)
    assert not env.records(msg=lambda m: "FailedMount" in m, podUID="web"), env.log()
    assert not env.records(msg=lambda m: "TearDown" in m), env.log()
    assert not env.records(msg=lambda m: m.startswith("Object manifest removed")), env.log()
    assert not env.records(object="configmap/default/cfg", change="deleted"), env.log()


def test_an_invalid_manifest_is_listed_counted_and_its_recovery_logged_once(env):
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_pod(pod("web", [cm_volume("v", "cfg")], uid="web"))
    env.start("--manifest-settle-time", "0s")
    d = env.volume_dir("web", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"}, what="the volume")
    bad_pod = env.pods / "web.yaml"
    bad_object = env.objects / "configmap-cfg.yaml"
    good_pod, good_object = bad_pod.read_text(), bad_object.read_text()
    bad_pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: Not_Valid}\n")
    bad_object.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_}\n")
    wait_for(lambda: len(debug_state(env)["rejectedManifests"]) == 2, what="both listed")
    rejected = {r["source"]: r for r in debug_state(env)["rejectedManifests"]}
    assert rejected["pods"]["file"] == str(bad_pod)
    assert "metadata.name" in rejected["pods"]["reason"]
    assert rejected["objects"]["file"] == str(bad_object)
    assert "metadata.name" in rejected["objects"]["reason"]
    assert manifest_errors(env) == {"pods": 1, "objects": 1}
    assert len(env.records(file=str(bad_pod), level="error")) == 1
    assert visible_files(d) == {"k": b"v1"}, "the last good versions are kept"

    bad_pod.write_text(good_pod)
    bad_object.write_text(good_object)
    wait_for(lambda: debug_state(env)["rejectedManifests"] == [], what="both valid again")
    assert manifest_errors(env) == {"pods": 0, "objects": 0}
    wait_for(lambda: env.records(msg="Object manifest is valid again", file=str(bad_object)),
             what="the object manifest's recovery line")
    assert len(env.records(msg="Pod manifest is valid again", file=str(bad_pod))) == 1
    assert len(env.records(msg="Object manifest is valid again", file=str(bad_object))) == 1
    assert all(r["level"] == "info" for r in env.records(msg=lambda m: "valid again" in m))
