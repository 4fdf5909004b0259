"""The admin endpoints and the configuration file of the real binary in standalone mode:
/healthz, /readyz (?verbose), /metrics (checked by promtool, parsed by prometheus_client),
/debug/state, /configz, which listener serves what, and --config with flags overriding it."""
import http.client
import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conftest import (BIN, configmap, pod, secret, skip_unless_root, visible_files,
                      wait_for)

CM = "kubernetes.io~configmap"
SECRET_VALUE = "SECRET-MARKER-value-never-shown"

# Every metric family /metrics lists in standalone mode (docs/operations.md, "Metrics").
METRICS = {
    "storage_operation_duration_seconds",
    "volumemanager_propagation_duration_seconds",
    "volumemanager_operation_errors_total",
    "volumemanager_reconciler_outcomes_total",
    "volumemanager_subpath_copies_total",
    "volumemanager_volumes",
    "volume_manager_total_volumes",
    "volumemanager_loop_iteration_busy_seconds",
    "volumemanager_loop_longest_iteration_seconds",
    "volumemanager_build_info",
    "volumemanager_ownership_journal_state",
    "volumemanager_manifest_errors",
    "volumemanager_tmpfs_bytes",
    "volumemanager_ready",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
}


def get(url):
    """(status, body, content type) of a GET; error statuses are answers too."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode(), r.headers.get("Content-Type")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers.get("Content-Type")


def metrics(probe):
    """/metrics, checked by promtool, as {family name: prometheus_client family}."""
    status, text, ctype = get(probe + "/metrics")
    assert status == 200
    assert ctype == "text/plain; version=0.0.4; charset=utf-8"
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # prometheus_client names a counter family without its _total suffix.
    out = {}
    for f in text_string_to_metric_families(text):
        out[f.name + "_total" if f.type == "counter" else f.name] = f
    return out, text


def sample(families, family, suffix="", **labels):
    """The value of the one sample of `family` (+ `suffix`) with these labels, or None."""
    for s in families[family].samples:
        if s.name == family + suffix and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def test_endpoints_metrics_and_debug_state(env):
    env.put_object(configmap("cfg", {"greeting": "hello"}) | {
        "metadata": {"name": "cfg", "resourceVersion": "41"}})
    env.put_object(secret("creds", string_data={"password": SECRET_VALUE}))
    env.put_pod(pod("web", [{"name": "cfg", "configMap": {"name": "cfg"}},
                            {"name": "creds", "secret": {"secretName": "creds"}},
                            {"name": "broken", "configMap": {"name": "missing"}}], uid="u1"))
    env.start("--no-tmpfs")
    probe, debug = env.admin_addresses()
    cfg_dir = env.volume_dir("u1", CM, "cfg")
    wait_for(lambda: visible_files(cfg_dir), what="the configMap volume")

    assert get(probe + "/healthz")[:2] == (200, "ok")
    assert get(probe + "/healthz?verbose")[:2] == (200, "[+]loop ok\nhealthz check passed\n")
    wait_for(lambda: get(probe + "/readyz")[0] == 200, what="ready")
    assert get(probe + "/readyz?verbose")[1] == (
        "[+]volume-reconstruction ok\n[+]volumes-synced ok\n[+]pod-source-file ok\n"
        "[+]shutdown ok\n"
        "readyz check passed\n")

    # An object change, published: its propagation time is measured.
    env.put_object(configmap("cfg", {"greeting": "hi"}) | {
        "metadata": {"name": "cfg", "resourceVersion": "42"}})
    wait_for(lambda: visible_files(cfg_dir).get("greeting") == b"hi", what="the new content")
    wait_for(lambda: sample(metrics(probe)[0], "volumemanager_propagation_duration_seconds",
                            "_count", volume_plugin="kubernetes.io/configmap") == 1,
             what="one propagation measured")
    wait_for(lambda: sample(metrics(probe)[0], "volumemanager_volumes", state="failing") == 1,
             what="the broken volume counted as failing")
    families, text = metrics(probe)
    assert METRICS <= set(families), METRICS - set(families)
    ops = "storage_operation_duration_seconds"
    assert sample(families, ops, "_count", operation_name="volume_mount", status="success",
                  volume_plugin="kubernetes.io/configmap") == 2  # first mount and the update
    assert sample(families, ops, "_count", operation_name="volume_mount", status="success",
                  volume_plugin="kubernetes.io/secret") == 1
    assert sample(families, ops, "_count", operation_name="volume_mount", status="fail-unknown",
                  volume_plugin="kubernetes.io/configmap") >= 1
    # The kubelet's buckets.
    buckets = sorted(float(s.labels["le"]) for s in families[ops].samples
                     if s.name == ops + "_bucket" and s.labels["volume_plugin"] ==
                     "kubernetes.io/secret")
    assert buckets == [.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600, float("inf")]
    assert sample(families, "volumemanager_operation_errors_total",
                  operation_name="volume_mount", volume_plugin="kubernetes.io/configmap",
                  reason="object_unavailable") >= 1
    assert sample(families, "volumemanager_volumes", state="mounted") == 2
    assert sample(families, "volumemanager_reconciler_outcomes_total",
                  outcome="version_published") == 3
    assert sample(families, "volume_manager_total_volumes", plugin_name="kubernetes.io/configmap",
                  state="desired_state_of_world") == 2
    # No pod asks for subPath copies: each result listed, at 0 (test_subpath.py counts them).
    for result in ("updated", "current", "not_bound", "refused", "failed"):
        assert sample(families, "volumemanager_subpath_copies_total", result=result) == 0
    assert sample(families, "volumemanager_build_info")
    assert sample(families, "volumemanager_ownership_journal_state", state="trusted") == 1
    assert sample(families, "volumemanager_ownership_journal_state",
                  state="waiting_for_filesystem") == 0
    assert families["volumemanager_loop_iteration_busy_seconds"].samples
    assert SECRET_VALUE not in text
    assert sample(families, "volumemanager_ready") == 1  # as /readyz above
    assert sample(families, "volumemanager_leader_election_leader") == 1  # holds the node's lock
    # --no-tmpfs: the secret volume is on the root dir's filesystem. On a disk no tmpfs memory is
    # held; where the root dir is itself on a tmpfs (/tmp here is one), its volumes' pages are.
    root_fs = subprocess.run(["stat", "-f", "-c", "%T", str(cfg_dir)], capture_output=True,
                             text=True, check=True).stdout.strip()
    if root_fs == "tmpfs":
        assert sample(families, "volumemanager_tmpfs_bytes") > 0
    else:
        assert sample(families, "volumemanager_tmpfs_bytes") == 0

    status, body, ctype = get(debug + "/debug/state")
    assert status == 200 and ctype == "application/json"
    assert SECRET_VALUE not in body
    state = {v["volume"]: v for v in json.loads(body)["volumes"]}
    assert state["cfg"]["pod"] == "default/web-e2e-node"  # a static pod is named after its node
    assert state["cfg"]["podUID"] == "u1"
    assert state["cfg"]["objects"] == [{"kind": "ConfigMap", "namespace": "default",
                                        "name": "cfg", "exists": True, "resourceVersion": "42"}]
    assert state["cfg"]["actual"]["version"].startswith("..")
    assert state["cfg"]["actual"]["lastSync"]
    assert state["cfg"]["backoff"] is None and state["cfg"]["lastError"] == ""
    assert state["cfg"]["phase"] == "idle"
    broken = state["broken"]
    assert broken["phase"] in ("backing-off", "due", "fetching", "writing")
    assert broken["actual"] is None and broken["desired"] is True
    assert 'configmap "missing" not found' in broken["lastError"]
    assert broken["backoff"]["until"] and broken["backoff"]["delay"]
    assert broken["objects"][0]["exists"] is False
    assert state["creds"]["objects"][0]["kind"] == "Secret"

    # The debug endpoints are not on the probe listener, and the probes not on the debug one.
    for path in ("/debug/state", "/configz"):
        assert get(probe + path)[0] == 404
    for path in ("/healthz", "/readyz", "/metrics"):
        assert get(debug + path)[0] == 404
    req = urllib.request.Request(probe + "/healthz", method="POST", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 405

    configz = json.loads(get(debug + "/configz")[1])
    assert configz["configFile"] is None
    assert configz["volumemanager"]["kind"] == "VolumeManagerConfiguration"
    assert configz["volumemanager"]["tmpfs"] is False
    assert configz["sources"]["tmpfs"] == "flag"
    assert configz["sources"]["syncFrequency"] == "default"
    assert env.stop() == 0


def proc_status(pid, key):
    """A field of /proc/<pid>/status, in its unit (kB for memory)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{key} not in /proc/{pid}/status")


