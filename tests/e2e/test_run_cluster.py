"""`make run-cluster`'s script (examples/run_cluster.py), briefly: it starts the test API server,
loads the demo, runs the daemon against it with --volume-ownership self, prints how to change an
object, an object changed through the API lands in the volume, and Ctrl-C (SIGINT to the process
group, as a terminal sends it) stops the daemon and the server."""
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from kubernetes import client, config

from conftest import BIN, mounts_under, visible_files, wait_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "run_cluster.py"


@pytest.mark.test_server_only("make run-cluster's demo runs the test server: it needs no build of "
                              "Kubernetes")
def test_run_cluster_serves_the_demo_and_ctrl_c_stops_both(tmp_path):
    out = tmp_path / "out.log"
    with open(out, "wb") as log:
        proc = subprocess.Popen(
            ["/usr/bin/python3", str(SCRIPT), "--daemon", BIN, "--run-dir", str(tmp_path / "run"),
             "--healthz-bind-address", "127.0.0.1:0", "--debug-bind-address", "127.0.0.1:0"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        text = lambda: out.read_text(errors="replace")  # noqa: E731
        wait_for(lambda: "watch -n0.2 cat" in text(), timeout=60, what="the hints")
        kubeconfig = re.search(r"export KUBECONFIG=(\S+)", text()).group(1)
        assert "patch configmap app-config" in text()
        level = Path(re.search(r"watch -n0\.2 cat (\S+)", text()).group(1))
        volume = level.parent.parent
        wait_for(lambda: visible_files(volume).get("log/level.txt") == b"info", timeout=30,
                 what="the demo's configMap volume set up by the daemon")

        api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        api.patch_namespaced_config_map("app-config", "default", {"data": {"log-level": "debug"}})
        wait_for(lambda: visible_files(volume).get("log/level.txt") == b"debug", timeout=30,
                 what="the change through the API in the volume")
        # The demo's application is told (a reload call to the pod's own address, 127.0.0.2).
        wait_for(lambda: "application: reload asked" in text(), timeout=30,
                 what="the demo application's reload line")
        server_pid = None
        for entry in Path("/proc").iterdir():  # the script's children (no procps needed)
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except (OSError, ValueError):
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid and \
                    b"kube-test-apiserver" in cmdline:
                server_pid = int(entry.name)
        assert server_pid is not None

        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=30) == 0, text()
        wait_for(lambda: not Path(f"/proc/{server_pid}").exists(), timeout=30,
                 what="the test API server gone")
        assert "stopped" in text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # The demo's secret and projected volumes are tmpfs mounts (self ownership, as root).
        for m in mounts_under(tmp_path):
            subprocess.run(["umount", "-l", m], check=False)
