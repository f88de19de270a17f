#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for N seconds each (default 60):
#   bash scripts/fuzz.sh [seconds per target]
# Configures and builds the `fuzz` preset (clang 14, ASan + UBSan; build-fuzz/,
# only the fuzz targets and the libraries they link), then fuzzes each
# target from a temporary copy of its committed corpus (regressions/ is never
# grown, corpus/ only by FUZZ_GROW_CORPUS, below) with its dictionary. A
# crash, a sanitizer report, a leak, a hang (-timeout) or more than
# -rss_limit_mb is a failure: the input is kept under
# build-fuzz/fuzz-findings/<target>/ and the script exits 1 after the table.
# Needs clang (scripts/setup.sh installs it).
#
# FUZZ_TARGETS="config trace" limits the run to some targets; FUZZ_JOBS is
# -j for the build (default 2). The work folder (corpus copies, each input's
# file) is under $TMPDIR if set, else /dev/shm, else /tmp.
# FUZZ_GROW_CORPUS=1 (for the long runs, not CI) merges what a clean run
# found into tests/fuzz/corpus/<target>/ with libFuzzer's -merge=1: the
# committed inputs stay, and a found one is added only if it reaches an edge
# they do not (-use_counters=0: hit counts would keep three times the
# files), so CI's short runs and the replay test start from what an hour of
# fuzzing reached. Commit the new files.
set -uo pipefail

seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
cd "$root"

cmake --preset fuzz >/dev/null || exit 1
cmake --build --preset fuzz --target fuzz_targets -j "${FUZZ_JOBS:-2}" || exit 1

targets=${FUZZ_TARGETS:-$(ls "$build"/fuzz | sed -n 's/^fuzz_//p' | sort)}
# The targets write every input to a file of their own (HDF5 and safetensors
# are read from a path), so without a TMPDIR the work folder goes on tmpfs:
# on a disk-backed /tmp, writeback kept two fuzzers waiting (iowait) and
# they got 57% of the 2 cores over an hour; on /dev/shm, 99%.
if [ -n "${TMPDIR:-}" ]; then
  work_root=$TMPDIR
elif [ -d /dev/shm ] && [ -w /dev/shm ]; then
  work_root=/dev/shm
else
  work_root=/tmp
fi
work=$(mktemp -d "$work_root/headroom-fuzz-run.XXXXXX")
trap 'rm -rf "$work"' EXIT
findings=$build/fuzz-findings
mkdir -p "$findings"

declare -A dict=(
  [config]=toml [sweep]=toml
  [safetensors]=json [safetensors_index]=json [model_config]=json
  [tokenizer_json]=json [jsonl]=json [train_state]=json [shard_index]=json
)

failed=0
rows=()
for t in $targets; do
  exe=$build/fuzz/fuzz_$t
  corpus=$work/corpus/$t
  mkdir -p "$corpus" "$findings/$t"
  for seeds in tests/fuzz/corpus/$t tests/fuzz/regressions/$t; do
    [ -d "$seeds" ] && cp -r "$seeds/." "$corpus/"
  done
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$findings/$t/")
  [ -n "${dict[$t]:-}" ] && args+=(-dict="tests/fuzz/dict/${dict[$t]}.dict")
  log=$work/$t.log
  echo "== fuzz_$t (${seconds}s)"
  # TMPDIR: the targets write each input to a file of their own there. The
  # budget is wall time; the CPU seconds (user + system) say how much of it
  # the target had on a shared machine.
  TIMEFORMAT='%U %S'
  { time TMPDIR=$work ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$exe" "${args[@]}" "$corpus" >"$log" 2>&1; } 2>"$work/$t.time"
  rc=$?
  cpu=$(awk '{printf "%.0f", $1 + $2}' "$work/$t.time")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$corpus" -type f | wc -l)
  status=ok
  if [ $rc -ne 0 ]; then
    status=FAIL
    failed=1
    grep -E 'ERROR: |SUMMARY: |Test unit written|==[0-9]+==' "$log" | head -8
    cp "$log" "$findings/$t/fuzz.log"
  fi
  echo "   $status: ${execs:-?} executions, cov ${cov:-?}, corpus $files files, ${cpu:-?} CPU s"
  if [ "${FUZZ_GROW_CORPUS:-0}" = 1 ] && [ $status = ok ]; then
    # The regressions' copies are not seeds: they stay in regressions/ only.
    if [ -d "tests/fuzz/regressions/$t" ]; then
      (cd "tests/fuzz/regressions/$t" && find . -type f -exec rm -f "$corpus/{}" \;)
    fi
    before=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
    if TMPDIR=$work "$exe" -merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 \
        "tests/fuzz/corpus/$t" "$corpus" >"$findings/$t/merge.log" 2>&1; then
      echo "   corpus/$t: $before -> $(find "tests/fuzz/corpus/$t" -type f | wc -l) files"
    else
      echo "   corpus/$t: the merge failed ($findings/$t/merge.log):" >&2
      tail -5 "$findings/$t/merge.log" >&2
      failed=1
    fi
  fi
  rows+=("$(printf '%-18s %-5s %12s %8s %8s %8s' "$t" "$status" "${execs:-?}" "${cov:-?}" "$files" \
    "${cpu:-?}")")
done

echo
printf '%-18s %-5s %12s %8s %8s %8s\n' target result executions cov corpus "CPU s"
for row in "${rows[@]}"; do echo "$row"; done
[ $failed -eq 0 ] || echo "findings (inputs and logs): $findings" >&2
exit $failed
