#!/bin/bash
# Prints the Debian packages (name, one a line) that hold the shared libraries BINARY loads: its
# whole ldd closure, the dynamic loader included, and that of each library it opens at run time
# (dlopen: their sonames are listed in the binary's .vm_dlopen section, e.g. libcurl.so.4). The
# image's root filesystem is made of exactly these packages, and the Dockerfile installs the same
# list on debian:12-slim.
# Usage: image/runtime_packages.sh BINARY
set -euo pipefail
binary=${1:?usage: runtime_packages.sh BINARY}

# ldd prints "name => /path (addr)" for each library and "/path (addr)" for the loader.
closure() { ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'; }
mapfile -t libs < <(closure "$binary")
# readelf -p prints each string of the section as "[ offset]  name".
mapfile -t opened < <(readelf -p .vm_dlopen "$binary" 2>/dev/null | awk '/^ *\[/ {print $NF}')
for soname in "${opened[@]}"; do
  path=$(/sbin/ldconfig -p | awk -v n="$soname" '$1 == n && $NF ~ /^\// {print $NF; exit}')
  [ -n "$path" ] || { echo "runtime_packages.sh: $binary opens $soname, not installed" >&2; exit 1; }
  libs+=("$path")
  mapfile -t -O "${#libs[@]}" libs < <(closure "$path")
done
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
