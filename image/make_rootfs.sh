#!/bin/bash
# Builds the image's root filesystem in ROOTFS from Debian packages only: the packages that hold
# the libraries BINARY loads (runtime_packages.sh), downloaded with apt-get into DEBS and unpacked
# with dpkg-deb, plus the binary itself (debug info stripped), a few files in /etc, and the licence
# notes (each package's /usr/share/doc/<package>/copyright comes with it; so does that of each
# package whose library is linked into the binary (linked_packages.sh), taken from this machine,
# where the build found it; the daemon's own LICENSE and NOTICE, and a list of the packages and
# their versions, go to /usr/share/doc/volumemanager/).
# No shell, no package manager: nothing runs in the container but the daemon.
# Usage: image/make_rootfs.sh BINARY ROOTFS DEBS
set -euo pipefail
binary=${1:?usage: make_rootfs.sh BINARY ROOTFS DEBS}
rootfs=${2:?usage: make_rootfs.sh BINARY ROOTFS DEBS}
debs=${3:?usage: make_rootfs.sh BINARY ROOTFS DEBS}
here=$(dirname "$(realpath "$0")")

# Taken whole first: a failure of runtime_packages.sh must stop this script, not leave it an empty
# list.
found=$("$here/runtime_packages.sh" "$binary")
mapfile -t packages <<< "$found"
[ -n "${packages[0]}" ] || { echo "make_rootfs.sh: no packages for $binary" >&2; exit 1; }
# A package whose /usr/share/doc/<package> is a link to another package's (libgcc-s1 and
# libstdc++6 to gcc-12-base) has its licence there: that package comes too.
for p in "${packages[@]}"; do
  target=$(dpkg-query -L "$p" 2>/dev/null | grep -x "/usr/share/doc/$p" > /dev/null &&
           readlink "/usr/share/doc/$p" || true)
  if [ -n "$target" ] && [[ "$target" != */* ]]; then packages+=("$target"); fi
done
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
found=$("$here/linked_packages.sh" "$binary")
linked=()
[ -z "$found" ] || mapfile -t linked <<< "$found"
mkdir -p "$debs"
# The archive's current version of each (the one `apt-get install` in the Dockerfile gets, with
# its security fixes), downloaded once into $debs.
candidate() { apt-cache policy "$1" | awk '$1 == "Candidate:" && $2 != "(none)" {print $2}'; }
# A machine whose package lists were never fetched (or were cleaned) knows no candidate: fetch
# them once.
if [ -z "$(candidate "${packages[0]}")" ]; then apt-get update -qq; fi
wanted=()
missing=()
for p in "${packages[@]}"; do
  version=$(candidate "$p")
  [ -n "$version" ] || { echo "make_rootfs.sh: no version of $p to download" >&2; exit 1; }
  wanted+=("$p=$version")
  compgen -G "$debs/${p}_${version//:/%3a}_*.deb" > /dev/null || missing+=("$p=$version")
done
if [ "${#missing[@]}" -gt 0 ]; then
  (cd "$debs" && apt-get download -q -o APT::Sandbox::User=root "${missing[@]}")
fi

rm -rf "$rootfs"
mkdir -p "$rootfs"
for w in "${wanted[@]}"; do
  name=${w%%=*} version=${w#*=}
  dpkg-deb -x "$(compgen -G "$debs/${name}_${version//:/%3a}_*.deb" | head -n1)" "$rootfs"
done

install -D -m 0755 "$binary" "$rootfs/usr/bin/volumemanager"
for p in "${linked[@]}"; do
  install -D -m 0644 "/usr/share/doc/$p/copyright" "$rootfs/usr/share/doc/$p/copyright"
done
strip --strip-debug "$rootfs/usr/bin/volumemanager"
mkdir -p "$rootfs/etc" "$rootfs/tmp" "$rootfs/usr/share/doc/volumemanager"
chmod 1777 "$rootfs/tmp"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
  > "$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$rootfs/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
install -m 0644 "$here/../LICENSE" "$here/../NOTICE" "$rootfs/usr/share/doc/volumemanager/"
{
  echo "volumemanager image: the daemon and the Debian 12 packages below, unpacked unchanged, or linked into it."
  echo "Each package's licence is in /usr/share/doc/<package>/copyright."
  echo
  for w in "${wanted[@]}"; do echo "${w%%=*} ${w#*=}"; done
  for p in "${linked[@]}"; do
    echo "$p $(dpkg-query -W -f '${Version}' "$p") (linked into the daemon)"
  done
} > "$rootfs/usr/share/doc/volumemanager/packages.txt"
