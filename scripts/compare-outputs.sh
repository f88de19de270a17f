#!/usr/bin/env bash
# Byte-for-byte comparison of what two headroom binaries print and write for
# the commands users run: `plan` of every postmortem experiment (one with
# --world-size 2 and the advice after its OOM), `train` of the quickstart,
# `sweep` (planned, not submitted), `fit`, and `report` (text and --json) of
# the traces they wrote. A refactoring must leave all of it unchanged.
#
# Usage: scripts/compare-outputs.sh BEFORE AFTER   (two headroom binaries)
# Exit 0 when every output is the same, 1 with the diffs otherwise.
#
# Each binary runs in its own folder under one temporary root, with the same
# relative paths, so the outputs may be compared as they are. Only what
# measures this machine rather than the run is masked: wall times, rates
# and ETAs (mask() below), the process id in the advice's scratch folder,
# and the two folders' own names.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BEFORE AFTER (two headroom binaries)" >&2
  exit 2
fi
repo="$(cd "$(dirname "$0")/.." && pwd)"
before="$(realpath "$1")"
after="$(realpath "$2")"
work="$(mktemp -d "${TMPDIR:-/tmp}/compare-outputs.XXXXXX")"
# KEEP=1 keeps the folders for a look at what differed.
[[ "${KEEP:-0}" == 1 ]] && echo "outputs in $work" || trap 'rm -rf "$work"' EXIT

# Runs one command of binary $1 in folder $2, its output (stdout, then
# stderr, then the exit code) to $2/out/<name>.
step() {
  local bin="$1" dir="$2" name="$3"
  shift 3
  local rc=0
  (cd "$dir" && "$bin" "$@" >"out/$name.stdout" 2>"out/$name.stderr") || rc=$?
  echo "$rc" >"$dir/out/$name.rc"
}

run_all() {
  local bin="$1" dir="$2"
  mkdir -p "$dir/out"
  ln -s "$repo/experiments" "$dir/experiments"
  cp "$repo/scripts/sweep-fixture.toml" "$dir/sweep.toml"
  for exp in "$repo"/experiments/postmortems/*.toml; do
    local name
    name="$(basename "$exp" .toml)"
    step "$bin" "$dir" "plan-$name" plan "experiments/postmortems/$name.toml" \
      --set "run.out_dir=\"runs\"" --overwrite
  done
  step "$bin" "$dir" plan-seed000-world2 plan experiments/postmortems/seed000_dense_mask.toml \
    --world-size 2 --set "run.out_dir=\"runs-w2\"" --overwrite
  step "$bin" "$dir" train-quickstart train experiments/quickstart.toml \
    --set run.steps=4 --set schedule.warmup_steps=1 --set "run.out_dir=\"runs-qs\"" --overwrite
  step "$bin" "$dir" sweep sweep sweep.toml --out sw
  step "$bin" "$dir" fit fit experiments/postmortems/seed004_lora_24gb.toml \
    --vary batch.micro_batch_size --set "run.out_dir=\"runs-fit\""
  local trace
  for trace in $(cd "$dir" && find runs runs-w2 runs-qs -name '*.h5' | sort); do
    local tag="${trace//\//_}"
    step "$bin" "$dir" "report-$tag" report "$trace"
    step "$bin" "$dir" "report-json-$tag" report "$trace" --json
  done
}

# Masks what measures the machine in one output on stdin (JSON: those
# keys' values, anywhere; text: the figures by their units).
mask() {
  python3 -c '
import json, re, sys
text = sys.stdin.read().replace(sys.argv[1], "<work>").replace(sys.argv[2], "<work>")
timed = {"seconds", "elapsed_seconds", "wall_seconds", "step_seconds", "tokens_per_second",
         "started", "started_at", "created", "peak_t_ns", "t_ns", "t_begin_ns", "t_end_ns"}
def scrub(v):
    if isinstance(v, dict):
        return {k: "<measured>" if k in timed else scrub(x) for k, x in v.items()}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    return v
try:
    print(json.dumps(scrub(json.loads(text)), indent=1))
except ValueError:
    text = re.sub(r"\b[0-9]+(\.[0-9]+)? ?(s|ms|us|min|h)\b", "<time>", text)
    text = re.sub(r"\b[0-9]+(\.[0-9]+)?[kMG]? (tok/s|tokens/s)", "<rate>", text)
    text = re.sub(r"\beta [^ \n]+", "eta <eta>", text)
    text = re.sub(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z", "<date>", text)
    # Resident pages measure this machine, not the run.
    text = re.sub(r"(?m)^rss check: .*$", "rss check: <measured>", text)
    text = re.sub(r"headroom-advice-[0-9]+", "headroom-advice-<pid>", text)
    sys.stdout.write(text)
' "$work/before" "$work/after"
}

run_all "$before" "$work/before"
run_all "$after" "$work/after"

status=0
count=0
for f in "$work"/before/out/*; do
  name="$(basename "$f")"
  count=$((count + 1))
  if ! diff -u <(mask <"$f") <(mask <"$work/after/out/$name") >"$work/diff.txt"; then
    echo "== DIFFERENT: $name"
    head -40 "$work/diff.txt"
    status=1
  fi
done
echo "compared $count outputs of $(basename "$before") and $(basename "$after"):" \
  "$([[ $status -eq 0 ]] && echo "all the same" || echo "some differ")"
exit "$status"
