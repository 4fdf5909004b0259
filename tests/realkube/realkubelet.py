"""The real kubelet (v1.20.2, built by build_kube.sh) on a node of the test's own, beside the
real kube-apiserver, with the fake container runtime (fakecri.py) so that it believes its pods
run: its own volume manager then sets up, refreshes and tears down their volumes, and binds
their subPath mounts, exactly as on a node.

    with RealKubelet(tmp / "kubelet", server, cri, node_ip) as kubelet:
        uid = kubelet.run_pod(pod)              # created through the API, Running with an IP
        kubelet.wait_log(f'MountVolume.SetUp succeeded for volume "cfg"')

It must run inside node_namespace.py's namespaces (it refuses elsewhere): the 1.20 kubelet changes
kernel settings, and listens, mounts and writes /var/log where it runs. Its settings are those
that get 1.20 past a machine without systemd-managed cgroups or swap policy (README.md of this
folder): no QoS cgroups, no node allocatable enforcement, no iptables chains, no read-only port,
no anonymous requests, the Watch strategy and --sync-frequency as given. It registers its own
Node (a pre-created Node without status makes 1.20 panic) under its node credentials: a client
certificate for system:node:<name> in system:nodes, signed by the server's client CA.

Each pod sandbox that is not on the host network gets a network namespace of its own from
netns.PodNetworks (a veth pair to the node's); the fake runtime reports its address, and the
kubelet writes it to `status.podIP`.
"""
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import realkube
from netns import PodNetworks, tool

KUBELET = realkube.KUBE_DIR / "bin" / "kubelet"


def available():
    """None when the kubelet and the API server are built, else why not."""
    if not os.access(KUBELET, os.X_OK):
        return f"{KUBELET} is missing: `make real-kube` builds it (tests/realkube/build_kube.sh)"
    return realkube.available()


def in_node_namespace():
    """True inside node_namespace.py's namespaces (never in the machine's own)."""
    return os.environ.get("VM_NODE_NAMESPACE") == str(os.stat("/proc/self/ns/net").st_ino)


