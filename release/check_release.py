#!/usr/bin/python3
"""Checks that a release's artefacts carry the one version, the file VERSION's.

The binary's `--version`, the image archive's tag and labels (version, licence, and the revision
when one is given), the chart package's `version`, `appVersion` and default image tag, and a
section for the version in CHANGELOG.md and a supported line in SECURITY.md.
`make release` runs it on the release dir (release/make_release.sh); the ctest `release`
(tests/release) on what `make test` built, so CI checks the same agreement.

Usage: check_release.py --version-file VERSION [--binary B] [--image ARCHIVE] [--chart TGZ]
                        [--revision COMMIT] [--changelog CHANGELOG.md] [--security SECURITY.md]
Prints one line per artefact checked; exits 1 when any disagrees, naming it, what it says and
what VERSION says.
"""
import argparse
import io
import json
import pathlib
import re
import subprocess
import sys
import tarfile

import yaml

LICENSE = "Apache-2.0"


def read_version(path):
    """The version in the file VERSION: one MAJOR.MINOR.PATCH line."""
    text = pathlib.Path(path).read_text()
    version = text.strip()
    if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version) or text != version + "\n":
        raise ValueError(f"{path}: {text!r} is not one MAJOR.MINOR.PATCH line")
    return version


def binary_version(binary):
    """What `BINARY --version` prints after "volumemanager "."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                         timeout=30).stdout
    m = re.fullmatch(r"volumemanager (\S+)\n", out)
    return m.group(1) if m else out


def image_facts(archive):
    """(tag, labels) of the OCI archive's one image: the tag from its ref.name annotation."""
    with tarfile.open(archive) as t:
        def blob(digest):
            algorithm, hexdigest = digest.split(":")
            return json.load(t.extractfile(f"blobs/{algorithm}/{hexdigest}"))
        (entry,) = json.load(t.extractfile("index.json"))["manifests"]
        ref = entry.get("annotations", {}).get("org.opencontainers.image.ref.name", "")
        config = blob(blob(entry["digest"])["config"]["digest"])
    return ref.rpartition(":")[2], config.get("config", {}).get("Labels") or {}


def chart_facts(package):
    """(Chart.yaml, values.yaml) of a chart package made by `helm package`."""
    with tarfile.open(package) as t:
        def read(name):
            member = next(m for m in t.getmembers() if m.name.endswith("/" + name)
                          and m.name.count("/") == 1)
            return yaml.safe_load(io.TextIOWrapper(t.extractfile(member), encoding="utf-8"))
        return read("Chart.yaml"), read("values.yaml")


def changelog_section(changelog, version):
    """The heading of CHANGELOG.md's section for `version` ("## 0.2.0 (date)"), or None."""
    for line in pathlib.Path(changelog).read_text().splitlines():
        if re.fullmatch(rf"## {re.escape(version)}( .*)?", line):
            return line
    return None


def security_line(security, version):
    """SECURITY.md's supported-versions row for `version`'s release line, or None."""
    major, minor, _ = version.split(".")
    line = f"{major}.{minor}.x" if major == "0" else f"{major}.x"
    for row in pathlib.Path(security).read_text().splitlines():
        if re.fullmatch(rf"\| {re.escape(line)} \| yes \|", row):
            return row
    return None


def check(version, binary=None, image=None, chart=None, revision=None, changelog=None,
          security=None):
    """(lines, problems): a line per artefact checked, and what disagrees with `version`."""
    lines, problems = [], []

    def compare(what, said, wanted=version):
        if said == wanted:
            lines.append(f"ok {what}: {said}")
        else:
            problems.append(f"{what} is {said!r}, the file VERSION says {wanted!r}"
                            if wanted == version else f"{what} is {said!r}, expected {wanted!r}")

    if binary is not None:
        compare(f"{binary} --version", binary_version(binary))
    if image is not None:
        tag, labels = image_facts(image)
        compare(f"{image}: tag", tag)
        compare(f"{image}: label org.opencontainers.image.version",
                labels.get("org.opencontainers.image.version"))
        compare(f"{image}: label org.opencontainers.image.licenses",
                labels.get("org.opencontainers.image.licenses"), LICENSE)
        if revision is not None:
            compare(f"{image}: label org.opencontainers.image.revision",
                    labels.get("org.opencontainers.image.revision"), revision)
    if chart is not None:
        if not pathlib.Path(chart).is_file():
            problems.append(f"no chart package {chart}")
        else:
            meta, values = chart_facts(chart)
            compare(f"{chart}: version", meta.get("version"))
            compare(f"{chart}: appVersion", meta.get("appVersion"))
            # An empty image.tag means appVersion: the image the chart installs is this release's.
            compare(f"{chart}: default image tag", values["image"]["tag"] or meta.get("appVersion"))
    def found(document, line, missing):
        if line:
            lines.append(f"ok {document}: {line}")
        else:
            problems.append(f"{document} {missing}")

    if changelog is not None:
        found(changelog, changelog_section(changelog, version),
              f"has no section '## {version}' saying what it changes")
    if security is not None:
        found(security, security_line(security, version),
              f"does not list {version}'s release line as supported")
    return lines, problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version-file", required=True)
    parser.add_argument("--binary")
    parser.add_argument("--image")
    parser.add_argument("--chart")
    parser.add_argument("--revision")
    parser.add_argument("--changelog")
    parser.add_argument("--security")
    args = parser.parse_args(argv)
    try:
        version = read_version(args.version_file)
    except ValueError as e:
        print(f"release: {e}", file=sys.stderr)
        return 1
    lines, problems = check(version, args.binary, args.image, args.chart, args.revision,
                            args.changelog, args.security)
    for line in lines:
        print(line)
    for problem in problems:
        print(f"release: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
