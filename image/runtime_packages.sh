#!/bin/bash
# Prints the Debian packages (name, one a line) that hold the shared libraries BINARY loads: its
# whole ldd closure, the dynamic loader included. The image's root filesystem is made of exactly
# these packages, and the Dockerfile installs the same list on debian:12-slim.
# Usage: image/runtime_packages.sh BINARY
set -euo pipefail
binary=${1:?usage: runtime_packages.sh BINARY}

# ldd prints "name => /path (addr)" for each library and "/path (addr)" for the loader.
mapfile -t libs < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
[ "${#libs[@]}" -gt 0 ] || { echo "runtime_packages.sh: ldd found no libraries in $binary" >&2; exit 1; }
for lib in "${libs[@]}"; do
  # On a merged-/usr system ldd may name /lib/... where the package ships /usr/lib/...: try the
  # path as printed, then the file it resolves to, then the other spelling of the same path.
  owner=""
  for path in "$lib" "$(realpath "$lib")" "/usr$lib" "${lib#/usr}"; do
    owner=$(dpkg-query -S "$path" 2>/dev/null | head -n1 | cut -d: -f1) && [ -n "$owner" ] && break
  done
  [ -n "$owner" ] || { echo "runtime_packages.sh: no package holds $lib" >&2; exit 1; }
  echo "$owner"
done | sort -u
