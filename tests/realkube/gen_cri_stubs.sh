#!/bin/bash
# Generates the Python gRPC stubs of the CRI (v1alpha2) for tests/realkube/fakecri.py.
#
#   tests/realkube/gen_cri_stubs.sh PROTO OUT_DIR
#
# PROTO is Kubernetes' vendored cri-api api.proto (under the build_kube.sh tree:
# gopath/src/k8s.io/kubernetes/vendor/k8s.io/cri-api/pkg/apis/runtime/v1alpha2/api.proto).
# It imports gogoproto and sets (gogoproto.*) options, which only matter to Go's code generator
# and which plain protoc cannot resolve: they are stripped into a copy first. The stubs are
# OUT_DIR/api_pb2.py and OUT_DIR/api_pb2_grpc.py (the latter imports the former as `api_pb2`).
#
# Needs protoc and gRPC's Python plugin (Debian: protobuf-compiler, protobuf-compiler-grpc;
# PROTOC and GRPC_PYTHON_PLUGIN override where they are). Nothing is done when both stubs are
# newer than PROTO and this script. The stubs are written in a temporary dir under OUT_DIR and
# renamed into place, so concurrent runs never see half a file.
set -euo pipefail

die() { echo "gen_cri_stubs.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: gen_cri_stubs.sh PROTO OUT_DIR"
proto=$1
out=$2
protoc=${PROTOC:-protoc}
plugin=${GRPC_PYTHON_PLUGIN:-/usr/bin/grpc_python_plugin}

[ -f "$proto" ] || die "no CRI proto at $proto (build_kube.sh unpacks the Kubernetes tree that has it)"
command -v "$protoc" >/dev/null 2>&1 ||
    die "protoc not found ($protoc); install Debian's protobuf-compiler or set PROTOC"
[ -x "$plugin" ] ||
    die "gRPC's Python plugin not found at $plugin; install protobuf-compiler-grpc or set GRPC_PYTHON_PLUGIN"

mkdir -p "$out"
self=${BASH_SOURCE[0]}
if [ "$out/api_pb2.py" -nt "$proto" ] && [ "$out/api_pb2_grpc.py" -nt "$proto" ] &&
   [ "$out/api_pb2.py" -nt "$self" ] && [ "$out/api_pb2_grpc.py" -nt "$self" ]; then
    exit 0
fi

tmp=$(mktemp -d "$out/.gen.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Drop the gogo import, the file-level `option (gogoproto.x) = ...;` lines and any field options
# made of gogoproto options only (`[(gogoproto.x) = y, ...]`). Whatever gogoproto is left (say an
# option list that mixes it with a standard option after it) stops the script rather than
# reaching protoc as an unresolvable name.
sed -e '/^[[:space:]]*import[[:space:]]*"github.com\/gogo\/protobuf\/gogoproto\/gogo.proto";/d' \
    -e '/^[[:space:]]*option[[:space:]]*(gogoproto\.[^;]*;/d' \
    -e 's/[[:space:]]*\[(gogoproto\.[^]]*\]//g' \
    "$proto" >"$tmp/api.proto"
if grep -n -E '\(gogoproto\.|gogo\.proto' "$tmp/api.proto" >&2; then
    die "gogoproto left in the stripped copy of $proto (lines above): extend the strip step"
fi

"$protoc" -I "$tmp" --python_out="$tmp" --grpc_python_out="$tmp" \
    --plugin=protoc-gen-grpc_python="$plugin" "$tmp/api.proto" ||
    die "protoc failed on the stripped copy of $proto"
[ -f "$tmp/api_pb2.py" ] && [ -f "$tmp/api_pb2_grpc.py" ] || die "protoc wrote no stubs"
mv -f "$tmp/api_pb2.py" "$out/api_pb2.py"
mv -f "$tmp/api_pb2_grpc.py" "$out/api_pb2_grpc.py"
