#!/usr/bin/python3
"""make run-cluster: cluster mode on one machine, no cluster needed.

Starts the test API server (tests/apiserver/kube-test-apiserver, on 127.0.0.1 with its own CA and
token), loads the demo into it (examples/objects/ and examples/pods/, the pod bound to the demo's
node and then reported running at 127.0.0.2 through its status subresource, as the node's kubelet
would), runs the daemon against it with --volume-ownership self (the daemon sets the volumes up,
as no kubelet runs here), and prints how to change an object with kubectl and watch it land.
Ctrl-C stops both: the daemon after its in-flight writes, then the server (which also stops on
its own when this script dies, as its stdin closes).
"""
import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "apiserver"))
from harness import TestApiServer, set_pod_status  # noqa: E402

PLURALS = {"ConfigMap": "configmaps", "Secret": "secrets", "Pod": "pods"}
POD_IP = "127.0.0.2"


def load(server, path, node):
    """Creates every object of one manifest file in the server; returns them as created."""
    created = []
    for obj in yaml.safe_load_all(path.read_text()):
        if not obj:
            continue
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        namespace = meta.setdefault("namespace", "default")
        meta.pop("uid", None)  # the server assigns it, as a real one does
        if kind == "Pod":
            obj["spec"]["nodeName"] = node
        status, body = server.request("POST", f"/api/v1/namespaces/{namespace}/{PLURALS[kind]}",
                                      json.dumps(obj).encode())
        if status != 201:
            raise SystemExit(f"run-cluster: {path}: creating {kind} {meta.get('name')}: "
                             f"{status} {body}")
        if kind == "Pod":
            # What the node's kubelet would report, through the status subresource (a created pod
            # is Pending): running, at its own address (where the demo's application,
            # examples/reload-listener.py, listens for reload calls).
            body = set_pod_status(server, namespace, meta["name"], {
                "phase": "Running", "podIP": POD_IP, "hostIP": "127.0.0.1"})
        created.append(body)
    return created


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--daemon", required=True, help="the volumemanager binary")
    parser.add_argument("--run-dir", required=True, help="root and state dirs go under it")
    parser.add_argument("--examples", default=str(HERE))
    parser.add_argument("--kubectl", default="kubectl", help="how to name kubectl in the hints")
    parser.add_argument("--node-name", default="demo-node")
    parser.add_argument("--healthz-bind-address", default="127.0.0.1:10358")
    parser.add_argument("--debug-bind-address", default="127.0.0.1:10359")
    args = parser.parse_args()

    run_dir = Path(args.run_dir).resolve()
    root, state = run_dir / "root", run_dir / "state"
    root.mkdir(parents=True, exist_ok=True)
    examples = Path(args.examples)
    with TestApiServer() as server:
        for path in sorted((examples / "objects").glob("*.yaml")):
            load(server, path, args.node_name)
        pods = []
        for path in sorted((examples / "pods").glob("*.yaml")):
            pods += load(server, path, args.node_name)
        kubeconfig = server.kubeconfig
        k = args.kubectl
        volumes = root / "pods" / pods[0]["metadata"]["uid"] / "volumes" if pods else root
        print(f"""
volumemanager, cluster mode, against the test API server at {server.url} (Ctrl-C stops both)
  first   export KUBECONFIG={kubeconfig}
  pods    {k} get pods -o wide      (the demo's pod, bound to node {args.node_name})
  change  {k} patch configmap app-config --type merge -p '{{"data":{{"log-level":"debug"}}}}'
          {k} label pod web tier=backend --overwrite   (the downwardAPI volume follows)
  watch   watch -n0.2 cat {volumes}/kubernetes.io~configmap/app-config/log/level.txt
          {volumes}/kubernetes.io~downward-api/podinfo/labels
  ask     curl {args.healthz_bind_address}/metrics; curl {args.debug_bind_address}/debug/state
  app     the pod's application (examples/reload-listener.py on {POD_IP}:8099) prints each
          reload the daemon asks of it
""", flush=True)
        app = subprocess.Popen([sys.executable, str(HERE / "reload-listener.py"), "--address",
                                POD_IP, "--volume",
                                str(volumes / "kubernetes.io~configmap" / "app-config")])
        daemon = subprocess.Popen([
            args.daemon, "--kubeconfig", kubeconfig, "--node-name", args.node_name,
            "--root-dir", str(root), "--state-dir", str(state), "--volume-ownership", "self",
            "--healthz-bind-address", args.healthz_bind_address,
            "--debug-bind-address", args.debug_bind_address])
        try:
            rc = daemon.wait()
        except KeyboardInterrupt:
            # Ctrl-C reached the daemon too (one process group); it stops after in-flight writes.
            try:
                rc = daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                rc = daemon.wait()
        finally:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait()
            app.terminate()
            app.wait()
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
