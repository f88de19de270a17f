#!/usr/bin/env bash
# Data-parallel training under mpirun on the cpu backend: tokens/s of the
# whole job and each rank's peak, for ZeRO stages 0 and 1 at N = 1, 2, 4
# ranks. The global batch is fixed (grad_accum = 4 / N micro-batches of 512
# tokens per rank), so every row trains on the same data; the OpenMP threads
# are split so the N ranks share the machine's cores. Medians over the steps
# after the first. Prints a Markdown table.
#
#   bash bench/zero_bench.sh [steps] [preset]     (repository root, after a build)
set -euo pipefail
steps=${1:-8}
preset=${2:-tiny}
bin=$(pwd)/build/headroom
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

common=(--set model.preset="$preset" --set model.dtype=bf16 --set run.steps="$steps"
  --set schedule.warmup_steps=1 --set batch.max_tokens_per_micro_batch=512
  --set data.max_sample_tokens=512 --set loss.chunk_size=512 --set memory.device_capacity=0)
# The corpus once, outside the timed runs.
"$bin" plan "${common[@]}" --set run.steps=1 --set run.name=corpus > corpus.log 2>&1

printf '| zero.stage | ranks | threads/rank | job tok/s (median) | step s (median) | peak allocated, max over ranks | optim per rank | peak reserved, max over ranks |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for stage in 0 1; do
  for n in 1 2 4; do
    threads=$(( cores / n > 0 ? cores / n : 1 ))
    name="z$stage-n$n"
    mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=$threads -np "$n" \
      "$bin" train "${common[@]}" --set zero.stage="$stage" --set batch.grad_accum=$((4 / n)) \
      --set run.name="$name" > "$name.log" 2>&1
    /usr/bin/python3 - "$name" "$stage" "$n" "$threads" <<'PY'
import sys, h5py, numpy as np
name, stage, n, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
seconds, tokens, alloc, reserved, optim = [], [], 0, 0, 0
for r in range(n):
    with h5py.File(f"results/{name}/trace.rank{r}.h5", "r") as f:
        s = f["steps"][:]
        ev = f["memory/events"][:] if "memory/events" in f else None
    seconds.append(s["step_seconds"][1:])
    tokens.append(s["padded_tokens"][1:])
    alloc = max(alloc, int(s["peak_allocated"].max()))
    reserved = max(reserved, int(s["peak_reserved"].max()))
    if ev is not None and r == 0:
        names = ev.dtype.names
        optim = int(ev["bytes"][(ev["category"] == 2) & (ev["action"] == 0) & (ev["phase"] == 0)].sum())
step = np.max(np.stack(seconds), axis=0)           # a step ends when the slowest rank ends
job = np.sum(np.stack(tokens), axis=0) / step
mib = lambda b: f"{b / 2**20:.1f} MiB"
print(f"| {stage} | {n} | {threads} | {np.median(job):.0f} | {np.median(step):.3f} | {mib(alloc)} | "
      f"{mib(optim)} | {mib(reserved)} |")
PY
  done
done
