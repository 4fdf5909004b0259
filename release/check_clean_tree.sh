#!/bin/bash
# `make release`'s first step: a release is built from a commit and nothing else, so the git tree
# must hold no uncommitted change and no untracked file (ignored files, such as build/, are fine).
# Usage: release/check_clean_tree.sh DIR
# Exit 0 when DIR's checkout is clean; otherwise says why on stderr (the first 20 paths) and
# exits 1.
set -euo pipefail
dir=${1:?usage: check_clean_tree.sh DIR}
if ! git -C "$dir" rev-parse --verify --quiet HEAD > /dev/null 2>&1; then
  echo "make release: $dir is not a git checkout with a commit: a release names the commit it" \
       "was built from" >&2
  exit 1
fi
changes=$(git -C "$dir" status --porcelain --untracked-files=all)
if [ -n "$changes" ]; then
  count=$(wc -l <<< "$changes")
  {
    echo "make release: refused, the git tree is not clean ($count path(s) changed or untracked);" \
         "a release is built from a commit only:"
    head -n 20 <<< "$changes" | sed 's/^/  /'
    [ "$count" -le 20 ] || echo "  ..."
    echo "commit them, or set them aside (git stash --include-untracked), then run make release again"
  } >&2
  exit 1
fi