def test_process_metrics_agree_with_proc(env):
    # The process_* families every exporter has, with their standard types, compared with what
    # /proc says of the daemon at the same moment.
    env.put_pod(pod("web", [{"name": "cfg", "configMap": {"name": "cfg"}}], uid="u1"))
    env.put_object(configmap("cfg", {"greeting": "hello"}))
    before = time.time()
    env.start()
    pid = env.proc.pid
    probe, _ = env.admin_addresses()
    wait_for(lambda: get(probe + "/readyz")[0] == 200, what="ready")
    started_by = time.time()
    families, _ = metrics(probe)
    rss_kib = proc_status(pid, "VmRSS")
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    soft = next(line.split()[3] for line in open(f"/proc/{pid}/limits")
                if line.startswith("Max open files"))
    kinds = {name: families[name].type for name in (
        "process_cpu_seconds_total", "process_resident_memory_bytes",
        "process_virtual_memory_bytes", "process_start_time_seconds", "process_open_fds",
        "process_max_fds")}
    assert kinds == {"process_cpu_seconds_total": "counter",
                     "process_resident_memory_bytes": "gauge",
                     "process_virtual_memory_bytes": "gauge",
                     "process_start_time_seconds": "gauge", "process_open_fds": "gauge",
                     "process_max_fds": "gauge"}
    rss = sample(families, "process_resident_memory_bytes")
    assert abs(rss - rss_kib * 1024) <= 0.10 * rss_kib * 1024, (rss, rss_kib)
    assert sample(families, "process_virtual_memory_bytes") >= rss
    assert abs(sample(families, "process_open_fds") - fds) <= 3
    assert sample(families, "process_max_fds") == (float("inf") if soft == "unlimited"
                                                    else float(soft))
    start = sample(families, "process_start_time_seconds")
    assert before - 1 <= start <= started_by, (before, start, started_by)
    cpu = sample(families, "process_cpu_seconds_total")
    assert 0 <= cpu <= time.time() - before + 1
    assert env.stop() == 0


