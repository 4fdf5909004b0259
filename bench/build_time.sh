#!/usr/bin/env bash
# What a newcomer waits for before the first volume: a clean `make build` in a fresh clone of
# this checkout's HEAD (packages already installed, no ccache), its wall and CPU time, and the
# number of compiles. With --test, also `make test-build` after it (the tests added to the same
# build dir: nothing `make build` compiled may compile again). Results: BENCHMARKS.md, "Build
# time". Run it on a quiet machine: the wall time is what the issue's goal is about, and other
# processes' compiles inflate it.
#
#   bench/build_time.sh [--test] [--keep] [--commit REV] [-- MAKE_ARGS...]
set -euo pipefail

with_test=0
keep=0
rev=HEAD
make_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --test) with_test=1 ;;
    --keep) keep=1 ;;
    --commit) rev=$2; shift ;;
    --) shift; make_args=("$@"); break ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_time.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse --short "$rev")
work=$(mktemp -d /tmp/vm-build-time.XXXXXX)
if [ "$keep" = 0 ]; then trap 'rm -rf "$work"' EXIT; fi
git clone -q "$repo" "$work/src"
git -C "$work/src" checkout -q "$commit"

export CCACHE_DISABLE=1
# One line per step: its wall time, the CPU time (user + sys) of everything it ran, the compiles.
step() {
  local name=$1
  local log="$work/$name.log" times="$work/$name.time"
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! /usr/bin/time -f '%e %U %S' -o "$times" make -C "$work/src" --no-print-directory "$name" \
      ${make_args[@]+"${make_args[@]}"} >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "build_time.sh: make $name failed (log: $log)" >&2
    keep=1
    exit 1
  fi
  local compiles
  compiles=$(grep -cE 'Building CXX object|^\[[0-9]+/[0-9]+\] Building CXX' "$log" || true)
  read -r wall user sys <"$times"
  printf '%-18s wall %6.1f s  CPU %6.1f s (user %.1f, sys %.1f)  compiles %3d  load at start %s\n' \
    "make $name" "$wall" "$(echo "$user + $sys" | bc)" "$user" "$sys" "$compiles" "$load"
}

echo "commit $commit, $(nproc) cores, $(g++ --version | head -1)"
step build
[ "$with_test" = 1 ] && step test-build
if [ "$keep" = 1 ]; then echo "kept: $work"; fi
