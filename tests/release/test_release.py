"""The release's agreement on one version, and `make release`'s refusal of a dirty tree.

What `make test` built is checked as `make release` checks its release dir
(release/check_release.py): the binary's --version, the image archive's tag and labels, and the
chart, packaged here with the chart's Helm, against the file VERSION. VOLUMEMANAGER_BIN,
VM_IMAGE_ARCHIVE and VM_CHART_TOOLS name them (ctest sets all three).
"""
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "release"))
import check_release  # noqa: E402  (release/check_release.py)

VERSION = check_release.read_version(REPO / "VERSION")
BINARY = pathlib.Path(os.environ.get("VOLUMEMANAGER_BIN", REPO / "build" / "bin" / "volumemanager"))
ARCHIVE = pathlib.Path(os.environ.get("VM_IMAGE_ARCHIVE",
                                      REPO / "build" / "image" / f"volumemanager-{VERSION}.oci.tar"))
HELM = pathlib.Path(os.environ.get("VM_CHART_TOOLS", REPO / "build" / "chart-tools")) / "bin" / "helm"
CLEAN_TREE = REPO / "release" / "check_clean_tree.sh"


def package_chart(destination, *args):
    if not HELM.exists():
        pytest.fail(f"{HELM} is missing: run `make chart-tools` first")
    subprocess.run([str(HELM), "package", str(REPO / "helm" / "volumemanager"),
                    "--destination", str(destination), *args],
                   check=True, capture_output=True, text=True)
    (package,) = destination.glob("volumemanager-*.tgz")
    return package


def test_binary_image_and_chart_carry_the_version_of_the_file_VERSION(tmp_path):
    for artefact in (BINARY, ARCHIVE):
        if not artefact.exists():
            pytest.fail(f"{artefact} is missing: run `make build image` first")
    chart = package_chart(tmp_path)
    lines, problems = check_release.check(VERSION, binary=BINARY, image=ARCHIVE, chart=chart,
                                          changelog=REPO / "CHANGELOG.md",
                                          security=REPO / "SECURITY.md")
    assert problems == []
    # Each was looked at: the binary, the image's tag and 2 labels, the chart's 3 values, the
    # changelog's section and the supported line.
    assert len(lines) == 9, lines
    assert chart.name == f"volumemanager-{VERSION}.tgz"


def test_a_disagreement_is_named(tmp_path):
    # The check must be able to fail: a chart packaged with another version, a binary printing
    # another, each named with what it says and what VERSION says.
    chart = package_chart(tmp_path, "--version", "9.9.9", "--app-version", "9.9.8")
    fake = tmp_path / "volumemanager"
    fake.write_text("#!/bin/sh\necho volumemanager 0.0.1\n")
    fake.chmod(0o755)
    changelog = tmp_path / "CHANGELOG.md"
    changelog.write_text("# Changelog\n\n## 0.0.1\n")
    security = tmp_path / "SECURITY.md"
    security.write_text("| 0.0.x | yes |\n")
    r = subprocess.run([sys.executable, str(REPO / "release" / "check_release.py"),
                        "--version-file", str(REPO / "VERSION"), "--binary", str(fake),
                        "--chart", str(chart), "--changelog", str(changelog),
                        "--security", str(security)], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"release: {fake} --version is '0.0.1', the file VERSION says '{VERSION}'" in r.stderr
    assert f"{chart}: version is '9.9.9'" in r.stderr
    assert f"{chart}: appVersion is '9.9.8'" in r.stderr
    assert f"{chart}: default image tag is '9.9.8'" in r.stderr
    assert f"{changelog} has no section '## {VERSION}'" in r.stderr
    assert f"{security} does not list {VERSION}'s release line as supported" in r.stderr


def test_the_chart_in_the_tree_says_the_version():
    # helm lint needs literal values in Chart.yaml: they must be VERSION's (a release packages
    # the chart as it is).
    import yaml
    meta = yaml.safe_load((REPO / "helm" / "volumemanager" / "Chart.yaml").read_text())
    assert (meta["version"], meta["appVersion"]) == (VERSION, VERSION), \
        "helm/volumemanager/Chart.yaml disagrees with VERSION: set version and appVersion to it"


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def clean_tree(repo):
    return subprocess.run([str(CLEAN_TREE), str(repo)], capture_output=True, text=True)


def test_make_release_refuses_a_tree_that_is_not_clean(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    r = clean_tree(repo)
    assert r.returncode == 1 and "is not a git checkout with a commit" in r.stderr
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("/build/\n")
    (repo / "VERSION").write_text("1.0.0\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    (repo / "build").mkdir()
    (repo / "build" / "artefact").write_text("ignored")
    assert clean_tree(repo).returncode == 0, clean_tree(repo).stderr
    (repo / "VERSION").write_text("1.0.1\n")
    r = clean_tree(repo)
    assert r.returncode == 1
    assert "make release: refused, the git tree is not clean (1 path(s)" in r.stderr
    assert " M VERSION" in r.stderr
    git(repo, "checkout", "VERSION")
    (repo / "notes.txt").write_text("untracked")
    r = clean_tree(repo)
    assert r.returncode == 1 and "?? notes.txt" in r.stderr
