"""The real-Kubernetes tier's last test (ctest `realkube` runs it after the others): the tier
leaves the machine as it found it. Its servers listened on 127.0.0.1 only and are gone, nothing it
mounted stays mounted, none of its processes runs on. As root the tier runs in namespaces of its
own (tests/realkube/isolated.py), so what this test sees is the tier's alone; as another user the
tier runs alone on the machine (RUN_SERIAL)."""
import pytest

from machine import differences, machine_state

pytestmark = pytest.mark.real_server_only("checks what the real-server tier left behind")

TIER_PROGRAMS = {"kube-apiserver", "etcd", "volumemanager", "nghttpx"}


def test_the_machine_is_as_before_the_tier(machine_before):
    changed = differences(machine_before, machine_state(), TIER_PROGRAMS)
    assert changed == [], "\n".join(changed)
