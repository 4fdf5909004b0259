"""Tests of the OCI image `make image` builds: unpacked layer by layer as a container runtime
would, its entrypoint run in a chroot of the root filesystem (no container can be started here).

VM_IMAGE_ARCHIVE names the archive (`make image-test` and ctest set it); the version it must carry
is the file VERSION's.
"""
import json
import os
import pathlib
import shutil
import subprocess
import tarfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
VERSION = (REPO / "VERSION").read_text().strip()
ARCHIVE = pathlib.Path(os.environ.get("VM_IMAGE_ARCHIVE",
                                      REPO / "build" / "image" / f"volumemanager-{VERSION}.oci.tar"))


def blob(oci, digest):
    algorithm, hexdigest = digest.split(":")
    return oci / "blobs" / algorithm / hexdigest


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """(config, rootfs) of the archive's one image."""
    if not ARCHIVE.exists():
        pytest.fail(f"{ARCHIVE} is missing: run `make image` first")
    tmp = tmp_path_factory.mktemp("image")
    oci = tmp / "oci"
    with tarfile.open(ARCHIVE) as t:
        t.extractall(oci)
    assert json.loads((oci / "oci-layout").read_text())["imageLayoutVersion"] == "1.0.0"
    (entry,) = json.loads((oci / "index.json").read_text())["manifests"]
    manifest = json.loads(blob(oci, entry["digest"]).read_text())
    config = json.loads(blob(oci, manifest["config"]["digest"]).read_text())
    rootfs = tmp / "rootfs"
    rootfs.mkdir()
    for layer in manifest["layers"]:
        # tar+gzip or plain tar; no whiteouts in an image built from scratch in one layer.
        with tarfile.open(blob(oci, layer["digest"])) as t:
            t.extractall(rootfs, numeric_owner=True)
    return config, rootfs


def in_chroot(rootfs, *argv):
    chroot = shutil.which("chroot", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    return subprocess.run([chroot, str(rootfs), *argv], capture_output=True, text=True,
                          env={"PATH": "/usr/bin"}, timeout=60)


def test_entrypoint_runs_in_a_chroot_of_the_image(image):
    config, rootfs = image
    entrypoint = config["config"]["Entrypoint"]
    assert entrypoint == ["/usr/bin/volumemanager"]
    assert config["os"] == "linux"
    assert config["config"]["Labels"]["org.opencontainers.image.version"] == VERSION
    assert config["config"]["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0"
    r = in_chroot(rootfs, *entrypoint, "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"volumemanager {VERSION}\n"
    # Every library the whole flag parser and cluster-mode set-up need is in the image: the
    # chart's args parse there too.
    r = in_chroot(rootfs, *entrypoint, "--validate-only", "--in-cluster", "--node-name=n1")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["volumemanager"]["inCluster"] is True
    # libnghttp2 and GnuTLS, which the binary opens only when it speaks to an API server (not in
    # its ldd closure), are in the image: preflight gets as far as connecting (nothing listens
    # there; the transport loads both before it connects).
    # libcurl (opened for HTTP/1.1 only) is there too, with what it links.
    (rootfs / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
        "    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n"
        "  context: {cluster: c, user: u}\ncurrent-context: x\n")
    r = in_chroot(rootfs, *entrypoint, "preflight", "--kubeconfig", "/kubeconfig",
                  "--node-name", "n1")
    assert "server reachable" in r.stdout and "cannot connect to 127.0.0.1:1" in r.stdout, \
        r.stdout + r.stderr
    for soname in ("libnghttp2.so.14", "libgnutls.so.30", "libcurl.so.4"):
        assert list(rootfs.glob("usr/lib/*/" + soname)), soname + " missing from the image"


def test_only_the_daemon_and_its_packages_with_their_licences(image):
    _, rootfs = image
    listed = (rootfs / "usr/share/doc/volumemanager/packages.txt").read_text().splitlines()
    packages = [line.split()[0] for line in listed[3:]]
    assert "libc6" in packages and "libcurl4" in packages
    for p in packages:
        assert (rootfs / "usr/share/doc" / p / "copyright").is_file(), f"{p}: no licence notes"
    # The packages whose libraries are linked into the binary (its .vm_static section) are listed
    # too, their licence notes with them (checked above).
    linked = subprocess.run([str(REPO / "image" / "linked_packages.sh"),
                             str(rootfs / "usr/bin/volumemanager")],
                            capture_output=True, text=True, check=True).stdout.split()
    for p in linked:
        assert p in packages, f"{p} is linked in but not listed"
    # The daemon's own licence and notice, as the Apache License asks of a redistribution.
    for name in ("LICENSE", "NOTICE"):
        assert (rootfs / "usr/share/doc/volumemanager" / name).read_bytes() == \
            (REPO / name).read_bytes(), name
    # Nothing to run but the daemon: no shell, no package manager.
    for absent in ("bin/sh", "usr/bin/sh", "usr/bin/bash", "usr/bin/dpkg", "usr/bin/apt-get"):
        assert not (rootfs / absent).exists(), absent
    binary = rootfs / "usr/bin/volumemanager"
    assert binary.stat().st_mode & 0o777 == 0o755
    # Debug info stripped: no .debug_info section.
    sections = subprocess.run(["readelf", "-S", "-W", str(binary)], capture_output=True,
                              text=True, check=True).stdout
    assert ".debug_info" not in sections
