#!/usr/bin/env bash
# Does length grouping change what the model learns (issue 45)? The
# quickstart (a tiny Qwen3 on an order-1 Markov source, packed bins of 2048
# tokens) trained for [steps] steps packed, as it ships, against padded rows
# grouped by length (batch.mode = "padded", batch.group_pool = 50: each
# micro-batch holds as many rows as fit 2048 tokens after padding to its
# longest row), with the same seeds, schedule and token budget, for each of
# [seeds] data seeds (data.seed; the model's seed stays the quickstart's).
#
# Grouped micro-batches hold rows of similar length, so a step sees fewer,
# more alike documents than a packed bin does; "the same curve in
# expectation" means the final losses (mean of the last 20 steps' loss per
# real token, from the trace) agree within 2%.
#
# Prints a Markdown table per seed and rule: target tokens per step (median),
# padding share, the loss at steps 50, 100 and the final mean, and the
# grouped / packed ratio of the final means.
#
#   bash bench/grouping_loss_bench.sh [steps] [seeds]   (repository root, after a build)
set -euo pipefail
steps=${1:-200}
seeds=${2:-2}
bin=$(realpath "${HEADROOM:-build/headroom}")
. "$(dirname "$0")/lib.sh"
bench_enter_scratch

# name, then --set arguments -> "median_tokens padding loss50 loss100 final"
run() {
  local name=$1
  shift
  "$bin" train --overwrite --set run.name="\"$name\"" --set run.steps="$steps" \
    --set trace.memory_events=false "$@" > "$name.log" 2>&1 ||
    { tail -20 "$name.log" >&2; exit 1; }
  /usr/bin/python3 - "results/$name/trace.rank0.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    s = f["steps"][:]
loss = s["loss"]
pad = s["padding_fraction"] if "padding_fraction" in s.dtype.names else np.zeros(len(s))
at = lambda k: loss[min(k, len(loss)) - 1]
print(f"{np.median(s['tokens']):.0f} {100 * np.mean(pad):.1f} {at(50):.4f} {at(100):.4f} "
      f"{np.mean(loss[-20:]):.4f}")
PY
}

printf 'host: %s, %s, %s steps\n\n' "$(bench_host)" "$bin" "$steps"
printf '| data.seed | batching | target tokens / step | padding | loss @50 | loss @100 | final (last 20) | grouped / packed |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for ((seed = 7; seed < 7 + seeds; ++seed)); do
  # Each seed synthesizes its own corpus (same source, other documents).
  data=(--set data.seed="$seed" --set data.path="\"data-$seed.h5\"")
  read -r pt pp p50 p100 pf < <(run "packed-$seed" "${data[@]}")
  read -r gt gp g50 g100 gf < <(run "grouped-$seed" "${data[@]}" --set batch.mode='"padded"' \
    --set batch.group_pool=50)
  ratio=$(/usr/bin/python3 -c "print(f'{$gf / $pf:.4f}')")
  printf '| %s | packed (pad_to_multiple_of 64) | %s | %s%% | %s | %s | %s | |\n' \
    "$seed" "$pt" "$pp" "$p50" "$p100" "$pf"
  printf '| %s | padded, group_pool = 50 | %s | %s%% | %s | %s | %s | %s |\n' \
    "$seed" "$gt" "$gp" "$g50" "$g100" "$gf" "$ratio"
done
