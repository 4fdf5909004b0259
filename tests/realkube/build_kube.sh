#!/usr/bin/env bash
# Builds the real Kubernetes binaries the real-Kubernetes tier runs (tests/realkube/README.md) from
# Debian 12's own source package `kubernetes` (upstream v1.20.2 with vendor/), once per build dir:
#
#   tests/realkube/build_kube.sh OUT_DIR [COMPONENT...]     (default component: kube-apiserver)
#
# OUT_DIR/bin/<component> is the result; everything else stays under OUT_DIR too: a private APT
# configuration with a deb-src line (the machine's own apt sources are never changed), the source
# tree inside a GOPATH, Go's build cache. Nothing is written to $HOME, so a second build dir pays
# the cold cost CI pays. Signatures are checked as apt checks them (the Sources index is signed
# by Debian's archive key, the files are checked against it), and the upstream tarball against
# the SHA-256 pinned below: a new Debian revision of the same upstream source keeps it.
# etcd is Debian's etcd-server, downloaded the same way and unpacked to OUT_DIR/etcd (installing
# it would start a system service). With the kubelet, OUT_DIR/cri holds the fake container
# runtime's gRPC stubs, generated from the tree's CRI proto. Needs: apt-get, dpkg-deb, golang-go
# (1.19), golang-github-modern-go-reflect2-dev, and for the stubs protobuf-compiler and
# protobuf-compiler-grpc (the Makefile installs them).
set -euo pipefail

OUT=${1:?usage: build_kube.sh OUT_DIR [COMPONENT...]}
shift
COMPONENTS=("${@:-kube-apiserver}")
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

UPSTREAM_VERSION=v1.20.2
ORIG_TARBALL=kubernetes_1.20.5+really1.20.2.orig.tar.gz
ORIG_SHA256=b83c0780efb182d928dc63d46488a847f161f04e40a94b96bf5247dd671ecdfc
# The tarball's top dir and where GOPATH mode wants the tree.
TREE_TOP=kubernetes-1.20.2
GOPATH_DIR=$OUT/gopath
TREE=$GOPATH_DIR/src/k8s.io/kubernetes

log() { printf 'real kubernetes: %s\n' "$*"; }

fetch_source() {
  local apt=$OUT/apt
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$OUT/src"
  cat >"$apt/sources.list" <<SOURCES
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
SOURCES
  # Only this configuration: no sources.list.d, no system lists or caches; as root, apt's
  # download sandbox user is root (the dirs are ours, not _apt's).
  local opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=-"
              -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
              -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache="
              -o "APT::Sandbox::User=$(id -un)" -q)
  log "fetching Debian's source package kubernetes (private APT configuration in $apt)"
  apt-get "${opts[@]}" update >"$apt/update.log" 2>&1 || { cat "$apt/update.log"; exit 1; }
  (cd "$OUT/src" && apt-get "${opts[@]}" source --download-only kubernetes) \
    >"$apt/source.log" 2>&1 || { cat "$apt/source.log"; exit 1; }
  # etcd: Debian's etcd-server, unpacked here rather than installed: the package would start a
  # system etcd on 127.0.0.1:2379 on a machine with systemd.
  rm -f "$OUT/src"/etcd-server_*.deb
  (cd "$OUT/src" && apt-get "${opts[@]}" download etcd-server) >"$apt/download.log" 2>&1 ||
    { cat "$apt/download.log"; exit 1; }
  echo "$ORIG_SHA256  $OUT/src/$ORIG_TARBALL" | sha256sum -c --quiet - || {
    echo "real kubernetes: $ORIG_TARBALL is not the pinned upstream $UPSTREAM_VERSION source" >&2
    exit 1
  }
}

unpack_source() {
  log "unpacking $ORIG_TARBALL"
  rm -rf "$TREE" "$OUT/src/$TREE_TOP"
  tar -xzf "$OUT/src/$ORIG_TARBALL" -C "$OUT/src"
  mkdir -p "$(dirname "$TREE")"
  mv "$OUT/src/$TREE_TOP" "$TREE"
  # The tree is upstream's release: its newest changelog entry is the release before it, and
  # Debian's changelog names the upstream version it really is.
  grep -q "^# v1.20.1$" "$TREE/CHANGELOG/CHANGELOG-1.20.md" || {
    echo "real kubernetes: the source tree is not upstream 1.20.2" >&2
    exit 1
  }
  # vendor/'s reflect2 1.0.1 breaks on Go >= 1.18 (it reads runtime internals that moved);
  # Debian's 1.0.2 is API-compatible and works.
  rm -rf "$TREE/vendor/github.com/modern-go/reflect2"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$TREE/vendor/github.com/modern-go/reflect2"
  rm -f "$TREE/vendor/github.com/modern-go/reflect2/go.mod"
}

