#!/usr/bin/env bash
# A headroom sweep on a real Slurm: `headroom sweep --submit` of a job array
# of four tiny tasks (and two more whose plan does not fit, left out of the
# array), waited for, then `headroom sweep collect` must show the four ok,
# each with every step done, and the two "not in array".
#
# --preempt adds the preemption half: a longer task is sent SIGUSR2 by
# `scancel --signal=USR2` while it trains; it must exit 5 (stopped,
# resumable), requeue itself, resume from its checkpoint and end with the
# same losses, bit for bit, as the same task trained without interruption.
# That needs `headroom train` to stop on SIGUSR2 with exit 5 and
# checkpoint.resume = "auto" (the preemption work); without them the check
# fails at its first step.
#
# Needs a running Slurm with 2 free CPUs (scripts/slurm-local.sh starts a
# single-node one as root; export the SLURM_CONF it prints).
# Usage: scripts/slurm-sweep-check.sh [--preempt]   (HEADROOM=path/to/headroom,
#        KEEP=1 keeps the folder). Exit 0 when every check passes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
headroom="${HEADROOM:-$here/../build/headroom}"
preempt=0
[[ "${1:-}" == "--preempt" ]] && preempt=1
failures=0
pass() { echo "PASS: $*"; }
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

if ! command -v sbatch >/dev/null || ! sinfo -h >/dev/null 2>&1; then
  echo "FAIL: no running Slurm (sbatch/sinfo); scripts/slurm-local.sh starts one"
  exit 1
fi
if [[ ! -x "$headroom" ]]; then
  echo "FAIL: $headroom is not an executable (build it, or set HEADROOM)"
  exit 1
fi
headroom="$(cd "$(dirname "$headroom")" && pwd)/$(basename "$headroom")"
python=""
for candidate in /usr/bin/python3 python3; do
  if "$candidate" -c 'import h5py' 2>/dev/null; then
    python="$candidate"
    break
  fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/slurm-sweep.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then
  echo "keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi
cd "$work"

# Waits until job $1 has left the queue (at most $2 seconds).
wait_for_job() {
  local job="$1" limit="$2" start=$SECONDS
  while squeue -h -j "$job" 2>/dev/null | grep -q .; do
    if ((SECONDS - start > limit)); then
      echo "job $job still queued after ${limit}s:"
      squeue -j "$job" || true
      return 1
    fi
    sleep 2
  done
}

cp "$here/sweep-fixture.toml" exp.toml

echo "== headroom sweep exp.toml --out sw --parallel 2 --submit"
rc=0
"$headroom" sweep exp.toml --out sw --parallel 2 --submit | tee sweep.txt || rc=$?
if [[ $rc -eq 0 ]]; then pass "headroom sweep --submit exited 0"; else fail "headroom sweep exited $rc"; fi
job="$("$python" -c 'import json; print(json.load(open("sw/manifest.json"))["job_id"])' 2>/dev/null ||
  grep -o '"job_id": "[0-9]*"' sw/manifest.json | grep -o '[0-9]*')"
if [[ -n "$job" ]]; then pass "job id $job recorded in the manifest"; else fail "no job id in sw/manifest.json"; fi
grep -q -- '--array=0,2,3,5%2' sweep.txt && pass "array 0,2,3,5%2 (the unfit 001 and 004 left out)" ||
  fail "the array is not 0,2,3,5%2"

if [[ -n "$job" ]] && wait_for_job "$job" 600; then pass "job $job finished"; else fail "job $job did not finish"; fi
echo "== headroom sweep status sw"
"$headroom" sweep status sw || fail "sweep status exited $?"
echo "== headroom sweep collect sw"
"$headroom" sweep collect sw | tee collect.txt || fail "sweep collect exited $?"
ok="$(grep -cE '^  00[0-9] .* ok +3/3 ' collect.txt || true)"
if [[ "$ok" == 4 ]]; then pass "4 tasks ok with 3/3 steps"; else fail "$ok tasks ok with 3/3 steps, expected 4"; fi
left="$(grep -c ' not in array ' collect.txt || true)"
if [[ "$left" == 2 ]]; then pass "2 tasks not in array"; else fail "$left tasks not in array, expected 2"; fi

if [[ $preempt == 1 ]]; then
  echo "== preemption: task 000 of a longer sweep gets SIGUSR2 while it trains"
  # One task, long enough to be signalled mid-run; checkpoints often so
  # the stop has one to resume from.
  "$headroom" sweep exp.toml --out long --overwrite --set run.steps=40 \
    --set checkpoint.save_every=5 --grid zero.stage=0 --zip optimizer.lr=1e-3 \
    --zip memory.device_capacity=2GiB --max-requeues 2 --submit | tee long.txt || fail "long sweep exited $?"
  ljob="$(grep -o 'submitted: job [0-9]*' long.txt | grep -o '[0-9]*$' || true)"
  run="long/runs/tiny-000"
  # Wait for a few steps in the trace, then signal.
  for _ in $(seq 120); do
    [[ -f "$run/trace.rank0.h5" ]] && [[ -f long/logs/${ljob}_0.out ]] &&
      [[ "$(grep -c '^step ' long/logs/${ljob}_0.out || true)" -ge 8 ]] && break
    sleep 1
  done
  scancel --signal=USR2 "${ljob}_0" && pass "scancel --signal=USR2 ${ljob}_0" || fail "scancel failed"
  wait_for_job "$ljob" 900 || fail "job $ljob did not finish"
  "$headroom" sweep status long
  if grep -q 'rc=5' long/status/000.exit && tail -n 1 long/status/000.exit | grep -q 'rc=0'; then
    pass "task 000 exited 5, was requeued and then finished (status/000.exit)"
  else
    fail "status/000.exit does not show rc=5 then rc=0:"
    cat long/status/000.exit 2>/dev/null | sed 's/^/  /'
  fi
  # The same task uninterrupted, as the reference.
  "$headroom" train long/tasks/000.toml --set run.out_dir="$work/ref" >ref.txt 2>&1 ||
    fail "reference run failed"
  if [[ -n "$python" ]]; then
    if "$python" - "$run" "$work/ref/tiny-000" <<'PY'; then
import glob, sys, h5py
def losses(folder):
    out = {}
    for path in sorted(glob.glob(folder + "/trace.rank0*.h5")):
        with h5py.File(path, "r") as f:
            steps = f["steps"]
            for s, l in zip(steps["step"], steps["loss"]):
                out[int(s)] = float(l).hex()
    return out
a, b = losses(sys.argv[1]), losses(sys.argv[2])
print(f"preempted run: {len(a)} steps, reference: {len(b)} steps")
sys.exit(0 if a == b and len(a) == 40 else 1)
PY
      pass "losses bit-identical to the uninterrupted run"
    else
      fail "losses differ from the uninterrupted run"
    fi
  else
    echo "SKIP: loss comparison (no python3 with h5py)"
  fi
fi

if [[ $failures -eq 0 ]]; then
  echo "PASS: slurm sweep check"
else
  echo "FAIL: slurm sweep check ($failures checks failed)"
  exit 1
fi
