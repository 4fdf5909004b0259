#!/bin/bash
# `make release` after the clean-tree check and the build: the release's artefacts, each with the
# one version, in OUTDIR (emptied first):
#   volumemanager-VERSION-linux-ARCH   the binary, debug info stripped (as in the image)
#   volumemanager-VERSION.oci.tar      the image (image/build_image.sh), tag VERSION, with the
#                                      version, licence and revision labels (and source with SOURCE)
#   volumemanager-VERSION.tgz          the Helm chart (helm package)
#   LICENSE, NOTICE, CHANGELOG.md
#   LINKED-LICENSES                    the licence notes of the Debian packages whose libraries
#                                      are linked into the binary (image/linked_packages.sh), when
#                                      any are (the default build links libstdc++, yaml-cpp, libuv,
#                                      spdlog and fmt in)
#   SHA256SUMS                         of all the above
# then check_release.py checks that they agree with the file VERSION, and with the commit, and that
# CHANGELOG.md and SECURITY.md speak of the version.
# Usage: release/make_release.sh VERSION BINARY IMAGE_WORKDIR HELM OUTDIR [SOURCE]
set -euo pipefail
usage="usage: make_release.sh VERSION BINARY IMAGE_WORKDIR HELM OUTDIR [SOURCE]"
version=${1:?$usage}
binary=${2:?$usage}
image_work=${3:?$usage}
helm=${4:?$usage}
out=$(realpath -m "${5:?$usage}")
source_url=${6:-}
here=$(dirname "$(realpath "$0")")
repo=$(dirname "$here")
revision=$(git -C "$repo" rev-parse HEAD)
arch=$(dpkg --print-architecture)

rm -rf "$out"
mkdir -p "$out"
strip --strip-debug -o "$out/volumemanager-$version-linux-$arch" "$binary"
"$repo/image/build_image.sh" "$binary" "$version" "$image_work" \
  "$out/volumemanager-$version.oci.tar" "$revision" "$source_url"
"$helm" package "$repo/helm/volumemanager" --destination "$out" > /dev/null
install -m 0644 "$repo/LICENSE" "$repo/NOTICE" "$repo/CHANGELOG.md" "$out/"
linked=$("$repo/image/linked_packages.sh" "$binary")
if [ -n "$linked" ]; then
  for p in $linked; do
    echo "== $p $(dpkg-query -W -f '${Version}' "$p"): /usr/share/doc/$p/copyright"
    echo
    cat "/usr/share/doc/$p/copyright"
    echo
  done > "$out/LINKED-LICENSES"
fi
# helm names the package by Chart.yaml's version, which the check compares with VERSION.
charts=("$out"/volumemanager-*.tgz)
/usr/bin/python3 "$here/check_release.py" --version-file "$repo/VERSION" --revision "$revision" \
  --binary "$out/volumemanager-$version-linux-$arch" \
  --image "$out/volumemanager-$version.oci.tar" --chart "${charts[0]}" \
  --changelog "$repo/CHANGELOG.md" --security "$repo/SECURITY.md"
# The build must not have changed the tree either (the artefacts name this commit).
"$here/check_clean_tree.sh" "$repo"
files=$(cd "$out" && ls)
(cd "$out" && sha256sum -- $files > SHA256SUMS)
echo "release $version (commit $revision) in $out:"
(cd "$out" && ls -l --time-style=+ $files SHA256SUMS | awk '{print "  " $NF " (" $5 " bytes)"}')
