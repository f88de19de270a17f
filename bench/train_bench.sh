#!/usr/bin/env bash
# Training throughput and peak memory on the cpu backend, fp32 and bf16, for
# the ~3M-parameter quickstart model at 512-token micro-batches and the ~50M
# `small-50m` preset at 2048. Prints a Markdown table of medians over the
# steps after the first (which builds oneDNN primitives).
#
#   bash bench/train_bench.sh [steps]        (from the repository root, after a build)
set -euo pipefail
steps=${1:-8}
bin=$(pwd)/build/headroom
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

run() {  # name preset tokens dtype
  "$bin" train --overwrite --set run.name="$1" --set model.preset="$2" \
    --set batch.max_tokens_per_micro_batch="$3" --set data.max_sample_tokens="$3" \
    --set model.dtype="$4" --set run.steps="$steps" --set schedule.warmup_steps=1 \
    --set memory.device_capacity=0 --set loss.chunk_size=512 > "$1.log" 2>&1
}

printf '| model | params | tokens/step | dtype | median tok/s | median step s | peak allocated | peak reserved |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for spec in "tiny 512" "small-50m 2048"; do
  set -- $spec
  for dtype in fp32 bf16; do
    name="$1-$2-$dtype"
    run "$name" "$1" "$2" "$dtype"
    /usr/bin/python3 - "$name" "$1" "$2" "$dtype" <<'PY'
import sys, h5py, numpy as np
name, preset, tokens, dtype = sys.argv[1:]
with h5py.File(f"results/{name}/trace.rank0.h5", "r") as f:
    s = f["steps"][:]
line = next(l for l in open(f"{name}.log") if "parameters)" in l)
params = line.split("(")[1].split(",")[1].strip().split()[0]
rest = s[1:] if len(s) > 1 else s
gib = lambda b: f"{b / 2**20:.1f} MiB"
print(f"| {preset} | {params} | {tokens} | {dtype} | {np.median(rest['tokens_per_second']):.0f} | "
      f"{np.median(rest['step_seconds']):.3f} | {gib(s['peak_allocated'].max())} | "
      f"{gib(s['peak_reserved'].max())} |")
PY
  done
done
