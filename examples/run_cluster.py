#!/usr/bin/python3
"""make run-cluster: cluster mode on one machine, no cluster needed.

Starts the test API server (tests/apiserver/kube-test-apiserver, on 127.0.0.1 with its own CA and
token), loads the demo into it (examples/objects/ and examples/pods/, the pod bound to the demo's
node and then reported running through its status subresource, as the node's kubelet would), runs
the daemon against it with --volume-ownership self (the daemon sets the volumes up, as no kubelet
runs here), and prints how to change an object with kubectl and watch it land. Ctrl-C stops both:
the daemon after its in-flight writes, then the server (which also stops on its own when this
script dies, as its stdin closes).

The pod's application (examples/reload-listener.py) must be at an address of its own: in cluster
mode the daemon never calls loopback or the node's own addresses. As root, the server and the
daemon run in a network namespace of the demo's own (the node's, at 10.77.0.1) and the pod's
application in a further one at 10.78.1.2, joined by a veth pair: nothing is added to the
machine's network. The server's and the daemon's ports are relayed from the machine's 127.0.0.1,
so kubectl and curl work as usual. Without root no namespace can be made: the pod is reported
running without an address, no application runs, and the daemon refuses its reload call (a
ReloadFailed Event says why).
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "apiserver"))
sys.path.insert(0, str(REPO / "tests" / "realkube"))
from harness import TestApiServer, set_pod_status  # noqa: E402
from netns import NODE_IP, NodeNetwork, relay  # noqa: E402

PLURALS = {"ConfigMap": "configmaps", "Secret": "secrets", "Pod": "pods"}


class Relay:
    """Relays connections accepted on a socket of the machine's network to 127.0.0.1:port of the
    network the relay's threads run in (started after the move into the demo's namespace)."""

    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.listener = socket.create_server((host, int(port)))
        self.port = self.listener.getsockname()[1]
        self.address = f"{host}:{self.port}"

    def start(self, target_port=None):
        self.target_port = target_port or self.port
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            relay(client, upstream)


def load(server, path, node, pod_ip):
    """Creates every object of one manifest file in the server; returns them as created. Pods are
    reported running at `pod_ip` (None: without an address)."""
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
            status = {"phase": "Running", "hostIP": NODE_IP}
            if pod_ip:
                status["podIP"] = pod_ip
            body = set_pod_status(server, namespace, meta["name"], status)
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
    network, relays, pod_ip, why_not = None, {}, None, None
    if os.geteuid() != 0:
        why_not = "not root"
    else:
        try:
            # The machine-side sockets first, while this thread is still in the machine's network.
            relays = {"api": Relay("127.0.0.1:0"),
                      "healthz": Relay(args.healthz_bind_address),
                      "debug": Relay(args.debug_bind_address)}
            network = NodeNetwork().__enter__()
            pod_ip = network.pods.set_up("web")
        except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
            if isinstance(e, OSError) and e.errno == 98:  # EADDRINUSE: say so, as the daemon would
                raise SystemExit(f"run-cluster: {e}")
            if network is not None:
                network.__exit__(None, None, None)
            network, pod_ip, why_not = None, None, f"no network namespace: {e}"
            for relay in relays.values():
                relay.listener.close()
            relays = {}
    healthz = relays["healthz"].address if relays else args.healthz_bind_address
    debug = relays["debug"].address if relays else args.debug_bind_address
    try:
        return run(args, root, state, examples, network, relays, pod_ip, why_not, healthz, debug)
    finally:
        if network is not None:
            network.__exit__(None, None, None)


def run(args, root, state, examples, network, relays, pod_ip, why_not, healthz, debug):
    with TestApiServer() as server:
        # The node, as its kubelet would register it: the daemon checks that it exists.
        status, body = server.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": args.node_name}})
        if status != 201:
            raise SystemExit(f"run-cluster: creating node {args.node_name}: {status} {body}")
        for path in sorted((examples / "objects").glob("*.yaml")):
            load(server, path, args.node_name, pod_ip)
        pods = []
        for path in sorted((examples / "pods").glob("*.yaml")):
            pods += load(server, path, args.node_name, pod_ip)
        kubeconfig = server.kubeconfig
        url = server.url
        if relays:
            # kubectl and curl on the machine reach the server and the daemon through the relays.
            for relay in relays.values():
                relay.start(server.port if relay is relays["api"] else None)
            url = f"https://{relays['api'].address}"
            config = yaml.safe_load(Path(server.kubeconfig).read_text())
            for cluster in config["clusters"]:
                cluster["cluster"]["server"] = url
            kubeconfig = str(Path(args.run_dir).resolve() / "kubeconfig")
            Path(kubeconfig).write_text(yaml.safe_dump(config))
            os.chmod(kubeconfig, 0o600)
        k = args.kubectl
        volumes = root / "pods" / pods[0]["metadata"]["uid"] / "volumes" if pods else root
        if network is not None:
            app_line = (f"the pod's application (examples/reload-listener.py on {pod_ip}:8099, "
                        "in a network\n          namespace of its own) prints each reload the "
                        "daemon asks of it")
        else:
            app_line = (f"none ({why_not}): the pod has no address of its own, and the daemon\n"
                        "          refuses its reload call (`kubectl get events` says why); run "
                        "as root for the\n          application in a network namespace of its own")
        print(f"""
volumemanager, cluster mode, against the test API server at {url} (Ctrl-C stops both)
  first   export KUBECONFIG={kubeconfig}
  pods    {k} get pods -o wide      (the demo's pod, bound to node {args.node_name})
  change  {k} patch configmap app-config --type merge -p '{{"data":{{"log-level":"debug"}}}}'
          {k} label pod web tier=backend --overwrite   (the downwardAPI volume follows)
  watch   watch -n0.2 cat {volumes}/kubernetes.io~configmap/app-config/log/level.txt
          {volumes}/kubernetes.io~downward-api/podinfo/labels
  ask     curl {healthz}/metrics; curl {debug}/debug/state
  app     {app_line}
""", flush=True)
        app = None
        if network is not None:
            app = subprocess.Popen([*network.pods.enter(pod_ip), sys.executable,
                                    str(HERE / "reload-listener.py"), "--address", pod_ip,
                                    "--volume",
                                    str(volumes / "kubernetes.io~configmap" / "app-config")])
        daemon = subprocess.Popen([
            args.daemon, "--kubeconfig", server.kubeconfig, "--node-name", args.node_name,
            "--root-dir", str(root), "--state-dir", str(state), "--volume-ownership", "self",
            # In the demo's network the same ports as the relays' (nothing else listens there).
            "--healthz-bind-address",
            f"127.0.0.1:{relays['healthz'].port}" if relays else healthz,
            "--debug-bind-address", f"127.0.0.1:{relays['debug'].port}" if relays else debug])
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
            if app is not None:
                app.terminate()
                app.wait()
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
