#!/bin/bash
# Prints the Debian packages (name, one a line) that hold the shared libraries BINARY loads: its
# whole ldd closure, the dynamic loader included, and that of each library it opens at run time
# (dlopen: their sonames are listed in the binary's .vm_dlopen section, e.g. libcurl.so.4). The
# image's root filesystem is made of exactly these packages, and the Dockerfile installs the same
# list on debian:12-slim.
# Usage: image/runtime_packages.sh BINARY
set -euo pipefail
binary=${1:?usage: runtime_packages.sh BINARY}
# Every command's output is taken whole into a variable (never read through `< <(...)`, whose
# failure would go unnoticed), and no reader stops before its writer is done: an awk that exits
# at its first match kills the writer with SIGPIPE, which pipefail then turns into a silent exit
# 141 of this script, sometimes.

# ldd prints "name => /path (addr)" for each library and "/path (addr)" for the loader.
closure() {
  local out
  out=$(ldd "$1") || { echo "runtime_packages.sh: ldd $1 failed" >&2; return 1; }
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' <<< "$out"
}
found=$(closure "$binary")
mapfile -t libs <<< "$found"
# readelf -p prints each string of the section as "[ offset]  name"; a binary without the section
# opens nothing at run time.
sections=$(readelf -p .vm_dlopen "$binary" 2>/dev/null || true)
opened=$(awk '/^ *\[/ {print $NF}' <<< "$sections")
cache=$(/sbin/ldconfig -p)
for soname in $opened; do
  path=$(awk -v n="$soname" '$1 == n && $NF ~ /^\// && !done {print $NF; done = 1}' <<< "$cache")
  [ -n "$path" ] || { echo "runtime_packages.sh: $binary opens $soname, not installed" >&2; exit 1; }
  libs+=("$path")
  found=$(closure "$path")
  mapfile -t -O "${#libs[@]}" libs <<< "$found"
done
[ "${#libs[@]}" -gt 0 ] || { echo "runtime_packages.sh: ldd found no libraries in $binary" >&2; exit 1; }
for lib in "${libs[@]}"; do
  # On a merged-/usr system ldd may name /lib/... where the package ships /usr/lib/...: try the
  # path as printed, then the file it resolves to, then the other spelling of the same path.
  owner=""
  for path in "$lib" "$(realpath "$lib")" "/usr$lib" "${lib#/usr}"; do
    owner=$(dpkg-query -S "$path" 2>/dev/null | awk -F: 'NR == 1 {print $1}') && [ -n "$owner" ] && break
  done
  [ -n "$owner" ] || { echo "runtime_packages.sh: no package holds $lib" >&2; exit 1; }
  echo "$owner"
done | sort -u
