"""Secret values never leak: the daemon at its highest verbosity (-v 6), in both log formats,
through secret, projected and failing volumes, Secret updates and bad Secret manifests, with
every output it has read back: the whole log, the Events it posted, /metrics, /healthz,
/readyz?verbose, /debug/state, /configz and the messages of failed starts. Every Secret value
and the daemon's token hold SECRET_MARKER; it must occur 0 times, as is or base64-encoded.

(conftest.py runs the same search over the log and the admin endpoints of every daemon of every
end-to-end test; this test makes sure those outputs were produced and read here.)
"""
import json

from conftest import SECRET_MARKER, find_markers, pod, secret, configmap, visible_files, wait_for
from test_cluster import CM, PROJECTED, SECRET, cluster, cm_volume, secret_volume  # noqa: F401

SECRET_DIR = "kubernetes.io~secret"


def scraped_all(daemon):
    urls = {url.split("/", 3)[3] for url, _ in daemon.scraped}
    assert urls == {"metrics", "healthz", "readyz?verbose", "debug/state", "configz"}, urls
    assert all(body for _, body in daemon.scraped)
    return daemon.scraped


def assert_no_marker(what, data):
    assert find_markers(data if isinstance(data, bytes) else data.encode()) == [], what


def test_cluster_mode_at_highest_verbosity_shows_no_secret_value(cluster):
    cluster.put_secret("tls", {"tls.key": f"{SECRET_MARKER}-tls-1", "tls.crt": "SECRET-MARKER-c"})
    cluster.put_configmap("app", {"level": "1"})
    uid = cluster.create_pod("web", [
        secret_volume("tls", "tls"),
        secret_volume("keyed", "tls", items=[{"key": "tls.key", "path": "key"}]),
        {"name": "bundle", "projected": {"sources": [{"configMap": {"name": "app"}},
                                                     {"secret": {"name": "tls"}}]}}])
    cluster.kubelet_sets_up(uid, SECRET, "tls", {"tls.key": f"{SECRET_MARKER}-tls-0",
                                                 "tls.crt": "SECRET-MARKER-c"})
    cluster.kubelet_sets_up(uid, SECRET, "keyed", {"key": f"{SECRET_MARKER}-tls-0"})
    cluster.kubelet_sets_up(uid, PROJECTED, "bundle", {"level": "1",
                                                       "tls.key": f"{SECRET_MARKER}-tls-0",
                                                       "tls.crt": "SECRET-MARKER-c"})
    cluster.start("-v", "6")
    cluster.wait_synced("secret default/tls", "configmap default/app")
    wait_for(lambda: visible_files(cluster.volume_dir(uid, SECRET, "tls")).get("tls.key") ==
             f"{SECRET_MARKER}-tls-1".encode(), what="the secret volume refreshed")
    # An update, then a change that fails the keyed volume (its key is gone): a FailedMount
    # Event and error lines about a Secret.
    cluster.put_secret("tls", {"tls.key": f"{SECRET_MARKER}-tls-2", "tls.crt": "SECRET-MARKER-c"})
    wait_for(lambda: visible_files(cluster.volume_dir(uid, PROJECTED, "bundle")).get("tls.key")
             == f"{SECRET_MARKER}-tls-2".encode(), what="the projected volume refreshed")
    cluster.put_secret("tls", {"other": f"{SECRET_MARKER}-other"})
    wait_for(lambda: [e for e in cluster.events() if e["reason"] == "FailedMount"],
             what="a FailedMount Event")
    log = cluster.log_path.read_bytes()
    assert b"secret default/tls" in log  # the log names the Secret, never a value
    cluster.scrape_admin()
    for url, body in scraped_all(cluster):
        assert_no_marker(url, body)
    assert_no_marker("the Events", json.dumps(cluster.api("GET", "/api/v1/events")))
    assert_no_marker("the log", log)
    cluster.stop()
    assert_no_marker("the log after the stop", cluster.log_path.read_bytes())


def test_standalone_bad_secrets_at_highest_verbosity_show_no_secret_value(env):
    env.put_object(secret("good", string_data={"k": f"{SECRET_MARKER}-good"}))
    # Base64 that is not: the decoder's message must not quote it.
    env.put_object({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"},
                    "data": {"k": f"{SECRET_MARKER}-not base64!"}}, "secret-bad.yaml")
    # A YAML error on the line of a value.
    (env.objects / "broken.yaml").write_text(
        f"apiVersion: v1\nkind: Secret\nmetadata: {{name: broken}}\n"
        f"stringData:\n  k: \"{SECRET_MARKER}-yaml\" trailing\n")
    env.put_object(configmap("cfg", {"k": "v"}))
    env.put_pod(pod("p", [{"name": "s", "secret": {"secretName": "good"}},
                          {"name": "b", "secret": {"secretName": "bad"}},
                          {"name": "m", "secret": {"secretName": "good",
                                                   "items": [{"key": "nope", "path": "x"}]}}],
                    uid="u1"))
    env.start("-v", "6", "--log-format", "json")
    wait_for(lambda: visible_files(env.volume_dir("u1", SECRET_DIR, "s")) ==
             {"k": f"{SECRET_MARKER}-good".encode()}, what="the good secret volume")
    wait_for(lambda: "secret-bad.yaml" in env.log() and "broken.yaml" in env.log() and
             env.records(volume="m", level=lambda lv: lv != "info"),
             what="the bad secrets reported")
    env.scrape_admin()
    for url, body in scraped_all(env):
        assert_no_marker(url, body)
    env.stop()
    log = env.log_path.read_bytes()
    assert all(json.loads(line) for line in log.splitlines() if line.strip())
    assert_no_marker("the JSON log", log)
