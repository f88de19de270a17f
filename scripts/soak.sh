#!/usr/bin/env bash
# The preemption soak (issue 44; a benchmark, not a CI test): the quickstart
# on 2 ranks at ZeRO-3, sharded checkpoints every 25 steps and
# checkpoint.resume = "auto", preempted by SIGUSR2 to mpirun at random
# moments and restarted by the same command each time, as a requeued Slurm
# job is. Every fourth signal is aimed inside a checkpoint save (sent the
# moment a step-N/ folder exists without its trainer_state.json). At the
# end it checks, against an uninterrupted run of the same config:
#   - every step 0..steps-1 is in the traces exactly once (trace.rank0.h5
#     and each trace.rank0.from-step-N.h5), with the uninterrupted run's
#     loss and gradient norm bit for bit;
#   - every checkpoints/step-N/ is complete (trainer_state.json, no
#     temporaries);
# and prints the time lost per preemption: seconds from the signal to the
# resumed run's first finished step (the stop's own save, the process
# start, the resume's reading, the step), median and range.
#
# SOAK_WORLD_SIZES="2 1" restarts each segment on one of the sizes at random.
# Every run then sets batch.global_micro_batches to the sizes' least common
# multiple, so each size trains the same micro-batches a step (docs/cli.md,
# "Resharding on load"): the steps before the first change of world size
# are checked bit for bit, the later ones within SOAK_BOUND of the
# reference's loss, relative (default 1e-5, the tests' bound for a resume
# on another world size). Another world size may sum the ranks' gradients in
# another order, so the weights can differ in their last bits from the first
# step on it, and the bound is how far that may carry over the remaining
# steps.
#
#   bash scripts/soak.sh [steps] [preemptions]   (repository root, after a build;
#                                                 default 2000 steps, 20 preemptions)
set -euo pipefail
steps=${1:-2000}
preemptions=${2:-20}
read -r -a sizes <<< "${SOAK_WORLD_SIZES:-2}"
bin=$(realpath "${HEADROOM:-build/headroom}")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/headroom-soak.XXXXXX")
[[ "${KEEP:-0}" == 1 ]] && echo "soak folder: $work" || trap 'rm -rf "$work"' EXIT
cd "$work"
RANDOM=${SOAK_SEED:-1}

sets=(--set run.steps="$steps" --set zero.stage=3 --set checkpoint.format='"sharded"'
  --set checkpoint.resume='"auto"' --set checkpoint.save_every=25
  --set trace.memory_events=false --set trace.flush_every=25)