def kubelet_configuration(workdir, ca_file, sync_frequency, healthz_port):
    """A KubeletConfiguration (v1beta1) for a node with no systemd cgroups, swap policy or
    container network of its own, that evicts nothing for this machine's disk."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "syncFrequency": sync_frequency,
        "configMapAndSecretChangeDetectionStrategy": "Watch",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": ca_file}},
        "authorization": {"mode": "AlwaysAllow"},
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": healthz_port,
        "cgroupsPerQOS": False, "enforceNodeAllocatable": [], "cgroupDriver": "cgroupfs",
        "failSwapOn": False, "makeIPTablesUtilChains": False,
        "volumePluginDir": str(Path(workdir) / "volume-plugins"),
        # No eviction for this machine's disk or memory, no image garbage collection.
        "evictionHard": {"memory.available": "0%", "nodefs.available": "0%",
                         "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "resolvConf": "", "hairpinMode": "none",
        "nodeStatusUpdateFrequency": "10s", "fileCheckFrequency": "1h",
        "serializeImagePulls": False,
    }


class RealKubelet:
    __test__ = False

    def __init__(self, workdir, server, cri_socket, node_ip, node_name,
                 sync_frequency="1m", verbosity=4):
        missing = available()
        if missing:
            raise RuntimeError(missing)
        if not in_node_namespace():
            raise RuntimeError("the real kubelet runs only inside node_namespace.py's namespaces "
                               "(it changes kernel settings and mounts where it runs)")
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.server = server
        self.cri_socket = cri_socket
        self.node_ip = node_ip
        self.node_name = node_name
        self.user = f"system:node:{node_name}"
        self.sync_frequency = sync_frequency
        self.verbosity = verbosity
        self.root = self.dir / "root"
        self.proc = None
        self.log_path = self.dir / "kubelet.log"
        self.kubeconfig = self.dir / "kubelet.kubeconfig"
        self.credentials = self.dir / "kubelet-client.pem"

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def write_credentials(self):
        self.server.admin("POST", "issue-client-cert", {
            "path": str(self.credentials), "user": self.user, "groups": ["system:nodes"]})
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "node",
            "clusters": [{"name": "real", "cluster": {"server": self.server.url,
                                                      "certificate-authority":
                                                          self.server.ca_file}}],
            "users": [{"name": "node", "user": {"client-certificate": str(self.credentials),
                                                "client-key": str(self.credentials)}}],
            "contexts": [{"name": "node", "context": {"cluster": "real", "user": "node"}}]}))

    def start(self, wait=True):
        self.write_credentials()
        config = self.dir / "kubelet-config.json"
        config.write_text(json.dumps(kubelet_configuration(
            self.dir, self.server.ca_file, self.sync_frequency, realkube.free_port())))
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(KUBELET), f"--config={config}", f"--kubeconfig={self.kubeconfig}",
             f"--root-dir={self.root}", f"--cert-dir={self.dir / 'pki'}",
             f"--seccomp-profile-root={self.dir / 'seccomp'}",
             "--container-runtime=remote",
             f"--container-runtime-endpoint=unix://{self.cri_socket}",
             f"--node-ip={self.node_ip}", f"--hostname-override={self.node_name}",
             f"--address={self.node_ip}", "--port=10250",
             f"--v={self.verbosity}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_node_ready()

    def wait_node_ready(self, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the kubelet exited:\n" + self.text()[-6000:])
            status, node = self.server.request("GET", f"/api/v1/nodes/{self.node_name}")
            if status == 200 and any(c["type"] == "Ready" and c["status"] == "True"
                                     for c in node.get("status", {}).get("conditions", [])):
                return node
            time.sleep(0.2)
        raise RuntimeError(f"node {self.node_name} not Ready within {timeout} s:\n" +
                           self.text()[-6000:])

    def stop(self):
        """SIGTERM (the kubelet leaves pods' mounts as they are, as on a node), then the mounts
        under its root dir are undone, deepest first."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self.log.close()
        umount = tool("umount")
        for target in sorted(self.mounts(), key=len, reverse=True):
            subprocess.run([umount, "-l", target], check=False)

    def mounts(self):
        """Mount points under the kubelet's root dir."""
        prefix = str(self.root) + "/"
        out = []
        with open("/proc/self/mounts") as f:
            for line in f:
                target = line.split()[1].replace("\\040", " ")
                if target.startswith(prefix):
                    out.append(target)
        return out

    # --- its log --------------------------------------------------------------------------
    def text(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def offset(self):
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def lines(self, since=0):
        """Its lines, as klog wrote them, from byte offset `since`."""
        with open(self.log_path, "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace").splitlines()

    def wait_log(self, pattern, since=0, timeout=60):
        """Waits until a line from `since` matches the regular expression `pattern`; returns the
        byte offset just past that line."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                data = f.read()
            position = since
            for line in data.splitlines(keepends=True):
                position += len(line)
                if line.endswith(b"\n") and regex.search(line.decode(errors="replace")):
                    return position
            if self.proc is None or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no kubelet log line matches {pattern!r} within {timeout} s; "
                             f"its last lines:\n" + "\n".join(self.lines(since)[-40:]))

    def errors(self, since, *about):
        """The kubelet's error lines (klog severity E) from `since` that mention any of `about`."""
        return [line for line in self.lines(since)
                if line.startswith("E") and any(a in line for a in about)]

    def wait_quiet(self, about, quiet=2.0, timeout=30):
        """Waits until the kubelet has logged nothing mentioning `about` (a pod UID) for `quiet`
        seconds: the syncs that follow a pod's start (its containers seen started, its status
        posted) are over, and the next comes at a pod update or at --sync-frequency."""
        needle = about.encode()
        deadline = time.monotonic() + timeout
        offset, last_seen = 0, time.monotonic()
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                data = f.read()
            complete = data[:data.rfind(b"\n") + 1]
            offset += len(complete)
            if needle in complete:
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen >= quiet:
                return
            time.sleep(0.1)
        raise AssertionError(f"the kubelet kept logging about {about} for {timeout} s")

    def versions_written(self):
        """The names of the version directories the kubelet's atomic writer says it wrote (at
        --v=4 it logs each one's path before it swaps `..data` to it); each name carries a random
        suffix of the writer's."""
        found = re.findall(r"performed write of new data to ts data directory: (\S+)",
                           self.text())
        return {Path(p).name for p in found}

    # --- pods -----------------------------------------------------------------------------
    def pod_dir(self, uid):
        return self.root / "pods" / uid

    def volume_dir(self, uid, plugin, volume):
        return self.pod_dir(uid) / "volumes" / plugin / volume


def payload(n, keys=("a.conf", "b.conf", "c.conf")):
    """Version n of a ConfigMap: every key names the version and carries 4 KiB that depend on it
    and on the key, so a reader can tell a torn file and a mix of versions apart."""
    return {k: f"version={n}\n" + (f"{k}:{n};" * 600)[:4096] + "\n" for k in keys}


def version_of(key, text):
    """The version a file's bytes are, or None when they are no whole version (torn)."""
    if not text.startswith("version="):
        return None
    try:
        n = int(text.split("\n", 1)[0][len("version="):])
    except ValueError:
        return None
    return n if payload(n, (key,))[key] == text else None


class VolumeReader:
    """Reads the volume as an application that opens `..data` once per read does, every ms
    or so: each read is one version dir, all keys. Records each change of the version read, in
    order and when (time.monotonic()), and every torn file or mix of versions within one read."""

    def __init__(self, volume_dir, keys):
        self.dir = Path(volume_dir)
        self.keys = keys
        self.changes = []  # (time, version) at each change of the version read
        self.reads = 0
        self.torn = []
        self.mixed = []
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    @property
    def seen(self):
        return [n for _, n in self.changes]

    def went_back(self):
        """Each time an older version followed a newer one: (when, newest seen before, the older
        version, seconds until a version at least as new was read again or None)."""
        out = []
        newest = None
        for i, (t, n) in enumerate(self.changes):
            if newest is not None and n < newest:
                back = next((t2 - t for t2, n2 in self.changes[i + 1:] if n2 >= newest), None)
                out.append((t, newest, n, back))
            newest = n if newest is None else max(newest, n)
        return out

    def first_seen(self, version):
        return next((t for t, n in self.changes if n == version), None)

    def _read_once(self):
        try:
            target = os.readlink(self.dir / "..data")
            fd = os.open(self.dir / target, os.O_RDONLY | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError):
            return None  # swapped and removed between the two steps: read again
        try:
            texts = {}
            for key in self.keys:
                try:
                    f = os.open(key, os.O_RDONLY, dir_fd=fd)
                except FileNotFoundError:
                    return None  # the version dir was being removed
                try:
                    texts[key] = os.read(f, 1 << 20).decode(errors="replace")
                finally:
                    os.close(f)
        finally:
            os.close(fd)
        return texts

    def _run(self):
        while not self.stopping:
            texts = self._read_once()
            if texts is not None:
                self._record(texts)
            time.sleep(0.001)

    def _record(self, texts):
        self.reads += 1
        versions = {k: version_of(k, t) for k, t in texts.items()}
        if None in versions.values():
            self.torn.append({k: t[:40] for k, t in texts.items()})
            return
        distinct = set(versions.values())
        if len(distinct) > 1:
            self.mixed.append(versions)
            return
        (n,) = distinct
        if not self.changes or self.changes[-1][1] != n:
            self.changes.append((time.monotonic(), n))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping = True
        self.thread.join()


IMAGE = "registry.invalid/volumemanager-tests/app:1"


def wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


class KubeletNode:
    """A node for the tests and the benchmark: the real API server (tokens as given), the fake
    runtime, the real kubelet registering `node_name` at the node namespace's address, pod
    networks; and what a test does through the API to the node's pods."""

    def __init__(self, workdir, node_name, tokens=None, sync_frequency="1m"):
        missing = available()
        if missing:
            raise RuntimeError(missing)
        if not in_node_namespace():
            raise RuntimeError("the real kubelet runs only inside node_namespace.py's namespaces")
        from fakecri import FakeCri
        self.dir = Path(workdir)
        self.node_name = node_name
        self.node_ip = os.environ["VM_NODE_IP"]
        self.sync_frequency = sync_frequency
        self.server = realkube.RealApiServer(self.dir / "apiserver", tokens=tokens)
        self.networks = PodNetworks()
        runtime = self.dir / "runtime"
        (runtime / "image-fs").mkdir(parents=True, exist_ok=True)
        self.cri = FakeCri(str(realkube.KUBE_DIR / "cri"), str(runtime / "run" / "cri.sock"),
                           str(runtime / "image-fs"), sandbox_network=self.networks.set_up,
                           sandbox_teardown=self.networks.tear_down)
        self.kubelet = None

    def __enter__(self):
        self.server.__enter__()
        try:
            self.cri.start()
            self.kubelet = RealKubelet(self.dir / "kubelet", self.server, self.cri.socket_path,
                                       self.node_ip, self.node_name, self.sync_frequency)
            self.kubelet.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self.kubelet is not None and self.kubelet.proc is not None:
                self.delete_all_pods()
        finally:
            if self.kubelet is not None:
                self.kubelet.stop()
            self.cri.stop()
            self.networks.close()
            self.server.__exit__(*exc)

    # --- objects ----------------------------------------------------------------------------
    def api(self, method, path, body=None, expect=(200, 201)):
        status, data = self.server.request(method, path, body)
        assert status in expect, f"{method} {path}: {status} {data}"
        return data

    def _put(self, collection, obj):
        name = obj["metadata"]["name"]
        status, current = self.server.request("GET", f"{collection}/{name}")
        if status == 404:
            return self.api("POST", collection, obj)
        obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self.api("PUT", f"{collection}/{name}", obj)

    def put_configmap(self, name, data):
        return self._put("/api/v1/namespaces/default/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": data})

    def put_secret(self, name, string_data):
        return self._put("/api/v1/namespaces/default/secrets", {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "default"}, "stringData": string_data})

    # --- pods ---------------------------------------------------------------------------------
    def run_pod(self, name, volumes, mounts, annotations=None, timeout=60):
        """Creates the pod bound to this node (one container mounting `mounts`) and waits until
        the kubelet reports it Running with its IP; returns the pod."""
        self.api("POST", "/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
            "spec": {"nodeName": self.node_name, "dnsPolicy": "Default",
                     "enableServiceLinks": False, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": IMAGE,
                                     "imagePullPolicy": "IfNotPresent",
                                     "volumeMounts": mounts}],
                     "volumes": volumes}})

        def running():
            got = self.api("GET", f"/api/v1/namespaces/default/pods/{name}")
            status = got.get("status", {})
            return got if status.get("phase") == "Running" and status.get("podIP") else None
        return wait(running, timeout, f"pod {name} Running with an IP")

    def touch_pod(self, name, n):
        """A pod update (a label): the kubelet syncs the pod, which rewrites its volumes from
        the kubelet's object cache."""
        status, _, data = self.server.raw_request(
            "PATCH", f"/api/v1/namespaces/default/pods/{name}",
            json.dumps({"metadata": {"labels": {"touched": str(n)}}}).encode(),
            headers={"Content-Type": "application/merge-patch+json"})
        assert status == 200, data[:300]

    def delete_pod(self, name):
        self.api("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0",
                 expect=(200, 202, 404))

    def delete_all_pods(self, timeout=60):
        """Deletes every pod and waits for the kubelet's teardown of their volumes."""
        status, pods = self.server.request("GET", "/api/v1/namespaces/default/pods")
        for pod in pods.get("items", []) if status == 200 else []:
            self.delete_pod(pod["metadata"]["name"])
        wait(lambda: not any((self.kubelet.root / "pods").glob("*/volumes/*/*")), timeout,
             "the kubelet's teardown of every volume")

    def events(self, name):
        items = self.api("GET", "/api/v1/namespaces/default/events")["items"]
        return [e for e in items if e["involvedObject"].get("name") == name]

    def mounted(self, uid, volume, timeout=60):
        """Waits for the kubelet's own line saying it set `volume` up for pod `uid`; returns
        the log offset past it."""
        return self.kubelet.wait_log(
            rf'MountVolume\.SetUp succeeded for volume "{volume}" .*UID: "{uid}"',
            timeout=timeout)
