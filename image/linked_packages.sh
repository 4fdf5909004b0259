#!/bin/bash
# Prints the Debian packages (name, one a line) whose code BINARY carries linked in statically:
# the owners of the files its .vm_static section names (cmd/volumemanager/CMakeLists.txt writes
# it when the build links libstdc++, yaml-cpp, libuv, spdlog and fmt in: libstdc++.a,
# libyaml-cpp.a, ..., and for spdlog and fmt the header deps/ compiles). These packages are not
# installed in the image, but their licence notes go into it (make_rootfs.sh, the Dockerfile). A
# binary without the section prints nothing.
# Usage: image/linked_packages.sh BINARY
set -euo pipefail
binary=${1:?usage: linked_packages.sh BINARY}
# readelf -p prints each string of the section as "[ offset]  name".
sections=$(readelf -p .vm_static "$binary" 2>/dev/null || true)
files=$(awk '/^ *\[/ {print $NF}' <<< "$sections")
for file in $files; do
  owner=""
  for path in "$file" "$(realpath "$file")"; do
    owner=$(dpkg-query -S "$path" 2>/dev/null | awk -F: 'NR == 1 {print $1}') && [ -n "$owner" ] && break
  done
  [ -n "$owner" ] || { echo "linked_packages.sh: no package holds $file" >&2; exit 1; }
  echo "$owner"
done | sort -u
