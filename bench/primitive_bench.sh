#!/usr/bin/env bash
# How many oneDNN primitives two headroom binaries make (JIT-compile) and
# keep, and what that does to tokens/s and to the resident set, on the
# quickstart's model under the batch shapes that decide it: packed bins
# padded to 64 (one shape, what the quickstart does), padded rows to the
# longest (4 rows, rounded to 64: a few shapes), length buckets ("auto": a
# few shapes drawn at random) and LoRA on all seven projections (25 gemm
# keys a step). Written for GemmPlans' rule of how many primitives to keep
# (docs/backend.md, "gemm on cpu"); making one costs ~0.4 ms here and ~5.5
# ms for a bf16 brgemm on an AMX host, so the table matters most there.
#
# Prints a Markdown table: per shape, dtype and binary, the primitives made
# in the run (a separate run with ONEDNN_VERBOSE=2), the private resident
# set over the allocator's peak reserved (the run's own "rss check" line,
# median of the rounds) and the median tokens/s (target tokens) over steps
# 3.. of each round, A and B alternated round by round so that the
# machine's drift falls on both alike, then B / A.
#
#   bash bench/primitive_bench.sh BIN_A BIN_B [steps] [rounds]   (after a build)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench/primitive_bench.sh BIN_A BIN_B [steps] [rounds]" >&2; exit 2; }
a=$(realpath "$1") b=$(realpath "$2")
steps=${3:-40}
rounds=${4:-3}
. "$(dirname "$0")/lib.sh"
bench_enter_scratch

shape_sets() {  # shape -> its --set arguments
  case $1 in
    packed) ;;
    padded) echo "--set batch.mode=\"padded\" --set batch.micro_batch_size=4" ;;
    buckets) echo "--set batch.mode=\"padded\" --set batch.buckets=\"auto\"" ;;
    lora)
      echo "--set lora.enabled=true --set lora.targets=[\"q_proj\",\"k_proj\",\"v_proj\",\"o_proj\",\"gate_proj\",\"up_proj\",\"down_proj\"]"
      ;;
  esac
}

run() {  # bin name shape dtype
  # shellcheck disable=SC2046  # the shape's --set words split on purpose
  "$1" train --overwrite --set run.name="\"$2\"" --set run.steps="$steps" \
    --set schedule.warmup_steps=2 --set model.dtype="\"$4\"" $(shape_sets "$3") \
    > "$2.log" 2>&1
}

measure() {  # name -> "rss/plan tok/s"
  echo "$(bench_rss_ratio "$1.log") $(bench_trace_rate "results/$1/trace.rank0.h5")"
}

# The quickstart's data, made once outside the timed runs.
"$a" train --set run.steps=2 --set schedule.warmup_steps=1 > /dev/null 2>&1

printf 'host: %s; A = %s, B = %s; %s steps, %s rounds\n\n' \
  "$(bench_host)" "$a" "$b" "$steps" "$rounds"
printf '| shape | dtype | binary | primitives made | rss/plan | tok/s per round | median tok/s | B / A |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for shape in packed padded buckets lora; do
  for dtype in fp32 bf16; do
    declare -A rates=() ratios=()
    for ((r = 0; r < rounds; ++r)); do
      for name in A B; do
        bin=$a; [ $name = B ] && bin=$b
        run "$bin" "$shape-$dtype-$name-$r" "$shape" "$dtype"
        read -r ratio rate < <(measure "$shape-$dtype-$name-$r")
        rates[$name]+="$rate " ratios[$name]+="$ratio "
      done
    done
    base=""
    for name in A B; do
      bin=$a; [ $name = B ] && bin=$b
      ONEDNN_VERBOSE=2 run "$bin" "$shape-$dtype-$name-verbose" "$shape" "$dtype"
      made=$(grep -c ',create:' "$shape-$dtype-$name-verbose.log" || true)
      rate=$(echo "${rates[$name]}" | bench_median)
      [ -z "$base" ] && base=$rate
      printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$shape" "$dtype" "$name" "$made" \
        "$(echo "${ratios[$name]}" | bench_median)" "$(echo ${rates[$name]} | tr ' ' '/')" "$rate" \
        "$(awk -v x="$rate" -v y="$base" 'BEGIN {printf "%.2f", x / y}')"
    done
    unset rates ratios
  done
done
