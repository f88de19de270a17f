#!/usr/bin/env bash
# What batch.pad_to_multiple_of buys on the cpu backend: the quickstart
# trained with its micro-batches at whatever token count the data gives
# (m = 0) and padded to a multiple of 64 (m = 64, what the quickstart sets),
# in packed mode (the quickstart's bins of <= 2048 tokens) and padded mode
# (4 rows to the longest), fp32 and bf16. Every new token count is a new
# shape for each gemm of the step, and oneDNN makes (JIT-compiles) a
# primitive per shape (docs/backend.md, "gemm on cpu").
#
# Prints a Markdown table: distinct micro-batch token counts and oneDNN
# primitives made in the run (one extra run per row with ONEDNN_VERBOSE=2),
# tokens computed per target token, and the median tokens/s (target tokens)
# over steps 3.. of each round, the rounds alternating m = 0 and m = 64 so
# that drift in a noisy machine's speed hits both alike.
#
#   bash bench/shape_bench.sh [steps] [rounds]   (repository root, after a build)
#
# HEADROOM=build-avx2/headroom measures another build.
set -euo pipefail
steps=${1:-40}
rounds=${2:-3}
bin=$(realpath "${HEADROOM:-build/headroom}")
. "$(dirname "$0")/lib.sh"
bench_enter_scratch

run() {  # name mode dtype multiple [extra --set ...]
  local name=$1 mode=$2 dtype=$3 m=$4
  local -a shape=(--set batch.mode="\"$mode\"")
  [ "$mode" = padded ] && shape+=(--set batch.micro_batch_size=4)
  "$bin" train --overwrite --set run.name="\"$name\"" --set run.steps="$steps" \
    --set model.dtype="\"$dtype\"" --set batch.pad_to_multiple_of="$m" "${shape[@]}" \
    --set memory.device_capacity=0 > "$name.log" 2>&1
}

medians() {  # name -> "tok/s tokens-computed-per-counted"
  echo "$(bench_trace_rate "results/$1/trace.rank0.h5") $(/usr/bin/python3 - "$1" <<'PY'
import sys, h5py
with h5py.File(f"results/{sys.argv[1]}/trace.rank0.h5", "r") as f:
    s = f["steps"][:]
print(f"{s['padded_tokens'].sum() / s['tokens'].sum():.4f}")
PY
)"
}

# The quickstart's data, made once outside the timed runs.
"$bin" train --set run.steps=2 --set schedule.warmup_steps=1 > /dev/null 2>&1

printf 'host: %s, %s, %s steps, %s rounds\n\n' \
  "$(bench_host)" "$bin" "$steps" "$rounds"
printf '| mode | dtype | m | token counts | primitives made | tokens computed / targets | tok/s per round | median | ratio |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for mode in packed padded; do
  for dtype in fp32 bf16; do
    declare -A rates=()
    for ((r = 0; r < rounds; ++r)); do
      for m in 0 64; do
        run "$mode-$dtype-$m-$r" "$mode" "$dtype" "$m"
        rates[$m]+="$(medians "$mode-$dtype-$m-$r" | cut -d' ' -f1) "
      done
    done
    base=""
    for m in 0 64; do
      ONEDNN_VERBOSE=2 run "$mode-$dtype-$m-verbose" "$mode" "$dtype" "$m"
      made=$(grep -c ',create:' "$mode-$dtype-$m-verbose.log" || true)
      counts=$("$bin" data batches --set batch.mode="\"$mode\"" --set batch.pad_to_multiple_of="$m" \
        $([ "$mode" = padded ] && echo --set batch.micro_batch_size=4) --steps "$steps" --json |
        /usr/bin/python3 -c 'import json, sys
j = json.load(sys.stdin)
print(len({b["tokens"] for s in j["steps"] for r in s["ranks"] for b in r["micro_batches"]}))')
      ratio=$(medians "$mode-$dtype-$m-0" | cut -d' ' -f2)
      median=$(echo "${rates[$m]}" | bench_median)
      [ -z "$base" ] && base=$median
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$mode" "$dtype" "$m" "$counts" \
        "$made" "$ratio" "$(echo ${rates[$m]} | tr ' ' '/')" "$median" \
        "$(awk -v a="$median" -v b="$base" 'BEGIN {printf "%.2f", a / b}')"
    done
    unset rates
  done
done
