#!/usr/bin/python3
"""Finds system calls on files, directories and mounts, and clock reads, that volumemanager/ makes
itself instead of through its Env (atomicwriter/env.h): every such call of the core goes through
the seam, so that fault tests reach it. Tests (*_test.cc) and test helpers set up their fixtures
as they like.

Usage: check_env_seam.py [ROOT]   (ROOT: the source tree, default: this file's ../..)
Prints one line per call found, "<file>:<line>: <call>", and exits 1 when any is found."""

import pathlib
import re
import sys

# The calls only the Env makes: the list and their relatives.
FORBIDDEN = (
    "open openat openat2 creat mkdir mkdirat rename renameat renameat2 unlink unlinkat rmdir "
    "mount umount umount2 read write pread pwrite readv writev stat lstat fstat fstatat statx "
    "statfs fstatfs readlink readlinkat symlink symlinkat link linkat chmod fchmod fchmodat chown "
    "fchown fchownat lchown fsync fdatasync ftruncate truncate getdents64 opendir fdopendir "
    "readdir closedir inotify_add_watch syscall ioctl fopen").split()
CALL = re.compile(r"(?<![\w.>])(?:::)?(" + "|".join(FORBIDDEN) + r")\s*\(")
CLOCK = re.compile(r"\b(?:std::chrono::)?(steady_clock|system_clock)::now\b")

# Comments and string and character literals, blanked out keeping the line structure.
LEXEME = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def strip(text):
    return LEXEME.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def is_exempt(path):
    return path.name.endswith("_test.cc") or path.name.startswith("test_")


def findings(root):
    out = []
    for path in sorted((root / "volumemanager").rglob("*")):
        if path.suffix not in (".cc", ".h") or is_exempt(path):
            continue
        code = strip(path.read_text())
        for number, line in enumerate(code.split("\n"), 1):
            for m in CALL.finditer(line):
                # A declaration or a call of a method of that name (Env::Read...) is not one.
                before = line[:m.start()].rstrip()
                if before.endswith(("int", "ssize_t", "bool", "void", "auto")):
                    continue
                out.append(f"{path.relative_to(root)}:{number}: {m.group(1)}()")
            for m in CLOCK.finditer(line):
                out.append(f"{path.relative_to(root)}:{number}: {m.group(1)}::now")
    return out


def main(argv):
    root = pathlib.Path(argv[1]) if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    found = findings(root)
    for line in found:
        print(line + ": make it through the Env (atomicwriter/env.h)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
