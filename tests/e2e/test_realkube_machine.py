"""The real-Kubernetes tier's last test (ctest `realkube` runs it after the others, alone on the
machine: RUN_SERIAL): the tier leaves the machine as it found it. Its servers listened on
127.0.0.1 only and are gone, nothing it mounted stays mounted, none of its processes runs on."""
import pytest

from conftest import machine_state

pytestmark = pytest.mark.real_server_only("checks what the real-server tier left behind")

TIER_PROGRAMS = {"kube-apiserver", "etcd", "volumemanager", "nghttpx"}


def test_the_machine_is_as_before_the_tier(machine_before):
    after = machine_state()
    assert after["listening"] - machine_before["listening"] == set(), \
        "sockets left listening (/proc/net: protocol, local address:port in hex)"
    assert after["mounts"] - machine_before["mounts"] == set(), "mounts left behind"
    assert machine_before["mounts"] - after["mounts"] == set(), "mounts removed"
    left = {pid: comm for pid, comm in after["processes"].items()
            if pid not in machine_before["processes"] and comm in TIER_PROGRAMS}
    assert left == {}, f"processes of the tier still running: {left}"
