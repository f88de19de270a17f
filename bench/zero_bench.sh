#!/usr/bin/env bash
# Data-parallel training under mpirun on the cpu backend: tokens/s of the
# whole job and each rank's memory, for ZeRO stages 0-3 (and stage 3 with the
# optimizer offloaded) at N = 1, 2, 4 ranks. The global batch is fixed
# (grad_accum = 4 / N micro-batches of 512 tokens per rank), so every row
# trains on the same data; the OpenMP threads are split so the N ranks share
# the machine's cores. Medians over the steps after the first. Then the same
# stages planned (meta backend, `plan --world-size N`) for a model where the
# model states dominate. Prints Markdown tables.
#
#   bash bench/zero_bench.sh [steps] [preset] [plan preset]   (repository root, after a build)
set -euo pipefail
steps=${1:-8}
preset=${2:-tiny}
plan_preset=${3:-qwen3-8b}
bin=$(pwd)/build/headroom
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

common=(--set model.preset="$preset" --set model.dtype=bf16 --set run.steps="$steps"
  --set schedule.warmup_steps=1 --set batch.max_tokens_per_micro_batch=512
  --set data.max_sample_tokens=512 --set loss.chunk_size=512 --set memory.device_capacity=0
  --set memory.allocator=exact)
# The corpus once, outside the timed runs.
"$bin" plan "${common[@]}" --set run.steps=1 --set run.name=corpus > corpus.log 2>&1

# Model-state bytes one rank holds after init (allocated minus freed in phase
# init), by category, from a trace's memory events.
cat > state.py <<'PY'
import h5py, numpy as np
def model_state(path):
    with h5py.File(path, "r") as f:
        ev = f["memory/events"][:]
    init = ev[(ev["phase"] == 0) & (ev["step"] == -1)]   # before step 0; the end frees in init too
    sign = np.where(init["action"] == 0, 1, np.where(init["action"] == 1, -1, 0))
    signed = init["bytes"].astype(np.int64) * sign
    return {c: int(signed[init["category"] == code].sum())
            for c, code in (("param", 0), ("grad", 1), ("optim", 2))}
mib = lambda b: f"{b / 2**20:.1f} MiB"
gib = lambda b: f"{b / 2**30:.2f} GiB"
PY

printf '| zero | ranks | threads/rank | job tok/s (median) | step s (median) | param / grad / optim per rank (rank 0) | peak allocated, max over ranks |\n'
printf '|---|---|---|---|---|---|---|\n'
for zero in "stage=0" "stage=1" "stage=2" "stage=3" "stage=3 offload"; do
  stage=${zero#stage=}; stage=${stage%% *}
  offload=false; [[ $zero == *offload* ]] && offload=true
  for n in 1 2 4; do
    threads=$(( cores / n > 0 ? cores / n : 1 ))
    name="z$stage-$offload-n$n"
    mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=$threads -np "$n" \
      "$bin" train "${common[@]}" --set zero.stage="$stage" --set zero.offload_optimizer=$offload \
      --set batch.grad_accum=$((4 / n)) --set run.name="$name" > "$name.log" 2>&1
    PYTHONPATH=. /usr/bin/python3 - "$name" "$zero" "$n" "$threads" <<'PY'
import sys, h5py, numpy as np
from state import model_state, mib
name, zero, n, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
seconds, tokens, alloc = [], [], 0
for r in range(n):
    with h5py.File(f"results/{name}/trace.rank{r}.h5", "r") as f:
        s = f["steps"][:]
    seconds.append(s["step_seconds"][1:])
    tokens.append(s["padded_tokens"][1:])
    alloc = max(alloc, int(s["peak_allocated"].max()))
state = model_state(f"results/{name}/trace.rank0.h5")
step = np.max(np.stack(seconds), axis=0)           # a step ends when the slowest rank ends
job = np.sum(np.stack(tokens), axis=0) / step
print(f"| {zero} | {n} | {threads} | {np.median(job):.0f} | {np.median(step):.3f} | "
      f"{mib(state['param'])} / {mib(state['grad'])} / {mib(state['optim'])} | {mib(alloc)} |")
PY
  done
done

printf '\n%s bf16, one 2048-token micro-batch per rank, full activation checkpointing, loss chunks of 1024 (plan, rank 0):\n\n' "$plan_preset"
printf '| zero | ranks | param / grad / optim per rank | peak allocated | peak by phase (largest) |\n'
printf '|---|---|---|---|---|\n'
for zero in "stage=0" "stage=1" "stage=2" "stage=3" "stage=3 offload"; do
  stage=${zero#stage=}; stage=${stage%% *}
  offload=false; [[ $zero == *offload* ]] && offload=true
  for n in 1 8; do
    name="plan-z$stage-$offload-n$n"
    "$bin" plan --set model.preset="$plan_preset" --set model.dtype=bf16 --set run.steps=1 \
      --set schedule.warmup_steps=0 --set batch.max_tokens_per_micro_batch=2048 \
      --set data.max_sample_tokens=2048 --set loss.chunk_size=1024 \
      --set checkpoint.activations=full --set memory.device_capacity=0 \
      --set memory.allocator=exact --set zero.stage="$stage" --set zero.offload_optimizer=$offload \
      --world-size "$n" --set run.name="$name" > "$name.log" 2>&1
    PYTHONPATH=. /usr/bin/python3 - "$name" "$zero" "$n" <<'PY'
import sys, h5py
from state import model_state, gib
name, zero, n = sys.argv[1], sys.argv[2], sys.argv[3]
path = f"results/{name}/plan.rank0.h5"
state = model_state(path)
with h5py.File(path, "r") as f:
    s = f["steps"][:]
    peaks = f["memory/phase_peaks"][:]
names = ["init", "forward", "backward", "loss", "optimizer", "gather", "reduce"]
top = max(peaks, key=lambda p: p["peak_allocated"])
print(f"| {zero} | {n} | {gib(state['param'])} / {gib(state['grad'])} / {gib(state['optim'])} | "
      f"{gib(int(s['peak_allocated'].max()))} | {names[top['phase']]} |")
PY
  done
done
