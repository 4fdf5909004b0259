#!/bin/sh
# Fails when a compile in build dir $1 printed a warning (see cmake/record_warnings.sh): the
# warnings-are-errors check of `make test`, over every object of the build dir, not only the ones
# compiled by this run.
dir="${1:?usage: check_warnings.sh <build dir>}"
found=$(find "$dir" -name '*.o.warnings' -size +0 | sort)
if [ -n "$found" ]; then
  for f in $found; do
    echo "== warnings compiling ${f%.warnings}:" >&2
    cat "$f" >&2
  done
  echo "check_warnings: compiler warnings in $(echo "$found" | wc -l) object(s) of $dir; warnings are errors in developer builds" >&2
  exit 1
fi
