#!/usr/bin/env bash
# Builds bench/kubelet_writer/main.go, the Go harness through which bench_atomicwriter runs the
# kubelet's own atomic writer (pkg/volume/util/atomic_writer.go, v1.20.2), against the Kubernetes
# source tree that tests/realkube/build_kube.sh unpacks (`make real-kube`):
#
#   bench/kubelet_writer/build.sh REALKUBE_DIR OUT
#
# REALKUBE_DIR is build_kube.sh's OUT_DIR (the Makefile's build/realkube): the tree is
# REALKUBE_DIR/gopath/src/k8s.io/kubernetes, built in GOPATH mode with its vendor/ and Go's build
# cache REALKUBE_DIR/gocache, as build_kube.sh builds the kubelet (so the tree's packages come from
# that cache); nothing is fetched and nothing is copied from the tree. GOCACHE, when set, is used
# instead. Exit status 2, saying so, when the tree is not there.
set -euo pipefail

REALKUBE=${1:?usage: build.sh REALKUBE_DIR OUT}
OUT=${2:?usage: build.sh REALKUBE_DIR OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
REALKUBE=$(cd "$REALKUBE" 2>/dev/null && pwd) || {
  echo "kubelet_atomic_writer: no $1 (make real-kube unpacks the Kubernetes tree there)" >&2
  exit 2
}
TREE=$REALKUBE/gopath/src/k8s.io/kubernetes
if [ ! -f "$TREE/.prepared" ] || [ ! -f "$TREE/pkg/volume/util/atomic_writer.go" ]; then
  echo "kubelet_atomic_writer: no prepared Kubernetes tree in $TREE (make real-kube)" >&2
  exit 2
fi
command -v go >/dev/null || { echo "kubelet_atomic_writer: no go (golang-go)" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")
# build_kube.sh's go_env, and its flags (-trimpath, no cgo) so that the tree's packages are the
# ones already in the cache.
export GOPATH=$REALKUBE/gopath GOCACHE=${GOCACHE:-$REALKUBE/gocache} GO111MODULE=off GOPROXY=off \
       GOFLAGS= GOENV=off CGO_ENABLED=0 GOTMPDIR=
cd "$HERE"
go build -trimpath -o "$OUT.new" main.go
mv "$OUT.new" "$OUT"
