"""tests/skip_report.py against ctest logs of its own making: what it counts, what fails CI."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "skip_report.py"
sys.path.insert(0, str(SCRIPT.parent))
import skip_report  # noqa: E402


def record(n, name, output):
    return (f"{n}/9 Test: {name}\nCommand: \"/x/t\"\nOutput:\n{'-' * 58}\n{output}"
            f"<end of output>\nTest time =   0.01 sec\n{'-' * 58}\nTest Passed.\n\n")


GTEST_ROOT_SKIP = """Running main() from gtest_main.cc
[ RUN      ] VolumeSetupTest.Mounts
../../volumemanager/volume_setup_test.cc:40: Skipped
needs root: mounts
  a tmpfs

[  SKIPPED ] VolumeSetupTest.Mounts (0 ms)
"""
GTEST_PASS = "[ RUN      ] Other.Passes\n[       OK ] Other.Passes (0 ms)\n"
GTEST_BARE_SKIP = ("[ RUN      ] Bare.Skip\nx.cc:1: Skipped\n\n[  SKIPPED ] Bare.Skip (0 ms)\n")
PYTEST_SKIP = "VM-SKIP tests/e2e/test_x.py::test_y[a]: no kubectl here\n"


def write_log(tmp_path, records):
    d = tmp_path / "Testing" / "Temporary"
    d.mkdir(parents=True)
    (d / "LastTest.log").write_text("Start testing\n" + "".join(records))
    (tmp_path / "out.txt").write_text("noise\n100% tests passed, 0 tests failed out of 3\n")


def run(tmp_path, ci, status=0):
    env = dict(os.environ, CI="true" if ci else "false")
    return subprocess.run(
        ["/usr/bin/python3", str(SCRIPT), "--build", str(tmp_path), "--ctest-output",
         str(tmp_path / "out.txt"), "--ctest-status", str(status)],
        env=env, capture_output=True, text=True, check=False)


def test_counts_each_skip_by_name_and_ends_with_ctests_summary(tmp_path):
    write_log(tmp_path, [record(1, "VolumeSetupTest.Mounts", GTEST_ROOT_SKIP),
                         record(2, "Other.Passes", GTEST_PASS),
                         record(3, "e2e_x", PYTEST_SKIP)])
    r = run(tmp_path, ci=False)
    assert r.returncode == 0, r.stdout
    lines = r.stdout.splitlines()
    assert lines[0] == "Skipped: 2 tests (1 needing root)"
    assert "  VolumeSetupTest.Mounts: needs root: mounts a tmpfs" in lines
    assert "  e2e_x: tests/e2e/test_x.py::test_y[a]: no kubectl here" in lines
    assert lines[-1] == "100% tests passed, 0 tests failed out of 3"


def test_under_ci_a_root_skip_or_a_skip_without_reason_fails(tmp_path):
    write_log(tmp_path, [record(1, "VolumeSetupTest.Mounts", GTEST_ROOT_SKIP),
                         record(2, "Bare.Skip", GTEST_BARE_SKIP)])
    r = run(tmp_path, ci=True)
    assert r.returncode == 1
    assert "CI: needs root but skipped: VolumeSetupTest.Mounts" in r.stdout
    assert "CI: skipped without saying why: Bare.Skip" in r.stdout
    assert run(tmp_path, ci=False).returncode == 0


def test_ctests_own_failure_is_kept(tmp_path):
    write_log(tmp_path, [record(1, "Other.Passes", GTEST_PASS)])
    assert run(tmp_path, ci=True, status=8).returncode == 8
    assert run(tmp_path, ci=True).returncode == 0


def test_a_skip_needs_its_own_case_to_end_it():
    # A "Skipped" line of one case is not carried into the next case's SKIPPED line.
    text = ("[ RUN      ] A.One\nx.cc:1: Skipped\nwhy\n[  FAILED  ] A.One (0 ms)\n"
            "[ RUN      ] A.Two\n[  SKIPPED ] A.Two (0 ms)\n")
    assert skip_report.gtest_skips(text) == []


@pytest.mark.parametrize("cases", [20000])
def test_one_pass_over_a_large_output(cases):
    # Tens of thousands of cases in one output (a whole binary's run): the skip among them is
    # found. (The parser reads line by line; the backtracking pattern it replaced took minutes on
    # make test's 1.5 MB log.)
    text = GTEST_PASS * cases + GTEST_ROOT_SKIP
    assert skip_report.gtest_skips(text) == [("VolumeSetupTest.Mounts",
                                              "needs root: mounts a tmpfs")]