go_env() {
  # GOPATH mode, as 1.20's hack/ scripts build (module mode with -mod=vendor fails under Go 1.19:
  # "updates to go.mod needed"); nothing fetched from the network.
  export GOPATH=$GOPATH_DIR GOCACHE=$OUT/gocache GO111MODULE=off GOPROXY=off GOFLAGS= \
         GOENV=off CGO_ENABLED=0 GOTMPDIR=
}

generate_openapi() {
  # The release tarball lacks pkg/generated/openapi/zz_generated.openapi.go; the vendored
  # openapi-gen makes it from the packages build/root/Makefile.generated_files selects: every
  # package (staging named as vendor/) with a +k8s:openapi-gen tag, but code-generator's and
  # sample-apiserver's.
  log "generating pkg/generated/openapi (vendored openapi-gen)"
  (cd "$TREE" && go build -o "$OUT/tools/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen)
  local inputs
  inputs=$(cd "$TREE" && find -H . -not \( \( -path './_*' -o -path './.*' -o -path ./vendor \) -prune \) \
             -type f -name '*.go' -print | sed 's|^\./staging/src|vendor|; s|^\./||' |
           xargs -n1 dirname | LC_ALL=C sort -u |
           while read -r d; do find "$d" -maxdepth 1 -type f -name '*.go'; done |
           grep -v '^vendor/k8s.io/code-generator/\|^vendor/k8s.io/sample-apiserver/' |
           xargs grep -l '^// *+k8s:' | xargs grep -l '+k8s:openapi-gen=' |
           xargs -n1 dirname | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd,)
  (cd "$TREE" && "$OUT/tools/openapi-gen" -i "$inputs" -p k8s.io/kubernetes/pkg/generated/openapi \
     -O zz_generated.openapi -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
     -r "$OUT/tools/openapi-violations.report")
  # Upstream's make fails when the API rule violations differ from its list: same check.
  diff -q "$OUT/tools/openapi-violations.report" "$TREE/api/api-rules/violation_exceptions.list" >/dev/null || {
    echo "real kubernetes: openapi-gen's API rule violations differ from upstream's list" >&2
    exit 1
  }
}

build_component() {
  local name=$1
  # The version the binary reports (/version, --version), as hack/lib/version.sh sets it.
  local ldflags="-s -w" pkg
  for pkg in k8s.io/kubernetes/vendor/k8s.io/component-base/version \
             k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$UPSTREAM_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=20"
    ldflags+=" -X $pkg.gitTreeState=archive -X $pkg.gitCommit=debian-source-package"
  done
  log "building $name (go $(go env GOVERSION); a few minutes on 2 cores the first time)"
  local start=$SECONDS
  (cd "$TREE" && go build -trimpath -ldflags "$ldflags" -o "$OUT/bin/$name.new" "./cmd/$name")
  mv "$OUT/bin/$name.new" "$OUT/bin/$name"
  log "built $OUT/bin/$name in $((SECONDS - start)) s"
}

mkdir -p "$OUT/bin" "$OUT/tools"
go_env
if [ ! -f "$OUT/src/.fetched" ] || ! [ -f "$OUT/src/$ORIG_TARBALL" ]; then
  fetch_source
  touch "$OUT/src/.fetched"
fi
if [ ! -f "$TREE/.prepared" ]; then
  unpack_source
  generate_openapi
  touch "$TREE/.prepared"
fi
if [ ! -x "$OUT/bin/etcd" ]; then
  rm -rf "$OUT/etcd"
  dpkg-deb -x "$OUT"/src/etcd-server_*.deb "$OUT/etcd"
  ln -sf ../etcd/usr/bin/etcd "$OUT/bin/etcd"
  log "etcd $("$OUT/bin/etcd" --version | awk '/etcd Version/ {print $3}') unpacked to $OUT/etcd"
fi
for component in "${COMPONENTS[@]}"; do
  [ -x "$OUT/bin/$component" ] || build_component "$component"
done
# Beside the kubelet runs the tests' fake container runtime (fakecri.py): its gRPC stubs come from
# the tree's CRI proto (v1alpha2, the kubelet's).
if [[ " ${COMPONENTS[*]} " == *" kubelet "* ]]; then
  "$(dirname "$0")/gen_cri_stubs.sh" \
    "$TREE/vendor/k8s.io/cri-api/pkg/apis/runtime/v1alpha2/api.proto" "$OUT/cri"
fi