if ((${#sizes[@]} > 1)); then
  global=1
  for n in "${sizes[@]}"; do
    a=$global b=$n
    while ((b)); do t=$((a % b)) a=$b b=$t; done
    global=$((global / a * n))
  done
  sets+=(--set batch.global_micro_batches="$global")
fi
train() {  # world_size run_name log -> (background) pid in $!
  mpirun --oversubscribe -np "$1" "$bin" train --set run.name="\"$2\"" "${sets[@]}" > "$3" 2>&1 &
}
now() { date +%s.%N; }

# The corpus once, then the uninterrupted reference.
"$bin" train --set run.steps=5 --set run.name='"corpus"' > corpus.log 2>&1 ||
  { tail -20 corpus.log >&2; exit 1; }
t0=$(now)
train "${sizes[0]}" reference reference.log
wait $! || { tail -20 reference.log >&2; exit 1; }
reference_seconds=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.0f", b - a}')

ckpt=results/soak/checkpoints
segment=0 signals=0 in_save=0 rc=5
lost=() sizes_used=() segments_done=()
while ((rc == 5)); do
  size=${sizes[$((RANDOM % ${#sizes[@]}))]}
  ((segment == 0)) && size=${sizes[0]}
  sizes_used+=("$size")
  log="segment-$segment.log"
  train "$size" soak "$log"
  pid=$!
  if ((segment > 0)); then  # the time lost: from the last signal to this segment's first step
    until grep -q '^step ' "$log" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    grep -q '^step ' "$log" &&
      lost+=("$(awk -v a="$signal_at" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}')")
  fi
  if ((signals < preemptions)); then
    if ((signals % 4 == 3)); then
      # Inside a save: the moment a step folder exists without its marker.
      deadline=$(awk -v t="$(now)" 'BEGIN {printf "%.0f", t + 120}')
      hit=0
      while kill -0 "$pid" 2>/dev/null && (($(date +%s) < deadline)); do
        for d in "$ckpt"/step-*/; do
          [[ -d "$d" && ! -f "$d/trainer_state.json" ]] && hit=1 && break 2
        done
      done
      ((hit)) && in_save=$((in_save + 1))
    else
      # A random moment: 0.5 s to ~1.5 segment-lengths of the remaining run.
      sleep "$(awk -v r=$RANDOM -v s="$reference_seconds" -v n="$preemptions" \
        'BEGIN {printf "%.2f", 0.5 + r / 32768 * 1.5 * s / (n + 1)}')"
    fi
    signal_at=$(now)
    kill -USR2 "$pid" 2>/dev/null && signals=$((signals + 1))
  fi
  rc=0
  wait "$pid" || rc=$?
  # mpirun exits 5 when its ranks stop on the forwarded SIGUSR2; 0 when the
  # run finished first (the signal then came too late to matter).
  if ((rc != 0 && rc != 5)); then
    echo "segment $segment (world size $size) exited $rc:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  if ((rc == 0 && signals < preemptions && segment > 0)); then
    echo "the run finished after $signals of $preemptions signals: use more steps" >&2
  fi
  first=$(grep -o 'resumed from .*: step [0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  segments_done+=("$size:$first:$(grep -q '^step ' "$log" && echo 1 || echo 0)")
  segment=$((segment + 1))
done

/usr/bin/python3 - "$steps" "${segments_done[*]}" "${SOAK_BOUND:-1e-5}" <<'PY'
import glob, math, os, sys
import h5py, numpy as np

steps = int(sys.argv[1])
bound = float(sys.argv[3])
# Each segment as world_size:first_step:trained (1 when it finished a step).
segments = [tuple(int(x) for x in seg.split(":")) for seg in sys.argv[2].split()]

def rows(path):
    with h5py.File(path, "r") as f:
        s = f["steps"][:]
    return {int(r["step"]): (float(r["loss"]), float(r["grad_norm"])) for r in s}

ref = rows("results/reference/trace.rank0.h5")
seen = {}
for path in sorted(glob.glob("results/soak/trace.rank0*.h5")):
    for step, v in rows(path).items():
        seen.setdefault(step, []).append((path, v))
missing = [s for s in range(steps) if s not in seen]
twice = {s: [p for p, _ in v] for s, v in seen.items() if len(v) > 1}
print(f"steps in the traces: {len(seen)} of {steps}, missing {len(missing)}, "
      f"more than once {len(twice)} ({len(glob.glob('results/soak/trace.rank0*.h5'))} trace files)")
for s in missing[:5]:
    print(f"  missing step {s}")
for s, ps in list(twice.items())[:5]:
    print(f"  step {s} in {ps}")

# The first step trained on another world size than the first segment's:
# from there on the sums run in another order than the reference's.
first_change = steps
for size, start, trained in segments:
    if size != segments[0][0] and trained:
        first_change = min(first_change, start)
exact = [s for s in range(min(first_change, steps)) if s in seen]
unequal = [s for s in exact if seen[s][0][1] != ref[s]]
print(f"steps before any change of world size: {len(exact)}, bit for bit equal to the "
      f"uninterrupted run: {len(exact) - len(unequal)}")
for s in unequal[:5]:
    print(f"  step {s}: {seen[s][0][1]} vs {ref[s]}")
later = [s for s in range(first_change, steps) if s in seen]
outside = []
if later:
    diff = {s: abs(seen[s][0][1][0] - ref[s][0]) / abs(ref[s][0]) for s in later}
    outside = [s for s in later if not diff[s] <= bound]
    worst = max(later, key=lambda s: diff[s])
    median = sorted(diff.values())[len(later) // 2]
    print(f"steps after a change of world size: {len(later)}, within {bound:g} of the "
          f"reference's loss: {len(later) - len(outside)} (relative difference: median "
          f"{median:.3g}, largest {diff[worst]:.3g} at step {worst})")
    for s in outside[:5]:
        print(f"  step {s}: {seen[s][0][1][0]} vs {ref[s][0]}")

partial = [d for d in glob.glob("results/soak/checkpoints/step-*")
           if not os.path.isfile(os.path.join(d, "trainer_state.json"))]
temps = [p for p in glob.glob("results/soak/checkpoints/**/*", recursive=True) if ".tmp" in p]
print(f"checkpoint folders: {len(glob.glob('results/soak/checkpoints/step-*'))}, partial: "
      f"{len(partial)}, temporaries: {len(temps)}")
ok = not missing and not twice and not unequal and not outside and not partial and not temps
sys.exit(0 if ok else 1)
PY
check=$?
if ((${#lost[@]})); then
  printf '%s\n' "${lost[@]}" | sort -n | awk -v n="${#lost[@]}" '
    {v[NR] = $1} END {printf "time lost per preemption (signal to the resumed run'"'"'s first step): median %.2f s, %.2f to %.2f s over %d restarts\n",
      (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), v[1], v[n], n}'
fi
printf 'signals: %d (%d inside a checkpoint save), segments: %d, world sizes: %s; the uninterrupted run took %s s\n' \
  "$signals" "$in_save" "$segment" "${sizes_used[*]}" "$reference_seconds"
exit $check
