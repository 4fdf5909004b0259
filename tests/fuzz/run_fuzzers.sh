#!/usr/bin/env bash
# Runs libFuzzer targets built by `make fuzz` (tests/fuzz/README.md).
#   run_fuzzers.sh <fuzz build dir> short <seconds per target> <folder/target>...
#   run_fuzzers.sh <fuzz build dir> long <executions per target> <folder/target>...
# Each target starts from its committed seeds (<folder>/testdata/fuzz/<target>/), its dictionary
# (<folder>/testdata/fuzz/<target>.dict) and its flags (<target>.options, if any), and keeps what it finds in
# <build dir>/corpus/<target>/; crashing inputs go to <build dir>/artifacts/<target>/.
# short: every target for the given time, as many at once as there are CPUs (FUZZ_JOBS), each
# with a CPU of its own; exits non-zero when any target found a crash.
# long: every target for the given number of executions, one after the other (a finding stops that
# target, not the others); logs in <build dir>/long/, and a Markdown table of executions, time,
# coverage and findings in <build dir>/long/summary.md. Exits non-zero when any target found one.
set -uo pipefail
build=$1 mode=$2 amount=$3
shift 3
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$build/long" "$build/short"
short_pids=() short_names=()
# Absolute: a target may change its working dir (sandboxed_write_fuzzer runs in an empty dir of
# its sandbox), and libFuzzer writes new inputs and findings to these paths as given.
build=$(cd "$build" && pwd)
summary=$build/long/summary.md
if [ "$mode" = long ]; then
  printf '| target | executions | time (s) | exec/s | coverage (edges) | features | corpus | findings |\n' >"$summary"
  printf '|---|---:|---:|---:|---:|---:|---:|---|\n' >>"$summary"
fi
failed=0
for spec in "$@"; do
  folder=${spec%/*} name=${spec##*/}
  seeds=$src/$folder/testdata/fuzz/$name dict=$src/$folder/testdata/fuzz/$name.dict
  corpus=$build/corpus/$name artifacts=$build/artifacts/$name
  mkdir -p "$corpus" "$artifacts"
  args=(-rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$artifacts/")
  [ -f "$dict" ] && args+=(-dict="$dict")
  # <target>.options: the target's own libFuzzer flags (-max_len sized to its input kind), one a
  # line; '#' starts a comment.
  options=$src/$folder/testdata/fuzz/$name.options
  [ -f "$options" ] && while read -r opt _; do
    [ -n "$opt" ] && [ "${opt:0:1}" != "#" ] && args+=("$opt")
  done <"$options"
  if [ "$mode" = short ]; then
    # Up to FUZZ_JOBS targets at once (default: one per CPU), each on its own for the whole
    # time; their output is printed in order once all have run (report_short).
    "$build/bin/$name" "${args[@]}" -max_total_time="$amount" "$corpus" "$seeds" \
      >"$build/short/$name.log" 2>&1 &
    short_pids+=("$!")
    short_names+=("$name")
    while [ "$(jobs -rp | wc -l)" -ge "${FUZZ_JOBS:-$(nproc)}" ]; do wait -n; done
  else
    log=$build/long/$name.log
    # No allocation stacks in ASan reports: recording one per malloc was a tenth of the YAML
    # targets' time. A finding's input is kept; rerun it for the full report.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0}
    echo "== $name: $amount executions (log $log)"
    start=$(date +%s)
    "$build/bin/$name" "${args[@]}" -runs="$amount" "$corpus" "$seeds" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
    if [ $rc = 0 ]; then
      findings=none
    else
      failed=1
      findings="exit $rc: $(grep -m1 -E 'ERROR: |deadly signal|Test unit written' "$log" | cut -c1-80)"
    fi
    rate=$(( ${execs:-0} / (secs > 0 ? secs : 1) ))
    printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "${execs:-?}" "$secs" "$rate" \
      "${cov:-?}" "${ft:-?}" "${corp:-?}" "$findings" | tee -a "$summary"
  fi
done
# Each short run's output, libFuzzer's progress lines left out, and its status.
for i in "${!short_names[@]}"; do
  name=${short_names[$i]}
  wait "${short_pids[$i]}"
  rc=$?
  echo "== $name: ${amount}s"
  grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|RELOAD) |^INFO: ' "$build/short/$name.log"
  [ "$rc" = 0 ] || { echo "== $name: FAILED, exit $rc (inputs in $build/artifacts/$name)"; failed=1; }
done
[ "$mode" = long ] && { echo; cat "$summary"; }
exit $failed
