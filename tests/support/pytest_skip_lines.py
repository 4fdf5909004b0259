"""A pytest plugin that ends a run's output with one line per skipped test, naming it and its
reason: `VM-SKIP <node id>: <reason>`. `make test` loads it into every pytest run ctest starts
(PYTEST_ADDOPTS="-p pytest_skip_lines", this dir on PYTHONPATH) for its skip report
(tests/skip_report.py): pytest's own -rs summary groups skips by the line that raised them, which
for a shared helper (tests/e2e/conftest.py's skip_unless_root) names no test."""


def pytest_terminal_summary(terminalreporter):
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        # (path, line, "Skipped: <reason>") for a skip; a string for anything else.
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr or "")
        reason = reason.removeprefix("Skipped: ").strip()
        if reason in ("", "Skipped", "unconditional skip"):
            reason = "(no reason given)"
        terminalreporter.write_line(f"VM-SKIP {report.nodeid}: {' '.join(reason.split())}")
