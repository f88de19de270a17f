#!/usr/bin/env bash
# How long the advice after an OOM takes (issue goal: an 8B OOM advised in
# under 2 s, each counterfactual plan well under 100 ms) and `fit`'s search:
# each seed experiment pushed into its seed's OOM, timed end to end (the
# plan that runs out, the why, every counterfactual plan) and as the advice's
# own figure ("N plans in X s"), median of 5 runs each.
#
#   bash bench/advice_bench.sh     (from the repository root, after a build)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
root=$(pwd)
bin=${HEADROOM:-$root/build/headroom}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
seeds=$root/experiments/postmortems


# case name | headroom arguments
cases=(
  "seed004 no checkpointing|plan $seeds/seed004_lora_24gb.toml --set checkpoint.activations=none"
  "seed001 loss.mode=save|plan $seeds/seed001_chunked_loss.toml --set loss.mode=save"
  "seed003 no offload, 40 GiB|plan $seeds/seed003_offload_7b.toml --set zero.offload_optimizer=false"
  "seed000 ZeRO-2, 2 ranks, 14 GiB|plan $seeds/seed000_zero3_lora.toml --world-size 2 --set memory.device_capacity=14GiB"
  "fit seed004 token budget|fit $seeds/seed004_lora_24gb.toml --set batch.mode=packed --set batch.micro_batch_size=0 --vary batch.max_tokens_per_micro_batch"
  "fit seed004 --search|fit $seeds/seed004_lora_24gb.toml --search"
)
# plans replace their earlier folder; fit writes none.
overwrite() { case "$1" in plan*) echo --overwrite ;; esac; }
for c in "${cases[@]}"; do $bin ${c#*|} $(overwrite "${c#*|}") > /dev/null 2>&1 || true; done  # corpora made

echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
printf '| %-32s | %6s | %12s | %15s | %13s |\n' case plans "wall (s)" "advice/fit (s)" "ms per plan"
printf '|%s|%s|%s|%s|%s|\n' "----------------------------------" "--------" "--------------" "-----------------" "---------------"
for c in "${cases[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  walls=() inner=() plans=0
  for i in 1 2 3 4 5; do
    t0=$(date +%s.%N)
    $bin $args $(overwrite "$args") > out.txt 2> err.txt || true
    t1=$(date +%s.%N)
    walls+=("$(echo "$t1 - $t0" | bc)")
    line=$(grep -h -o -E '\(([0-9]+) plans in [0-9.]+ s\)|: [0-9]+ plans in [0-9.]+ s|[0-9]+ of [0-9]+ combinations fit \([0-9.]+ s\)' out.txt err.txt | head -1)
    case "$line" in
      *combinations*) plans=$(echo "$line" | sed -E 's/[0-9]+ of ([0-9]+) .*/\1/'); s=$(echo "$line" | sed -E 's/.*\(([0-9.]+) s\)/\1/') ;;
      *) plans=$(echo "$line" | sed -E 's/[^0-9]*([0-9]+) plans.*/\1/'); s=$(echo "$line" | sed -E 's/.* in ([0-9.]+) s.*/\1/') ;;
    esac
    inner+=("$s")
  done
  wall=$(printf '%s\n' "${walls[@]}" | bench_median)
  adv=$(printf '%s\n' "${inner[@]}" | bench_median)
  per=$(echo "scale=1; 1000 * $adv / $plans" | bc)
  printf '| %-32s | %6s | %12.2f | %15.2f | %13s |\n' "$name" "$plans" "$wall" "$adv" "$per"
done
