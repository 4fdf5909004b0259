#!/usr/bin/python3
"""Which of the daemon's functions it runs: the list the link puts first and together in .text
(cmd/volumemanager/hot_functions.txt, ld.lld's --symbol-ordering-file).

Why: the kernel maps a binary's code into a process 64 KiB around each page it faults in (the
page cache's "fault-around"), so a daemon that runs 1 MB of its 3.7 MB of code, spread over the
whole .text as the compiler and linker left it, holds nearly all of it resident. With the
functions it runs placed together, it holds those (BENCHMARKS.md, "Memory against pod count").

How: each scenario below runs the daemon under callgrind (valgrind) through the project's own
benchmarks at a small scale: standalone (ConfigMaps, Secrets, downwardAPI, projected volumes,
changes, a resync period idle, reload actions, the admin endpoints scraped) and cluster mode
(HTTP/1.1 straight to the test API server and HTTP/2 through nghttpx). Every function of the
binary that ran in any of them is listed: first those a standalone daemon ran, then those only
cluster mode ran; within each, those more scenarios ran first, grouped by the scenarios that ran
them, then by name (so that a new list diffs against the old one). A function missing from the
list (renamed, or new code) is still linked, after the listed ones, and costs a 64 KiB window
where it runs; the link warns about nothing (--no-warn-symbol-ordering). Regenerate after a
change that adds or renames much code, and check the binary's Rss in
`bench/rss_by_pods.py --mappings` (`perf record -e page-faults` on the daemon shows which
functions fault outside the listed ones).

Usage: bench/hot_functions.py [--daemon PATH] [--out FILE] [--keep DIR]
Needs valgrind (apt-get install valgrind), the build's benchmarks and test tooling (make test's
packages: nghttpx, python3-yaml); about 5 minutes on 2 cores.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = "/usr/bin/python3"

# (group, name, command after the interpreter; {daemon} is the wrapper that runs callgrind)
SCENARIOS = [
    ("standalone", "configmaps", ["bench/rss_by_pods.py", "--daemon", "{daemon}", "--shape",
                                  "configmaps", "--pods", "0", "1000", "--settle", "5", "--idle",
                                  "70", "--changes", "5", "--uuid-uids", "--json", "{json}"]),
    ("standalone", "mixed", ["bench/rss_by_pods.py", "--daemon", "{daemon}", "--shape", "mixed",
                             "--pods", "20", "--settle", "2", "--json", "{json}"]),
    ("standalone", "admin", ["bench/admin_bench.py", "--daemon", "{daemon}", "--requests", "50",
                             "--connections", "3", "--pods", "5"]),
    ("standalone", "reload", ["bench/reload_bench.py", "--daemon", "{daemon}", "--pods", "20",
                              "--rounds", "2", "--json", "{json}"]),
    ("cluster", "http1", ["bench/cluster_bench.py", "--daemon", "{daemon}", "--only", "latency",
                          "--pods", "20", "--changes", "3", "--json", "{json}"]),
    ("cluster", "http2", ["bench/cluster_bench.py", "--daemon", "{daemon}", "--only", "scale",
                          "--scale", "20", "--json", "{json}"]),
]

# Functions chosen by the CPU at run time, listed wherever the function valgrind runs in their
# place is: valgrind's emulated CPU hides the SHA extensions, so under callgrind SHA-256 runs its
# portable code (base/sha256.cc), where a daemon on a CPU that has them runs the other.
STAND_INS = {
    "_ZN4base12_GLOBAL__N_114PortableBlocksEPjPKhm":
        ["_ZN4base12_GLOBAL__N_118ShaExtensionBlocksEPjPKhm"],
}

HEADER = """\
# The daemon's functions that ran in bench/hot_functions.py's scenarios (mangled names): ld.lld
# places them first and together in .text (--symbol-ordering-file, cmd/volumemanager/CMakeLists.txt),
# so the code a running daemon holds resident is about the code it runs. Generated; regenerate with
# `/usr/bin/python3 bench/hot_functions.py` (its docstring says when and why).
"""


def functions_run(callgrind_out, binary):
    """The functions of `binary` that ran, from one callgrind output file (compressed names):
    those with a cost line of their own (a call's inclusive cost, after `calls=`, is the
    caller's)."""
    ran = set()
    objects, functions = {}, {}
    current_object = current_function = None
    after_calls = False
    for line in open(callgrind_out, errors="replace"):
        line = line.rstrip("\n")
        m = re.match(r"^(c?)(ob|fn|fl|fi|fe)=\((\d+)\)(?: (.*))?$", line)
        if m:
            callee, kind, ident, name = m.groups()
            table = objects if kind == "ob" else functions if kind == "fn" else None
            if table is not None and name is not None:
                table[ident] = name
            if not callee and kind == "ob":
                current_object = objects.get(ident)
            elif not callee and kind == "fn":
                current_function = functions.get(ident)
            continue
        if line.startswith("calls="):
            after_calls = True  # the next cost line is the call's inclusive cost
            continue
        if line[:1].isdigit() or line[:1] in "+-*":  # a cost line (positions may be relative)
            if after_calls:
                after_calls = False
                continue
            if current_function and current_object == binary:
                ran.add(current_function)
    return ran


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--daemon", default=str(REPO / "build" / "bin" / "volumemanager"))
    ap.add_argument("--out", default=str(REPO / "cmd" / "volumemanager" / "hot_functions.txt"))
    ap.add_argument("--keep", help="keep callgrind's output files here")
    ap.add_argument("--reuse", action="store_true",
                    help="read the output files kept in --keep instead of running the scenarios")
    args = ap.parse_args()
    if args.reuse and not args.keep:
        sys.exit("--reuse reads the files of --keep")
    if not args.reuse and shutil.which("valgrind") is None:
        sys.exit("valgrind not found: apt-get install valgrind")
    binary = os.path.realpath(args.daemon)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="hot-functions-"))
    work.mkdir(parents=True, exist_ok=True)
    ran = {}  # function -> the scenarios that ran it
    for group, name, command in SCENARIOS:
        out_dir = work / name
        if not args.reuse:
            run_scenario(group, name, command, out_dir, binary)
        files = sorted(out_dir.glob("callgrind.*"))
        if not files:
            sys.exit(f"{group}/{name}: no callgrind output in {out_dir}")
        for f in files:
            for function in functions_run(f, binary):
                # callgrind's suffix for a recursion level ('2) and unnamed code (0x...)
                function = re.sub(r"'\d+$", "", function)
                if function.startswith("0x") or function.startswith("("):
                    continue
                ran.setdefault(function, set()).add((group, name))

    for function, others in STAND_INS.items():
        for other in others:
            if function in ran:
                ran.setdefault(other, set()).update(ran[function])

    # A daemon touches the functions of its own scenario: those that every scenario ran come
    # first, then the rest grouped by the set of scenarios that ran them (the sets that more
    # scenarios share first, standalone before cluster), so that the pages a given daemon
    # touches hold as few functions it never runs as can be.
    order = [(g, n) for g, n, _ in SCENARIOS]

    def key(function):
        runs = ran[function]
        only_cluster = all(g == "cluster" for g, _ in runs)
        signature = "".join("x" if s in runs else "-" for s in order)
        return (only_cluster, -len(runs), signature, function)

    functions = sorted(ran, key=key)
    Path(args.out).write_text(HEADER + "\n".join(functions) + "\n")
    standalone = sum(1 for f in functions if any(g == "standalone" for g, _ in ran[f]))
    print(f"{standalone} functions in standalone mode, {len(functions) - standalone} more in "
          f"cluster mode: {args.out}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def run_scenario(group, name, command, out_dir, binary):
    out_dir.mkdir(exist_ok=True)
    for old in out_dir.glob("callgrind.*"):
        old.unlink()
    wrapper = out_dir / "daemon.sh"
    wrapper.write_text(
        "#!/bin/sh\nexec valgrind --tool=callgrind --demangle=no --dump-instr=no "
        f"--callgrind-out-file={out_dir}/callgrind.%p {binary} \"$@\"\n")
    wrapper.chmod(0o755)
    argv = [PY] + [a.format(daemon=wrapper, json=out_dir / "result.json") for a in command]
    print(f"# {group}/{name}: {' '.join(argv[1:])}", flush=True)
    run = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=1800)
    (out_dir / "output.txt").write_text(run.stdout)
    if run.returncode != 0:
        sys.exit(f"{group}/{name} failed ({run.returncode}); its output: {out_dir}/output.txt")


if __name__ == "__main__":
    main()
