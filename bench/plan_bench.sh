#!/usr/bin/env bash
# How long `headroom plan` takes for qwen3-8b (bf16) with 4096-token
# micro-batches: every allocation of 2 training steps on the meta backend.
# Target: under 2 s. Prints the median of 5 runs and the planned peaks.
#
#   bash bench/plan_bench.sh                 (from the repository root, after a build)
#
# HEADROOM=other/headroom times another binary.
set -euo pipefail
bin=$(realpath "${HEADROOM:-build/headroom}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
args=(--overwrite --set run.name=plan8b --set model.preset=qwen3-8b --set model.dtype=bf16
      --set batch.max_tokens_per_micro_batch=4096 --set run.steps=2 --set schedule.warmup_steps=1
      --set memory.device_capacity=0 --set loss.chunk_size=1024)
"$bin" plan "${args[@]}" > first.log  # also synthesizes the corpus once
times=()
for i in 1 2 3 4 5; do
  t0=$(date +%s%N)
  "$bin" plan "${args[@]}" > plan.log
  t1=$(date +%s%N)
  times+=($(( (t1 - t0) / 1000000 )))
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
events=$(grep -m1 "events replayed" plan.log | awk '{print $2}')
peak=$(grep -m1 "^plan: peak allocated" plan.log | sed 's/^plan: //')
printf '| model | tokens/micro-batch | steps | events | median wall ms (5 runs) | planned |\n'
printf '|---|---|---|---|---|---|\n'
printf '| qwen3-8b bf16 | 4096 | 2 | %s | %s | %s |\n' "$events" "${sorted[2]}" "$peak"
