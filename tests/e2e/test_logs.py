"""Structured log lines, end to end: the real binary in standalone mode, in both --log-format
values, on a bad manifest, a failing mount, a good mount and an object change. Every line about
a pod, a volume or an object carries them as keys (`pod` namespace/name, `podUID`, `volume`,
`object` kind/namespace/name, `err`; logging/structured_log.h), so lines are selected by key: JSON
fields with --log-format json, klog's `key="value"` pairs in text."""
import json

import pytest

from conftest import configmap, parse_log_line, pod, secret, visible_files, wait_for
from test_standalone import CM, SECRET, cm_volume

MARKER = "SECRET-MARKER-LOGS"


def scenario(env, log_format):
    """Runs the daemon through the scenario; returns the paths of the two bad manifests."""
    env.put_object(configmap("cfg", {"k": "v1"}))
    env.put_object(secret("tls", {"tls.key": MARKER}))
    broken = env.pods / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Pod\nmetadata: [oops\n")
    env.put_pod(pod("traversal", [cm_volume("v", "cfg", items=[{"key": "k", "path": "../x"}])],
                    uid="bad"))
    env.put_pod(pod("good", [cm_volume("v", "cfg"),
                             {"name": "s", "secret": {"secretName": "tls"}}], uid="good"))
    env.put_pod(pod("missing", [cm_volume("v", "absent")], uid="miss"))
    env.start("--log-format", log_format)
    d = env.volume_dir("good", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"}, timeout=30, what="the good pod's volume")
    wait_for(lambda: visible_files(env.volume_dir("good", SECRET, "s")), what="the secret volume")
    env.put_object(configmap("cfg", {"k": "v2"}))
    wait_for(lambda: visible_files(d) == {"k": b"v2"}, timeout=30, what="the update")
    wait_for(lambda: env.records(msg="FailedMount: MountVolume.SetUp failed", podUID="miss"),
             what="the failed mount's line")
    wait_for(lambda: env.records(msg="Volume updated", podUID="good", volume="v"),
             what="the update's line")
    assert env.stop() == 0
    return broken, env.pods / "traversal.yaml"


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_lines_are_selected_by_pod_volume_and_object(env, log_format):
    broken, traversal = scenario(env, log_format)
    text = env.log()
    assert MARKER not in text
    lines = [line for line in text.splitlines() if line.strip()]
    if log_format == "json":
        records = [json.loads(line) for line in lines]  # every line is one JSON object
    else:
        records = [parse_log_line(line) for line in lines]
        assert None not in records, text
        # klog's text form, as it is written.
        assert 'pod="default/good-e2e-node" podUID="good" volume="v"' in text
        assert 'err="configmap \\"absent\\" not found"' in text
    assert all({"ts", "level", "msg"} <= set(r) for r in records)

    # A mount: selected by pod and volume, with its UID.
    mounted = env.records(pod="default/good-e2e-node", volume="v", msg="MountVolume.SetUp succeeded")
    assert len(mounted) == 1 and mounted[0]["podUID"] == "good" and mounted[0]["level"] == "info"
    assert env.records(pod="default/good-e2e-node", volume="s", msg="MountVolume.SetUp succeeded")
    # A failing mount: the error as a field of its own, the volume still named.
    failed = env.records(pod="default/missing-e2e-node", volume="v")
    assert failed and all(r["podUID"] == "miss" for r in failed)
    assert {r["err"] for r in failed if "err" in r} == {'configmap "absent" not found'}
    assert failed[0]["level"] == "warning"
    # An object: its change, by kind/namespace/name.
    changed = env.records(object="configmap/default/cfg")
    assert any(r["msg"] == "Object changed: volumes marked for remount" and r["volumes"] == 1
               for r in changed), changed
    assert not env.records(object="secret/default/tls", msg=lambda m: MARKER in m)
    # Bad manifests: the file and the error as fields.
    bad = env.records(file=str(broken))
    assert bad and bad[0]["level"] == "error" and "err" in bad[0]
    rejected = env.records(file=str(traversal))
    assert rejected and "must not contain '..'" in rejected[0]["err"]
    # Nothing of the bad pod was set up.
    assert not env.records(podUID="bad", msg="MountVolume.SetUp succeeded")


def test_pod_changes_and_skipped_volumes_are_said_once(env):
    """Pods added, updated and removed at info, one line each; a volume no container mounts is
    skipped with a debug line (-v 1 and up) naming it."""
    env.put_object(configmap("cfg", {"k": "v1"}))
    volumes = [cm_volume("v", "cfg"), cm_volume("spare", "cfg")]
    env.put_pod(pod("web", volumes, mounts=["v"], uid="web"))
    env.start()
    d = env.volume_dir("web", CM, "v")
    wait_for(lambda: visible_files(d) == {"k": b"v1"}, what="the mounted volume")
    added = env.records(msg="Pod added", podUID="web")
    assert len(added) == 1, added
    assert added[0]["level"] == "info"
    assert added[0]["pod"] == "default/web-e2e-node" and added[0]["source"] == "file"
    skipped = env.records(msg="Volume skipped: no container mounts it", podUID="web")
    assert [(r["volume"], r["level"]) for r in skipped] == [("spare", "debug")], skipped
    assert not env.volume_dir("web", CM, "spare").exists()

    env.put_pod(pod("web", volumes, mounts=["v"], uid="web", labels={"tier": "front"}))
    wait_for(lambda: env.records(msg="Pod updated", podUID="web"), what="the update's line")
    (env.pods / "web.yaml").unlink()
    wait_for(lambda: env.records(msg="Pod removed", podUID="web"), what="the removal's line")
    for msg in ("Pod added", "Pod updated", "Pod removed"):
        lines = env.records(msg=msg, podUID="web")
        assert len(lines) == 1 and lines[0]["level"] == "info", (msg, lines)
    assert env.stop() == 0
