#!/bin/bash
# Builds the OCI image of the daemon with buildah, from Debian packages only (no registry is
# contacted): the root filesystem of make_rootfs.sh as the one layer of an image `from scratch`,
# the binary as its entrypoint, written as an OCI archive (`podman load`, `skopeo copy
# oci-archive:...`, `ctr images import` take it).
# Usage: image/build_image.sh BINARY VERSION WORKDIR ARCHIVE [REVISION [SOURCE]]
# WORKDIR holds the root filesystem, the downloaded .debs (kept as a cache) and buildah's own
# storage (vfs driver), so nothing is written to the system's container storage. VERSION is the
# tag and the version label (the Makefile reads it from the file VERSION); REVISION, the commit
# the binary was built from, and SOURCE, the repository's URL, become labels when given.
set -euo pipefail
usage="usage: build_image.sh BINARY VERSION WORKDIR ARCHIVE [REVISION [SOURCE]]"
binary=${1:?$usage}
version=${2:?$usage}
work=$(realpath -m "${3:?$usage}")
archive=$(realpath -m "${4:?$usage}")
revision=${5:-}
source_url=${6:-}
here=$(dirname "$(realpath "$0")")
optional_labels=()
[ -z "$revision" ] || optional_labels+=(--label org.opencontainers.image.revision="$revision")
[ -z "$source_url" ] || optional_labels+=(--label org.opencontainers.image.source="$source_url")

"$here/make_rootfs.sh" "$binary" "$work/rootfs" "$work/debs"

buildah=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
name="localhost/volumemanager:$version"
container=$("${buildah[@]}" from --name "volumemanager-build-$$" scratch)
trap '"${buildah[@]}" rm "$container" > /dev/null 2>&1 || true' EXIT
"${buildah[@]}" copy --quiet "$container" "$work/rootfs/" /
"${buildah[@]}" config \
  --entrypoint '["/usr/bin/volumemanager"]' --cmd '' --workingdir / --user 0:0 \
  --os linux --arch "$(dpkg --print-architecture)" \
  --label org.opencontainers.image.title=volumemanager \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label org.opencontainers.image.description="Keeps ConfigMap, Secret and projected volumes current on every node" \
  --label org.opencontainers.image.base.name=scratch \
  "${optional_labels[@]}" \
  "$container"
"${buildah[@]}" commit --quiet --format oci --rm "$container" "$name" > /dev/null
trap - EXIT
rm -f "$archive"
mkdir -p "$(dirname "$archive")"
"${buildah[@]}" push --quiet "$name" "oci-archive:$archive:$name"
# Only the archive is kept: the image in buildah's storage would double the disk used.
"${buildah[@]}" rmi "$name" > /dev/null
echo "image: $archive ($(du -h "$archive" | cut -f1); root filesystem $(du -sh "$work/rootfs" | cut -f1))"
