#!/bin/sh
# Compiler launcher (CMAKE_CXX_COMPILER_LAUNCHER): runs the compile command it is given, passes
# its diagnostics through to stderr, and keeps them in <object>.warnings when the compile succeeded
# with any (the file goes when a later compile of the object is clean). cmake/check_warnings.sh
# reads these files, so warnings fail `make test` even for objects built earlier by `make build`.
obj=""
prev=""
for arg in "$@"; do
  [ "$prev" = "-o" ] && obj="$arg"
  prev="$arg"
done
if [ -z "$obj" ]; then
  exec "$@"
fi
log="$obj.warnings"
"$@" 2>"$log.tmp"
rc=$?
cat "$log.tmp" >&2
if [ "$rc" -eq 0 ] && [ -s "$log.tmp" ]; then
  mv -f "$log.tmp" "$log"
else
  rm -f "$log.tmp" "$log"
fi
exit "$rc"
