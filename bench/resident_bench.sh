#!/usr/bin/env bash
# Private resident memory over the plan's peak reserved, and tokens/s, for
# two headroom binaries side by side: the quickstart on the cpu with
# oneDNN's default kernels for this host and with its AVX2 kernels
# (DNNL_MAX_CPU_ISA=AVX2), the binaries' runs alternated so that the
# machine's load falls on both alike. Prints a Markdown table of medians.
#
#   bash bench/resident_bench.sh BIN_A BIN_B [runs] [steps]   (after a build)
set -euo pipefail
a=$(realpath "$1") b=$(realpath "$2")
runs=${3:-3} steps=${4:-30}
. "$(dirname "$0")/lib.sh"
bench_enter_scratch

measure() {  # bin isa -> "ratio tok/s"
  env ${2:+DNNL_MAX_CPU_ISA=$2} "$1" train --overwrite --set run.steps="$steps" \
    --set schedule.warmup_steps=2 > run.log 2>&1
  echo "$(bench_rss_ratio run.log) $(bench_trace_rate results/quickstart/trace.rank0.h5 1)"
}

printf '| kernels | binary | rss/plan (median of %d) | median tok/s | runs (ratio, tok/s) |\n' "$runs"
printf '|---|---|---|---|---|\n'
for isa in "" AVX2; do
  declare -A ratios=() rates=() all=()
  for ((r = 0; r < runs; ++r)); do
    for name in A B; do
      bin=$a; [ "$name" = B ] && bin=$b
      read -r ratio rate < <(measure "$bin" "$isa")
      ratios[$name]+="$ratio " rates[$name]+="$rate " all[$name]+="($ratio, $rate) "
    done
  done
  for name in A B; do
    bin=$a; [ "$name" = B ] && bin=$b
    printf '| %s | %s | %s | %s | %s|\n' "${isa:-default}" "$name: $(basename "$bin")" \
      "$(echo "${ratios[$name]}" | bench_median)" "$(echo "${rates[$name]}" | bench_median)" "${all[$name]}"
  done
  unset ratios rates all
done