SECRET_VOLUME = "kubernetes.io~secret"


def tmpfs_bytes(probe):
    return sample(metrics(probe)[0], "volumemanager_tmpfs_bytes")


def test_tmpfs_bytes_follow_writes_removals_and_restarts(env):
    # The daemon mounts a tmpfs per secret volume (root): what it holds there is each file's
    # size rounded up to 4 KiB pages, kept as it writes, removes and restarts; a configMap
    # volume holds none on a disk, and its own pages where the root dir is on a tmpfs (/tmp here
    # is one).
    skip_unless_root("tmpfs volumes")
    page = os.sysconf("SC_PAGESIZE")
    env.put_object(secret("creds", string_data={"a": "SECRET-MARKER-" + "x" * 5000,
                                                "b": "SECRET-MARKER-short"}))
    env.put_object(configmap("cfg", {"big": "y" * 100000}))
    env.put_pod(pod("web", [{"name": "creds", "secret": {"secretName": "creds"}},
                            {"name": "cfg", "configMap": {"name": "cfg"}}], uid="u1"))
    env.start()
    probe, _ = env.admin_addresses()
    creds = env.volume_dir("u1", SECRET_VOLUME, "creds")
    wait_for(lambda: get(probe + "/readyz")[0] == 200, what="ready")
    assert "tmpfs" in subprocess.run(["stat", "-f", "-c", "%T", str(creds)], capture_output=True,
                                     text=True).stdout
    cfg_on_tmpfs = "tmpfs" in subprocess.run(
        ["stat", "-f", "-c", "%T", str(env.volume_dir("u1", CM, "cfg"))], capture_output=True,
        text=True).stdout
    cfg = -(-100000 // page) * page if cfg_on_tmpfs else 0
    assert tmpfs_bytes(probe) == 2 * page + page + cfg  # 5014 bytes: two pages; 19 bytes: one

    # An update: the new version's pages replace the old one's.
    env.put_object(secret("creds", string_data={"a": "SECRET-MARKER-" + "x" * 9000}))
    wait_for(lambda: sorted(visible_files(creds)) == ["a"], what="the update")
    wait_for(lambda: tmpfs_bytes(probe) == 3 * page + cfg, what="three pages after the update")

    # A restart: re-established from the volume found on disk.
    assert env.stop() == 0
    env.start()
    wait_for(lambda: env.log().count("serving /debug/state and /configz on") == 2,
             what="the restarted daemon's addresses")
    probe, _ = env.admin_addresses()
    wait_for(lambda: get(probe + "/readyz")[0] == 200, what="ready again")
    assert tmpfs_bytes(probe) == 3 * page + cfg
    assert sample(metrics(probe)[0], "volumemanager_reconciler_outcomes_total",
                  outcome="version_published") == 0  # found current: nothing rewritten

    # The pod gone, its volumes torn down: nothing held.
    (env.pods / "web.yaml").unlink()
    wait_for(lambda: not creds.exists(), what="the teardown")
    wait_for(lambda: tmpfs_bytes(probe) == 0, what="nothing held after the teardown")
    assert env.stop() == 0


def test_readyz_names_the_missing_pod_source(env, tmp_path):
    # A manifest URL that never answers: the http source is never seen, so the daemon never
    # becomes ready (orphans must not be cleaned up yet), while it is alive.
    env.start("--manifest-url", "http://127.0.0.1:9/pods")
    probe, _ = env.admin_addresses()
    wait_for(lambda: get(probe + "/readyz")[0] == 503, what="not ready")
    status, body, _ = get(probe + "/readyz")
    assert "[-]pod-source-http failed: reason withheld\n" in body
    assert body.endswith("readyz check failed\n")
    status, body, _ = get(probe + "/readyz?verbose")
    assert status == 503
    assert ("[-]pod-source-http failed: no complete list of pods received yet from "
            "http://127.0.0.1:9/pods\n") in body
    assert "[+]pod-source-file ok\n" in body
    assert get(probe + "/healthz")[:2] == (200, "ok")
    # /metrics says the same as /readyz, from the same checks.
    assert sample(metrics(probe)[0], "volumemanager_ready") == 0
    assert env.stop() == 0


def test_a_standalone_daemon_maps_no_http_or_tls_library(env):
    # The admin endpoints are served without one (server/http_server.h); libcurl, libnghttp2
    # and GnuTLS are opened only when a pod source or the API server needs them.
    env.put_pod(pod("web", [{"name": "cfg", "configMap": {"name": "cfg"}}], uid="u1"))
    env.put_object(configmap("cfg", {"greeting": "hello"}))
    env.start()
    probe, debug = env.admin_addresses()
    wait_for(lambda: get(probe + "/readyz")[0] == 200, what="ready")
    # One connection, as a Prometheus scraper keeps it: several requests, HTTP/1.1 keep-alive.
    host, port = probe.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    for path in ("/metrics", "/healthz", "/readyz?verbose", "/metrics"):
        conn.request("GET", path)
        r = conn.getresponse()
        assert r.status == 200, path
        assert r.read()
        assert r.getheader("Connection") is None, path  # kept open
    conn.request("HEAD", "/healthz")
    r = conn.getresponse()
    assert (r.status, r.getheader("Content-Length"), r.read()) == (200, "2", b"")
    conn.close()
    assert get(debug + "/debug/state")[0] == 200
    maps = open(f"/proc/{env.proc.pid}/maps").read()
    for lib in ("libgnutls", "libcurl", "libnghttp2", "libssl", "libcrypto", "libmicrohttpd",
                "libp11-kit"):
        assert lib not in maps, lib + " is mapped by a standalone daemon"
    assert env.stop() == 0


def test_a_taken_debug_port_is_logged_and_the_probes_are_still_served(env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = "127.0.0.1:%d" % taken.getsockname()[1]
        env.start("--debug-bind-address", address)
        wait_for(lambda: f"--debug-bind-address: {address}: cannot listen" in env.log(),
                 what="the error naming the flag")
        probe = wait_for(lambda: re.findall(r"serving /healthz, /readyz and /metrics on (\S+)",
                                            env.log()), what="the probe listener")[-1]
        assert get(f"http://{probe}/healthz")[:2] == (200, "ok")
        assert "serving /debug/state" not in env.log()
        assert env.stop() == 0


def test_config_file_with_flags_overriding_it(env, tmp_path):
    env.put_object(configmap("cfg", {"k": "v"}))
    env.put_pod(pod("web", [{"name": "cfg", "configMap": {"name": "cfg"}}], uid="u1"))
    config = tmp_path / "vm.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "volumemanager.io/v1alpha1", "kind": "VolumeManagerConfiguration",
        "syncFrequency": "5m", "tmpfs": False, "healthzBindAddress": "127.0.0.1:0",
        "debugBindAddress": "127.0.0.1:0", "logging": {"format": "json", "verbosity": 2},
        "nodeAllocatable": {"cpu": "3"},
    }))
    # --sync-frequency on the command line wins over the file's 5m.
    env.start("--config", str(config), "--sync-frequency", "45s")
    _, debug = env.admin_addresses()
    wait_for(lambda: visible_files(env.volume_dir("u1", CM, "cfg")), what="the volume")
    configz = json.loads(get(debug + "/configz")[1])
    assert configz["configFile"] == str(config)
    vm = configz["volumemanager"]
    assert vm["syncFrequency"] == "45s" and configz["sources"]["syncFrequency"] == "flag"
    assert vm["tmpfs"] is False and configz["sources"]["tmpfs"] == "file"
    # The fixture's "-v 1" overrides the file's verbosity 2.
    assert vm["logging"] == {"format": "json", "verbosity": 1}
    assert configz["sources"]["logging.format"] == "file"
    assert configz["sources"]["logging.verbosity"] == "flag"
    assert vm["nodeAllocatable"] == {"cpu": "3"}
    assert vm["rootDir"] == str(env.root) and configz["sources"]["rootDir"] == "flag"
    assert configz["sources"]["objectCacheTTL"] == "default"
    # The file's log format is in effect: JSON lines.
    assert any(line.startswith("{") for line in env.log().splitlines())
    assert env.stop() == 0


@pytest.mark.parametrize("content,error", [
    ({"syncFrequncy": "1m"}, 'unknown field "syncFrequncy"'),
    ({"syncFrequency": 60}, "field syncFrequency: must be a duration string"),
    ({"syncFrequency": "0s"},
     "field syncFrequency: --sync-frequency: must be greater than 0"),
])
def test_bad_config_file_exits_2_naming_the_field(tmp_path, content, error):
    config = tmp_path / "vm.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "volumemanager.io/v1alpha1",
                                      "kind": "VolumeManagerConfiguration",
                                      "staticPodPath": str(tmp_path), **content}))
    r = subprocess.run([BIN, "--config", str(config)], capture_output=True, text=True)
    assert r.returncode == 2
    assert f"volumemanager: --config {config}: {error}" in r.stderr, r.stderr
