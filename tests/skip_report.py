#!/usr/bin/python3
"""The skip report of a ctest run: how many tests were skipped and why.

`make test` (and test-asan, test-tsan) runs it after ctest. It reads every test's output from
ctest's log (<build>/Testing/Temporary/LastTest.log): a GoogleTest case skipped by GTEST_SKIP()
(its message between "Skipped" and "[  SKIPPED ]"), and each pytest test a ctest test ran skipped
(the "VM-SKIP <node id>: <reason>" lines of tests/support/pytest_skip_lines.py, which `make
test` loads into every pytest run through PYTEST_ADDOPTS). A skip whose reason says "needs root"
is a root skip (tests/support/skip.h, tests/e2e/conftest.py); one without a reason is reported as
such.

It prints the report, then ctest's summary line again (from --ctest-output, ctest's tee'd stdout),
so that the output still ends with it. Its exit status is ctest's (--ctest-status), or 1 when it
was 0 and, under CI (CI=true), a root skip or a skip without a reason was found: CI runs as root,
so a test that needs root and did not run is a test CI lost.

Stdlib only (Debian's /usr/bin/python3).
"""
import argparse
import os
import re
import sys

ROOT_SKIP = re.compile(r"\bneeds root\b", re.IGNORECASE)
NO_REASON = "(no reason given)"

# One test's record in LastTest.log: "<n>/<total> Test: <name>", its command, its output between
# the dashes after "Output:" and "<end of output>".
TEST_START = re.compile(r"^\d+/\d+ Test: (.+)$", re.MULTILINE)
OUTPUT = re.compile(r"^Output:\n-+\n(.*?)<end of output>$", re.MULTILINE | re.DOTALL)
# GoogleTest: "[ RUN      ] Suite.Name", then for a skip "<file>:<line>: Skipped" and the
# message, then "[  SKIPPED ] Suite.Name (n ms)". Read line by line (linear in the log's size).
GTEST_RUN = "[ RUN      ] "
GTEST_SKIPPED = "[  SKIPPED ] "
# tests/support/pytest_skip_lines.py: "VM-SKIP tests/e2e/test_x.py::test_y[a]: reason".
PYTEST_SKIP = re.compile(r"^VM-SKIP (\S+): (.*)$", re.MULTILINE)
CTEST_SUMMARY = re.compile(r"^\d+% tests passed, \d+ tests? failed out of \d+$", re.MULTILINE)


def gtest_skips(text):
    """[(case, reason)] for every GoogleTest case the output shows skipped, in one pass."""
    found = []
    case, message = None, None  # the case running; its skip message once "Skipped" was seen
    for line in text.splitlines():
        if line.startswith(GTEST_RUN):
            case, message = line[len(GTEST_RUN):].strip(), None
        elif case is not None and line.startswith(GTEST_SKIPPED):
            if message is not None and line[len(GTEST_SKIPPED):].split(" ")[0] == case:
                found.append((case, " ".join(" ".join(message).split())))
            case, message = None, None
        elif case is not None and message is None and line.endswith(": Skipped"):
            message = []
        elif message is not None:
            message.append(line)
    return found


def skips_in(log_text):
    """[(ctest test, what skipped, reason)] for every skip in a LastTest.log's text."""
    found = []
    starts = list(TEST_START.finditer(log_text))
    for i, start in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(log_text)
        output = OUTPUT.search(log_text, start.end(), end)
        if output is None:
            continue
        name = start.group(1).strip()
        text = output.group(1)
        for case, reason in gtest_skips(text):
            found.append((name, case, reason or NO_REASON))
        for m in PYTEST_SKIP.finditer(text):
            found.append((name, m.group(1), m.group(2).strip() or NO_REASON))
    return sorted(found)


def label(skip):
    """A skip's test: the GoogleTest case (its ctest name), or ctest's test and the pytest id."""
    name, what, _ = skip
    return what if what == name else f"{name}: {what}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", required=True, help="the build dir ctest ran in")
    p.add_argument("--ctest-output", help="ctest's stdout, for its summary line")
    p.add_argument("--ctest-status", type=int, default=0, help="ctest's exit status")
    args = p.parse_args()

    log = os.path.join(args.build, "Testing", "Temporary", "LastTest.log")
    try:
        with open(log, errors="replace") as f:
            skips = skips_in(f.read())
    except OSError as e:
        print(f"skip report: cannot read ctest's log: {e}")
        skips = None

    status = args.ctest_status
    ci = os.environ.get("CI", "").lower() == "true"
    if skips is not None:
        root = [s for s in skips if ROOT_SKIP.search(s[2])]
        unexplained = [s for s in skips if s[2] == NO_REASON]
        print(f"Skipped: {len(skips)} test{'' if len(skips) == 1 else 's'}"
              f" ({len(root)} needing root)")
        for skip in skips:
            print(f"  {label(skip)}: {skip[2]}")
        if ci and (root or unexplained):
            # CI runs as root: a test that needs root and did not run is a test CI lost.
            for skip in root:
                print(f"CI: needs root but skipped: {label(skip)}")
            for skip in unexplained:
                print(f"CI: skipped without saying why: {label(skip)}")
            status = status or 1
    elif ci:
        status = status or 1

    if args.ctest_output:
        try:
            with open(args.ctest_output, errors="replace") as f:
                summaries = CTEST_SUMMARY.findall(f.read())
            if summaries:
                print(summaries[-1])
        except OSError:
            pass
    return status


if __name__ == "__main__":
    sys.exit(main())
