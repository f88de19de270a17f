#!/usr/bin/env bash
# What padded micro-batches waste on padding, by how they group lengths
# (issue 45): plain padded rows (batch.micro_batch_size rows to the longest),
# fixed power-of-two buckets (batch.buckets = [16, 32, ..., 16384]),
# batch.buckets = "auto" (length quantiles), and length grouping
# (batch.group_pool = 50, Hugging Face's megabatch), on two synthetic mixes of
# 600 documents: lognormal (median 900, sigma 1.0, 16-16384 tokens) and
# uniform 16-16384. Only the plan is made (`headroom data batches`, no token
# is read or trained on): 2 ranks, a token budget of 16384 per micro-batch,
# the quickstart's other batch settings (pad_to_multiple_of = 64).
#
# Prints a Markdown table: micro-batches and tokens of the listed steps, the
# padding share (padding tokens / padded tokens), the mean micro-batch's
# tokens (how full the budget is) and the rank balance. Plain padded rows
# take floor(budget / mean length) rows per micro-batch, so that they hold
# about one budget of tokens before padding.
#
#   bash bench/padding_bench.sh [steps] [pad_to_multiple_of]   (repository root, after a build)
#
# HEADROOM=build-avx2/headroom measures another build.
set -euo pipefail
steps=${1:-40}
multiple=${2:-64}
budget=16384
bin=$(realpath "${HEADROOM:-build/headroom}")
. "$(dirname "$0")/lib.sh"
bench_enter_scratch

powers=16
for ((b = 32; b <= budget; b *= 2)); do powers+=", $b"; done

# name of the row, then --set arguments -> one table row
row() {
  local mix=$1 name=$2
  shift 2
  "$bin" data batches --set data.path="\"$mix.h5\"" --set batch.mode='"padded"' \
    --set batch.max_tokens_per_micro_batch=$budget --set batch.pad_to_multiple_of="$multiple" \
    --world-size 2 --steps "$steps" --json "$@" > "$mix-$name.json"
  /usr/bin/python3 - "$mix" "$name" "$mix-$name.json" <<'PY'
import json, sys
mix, name, path = sys.argv[1:]
t = json.load(open(path))["total"]
share = t["padding"] / t["tokens"]
print(f"| {mix} | {name} | {t['micro_batches']} | {t['tokens']} | {100 * share:.1f}% "
      f"| {t['tokens'] / t['micro_batches']:.0f} | {100 * t['rank_balance']:.1f}% |")
PY
}

"$bin" data synth lognormal.h5 --vocab 512 --documents 600 \
  --lengths lognormal:900,1.0,16-16384 > /dev/null
"$bin" data synth uniform.h5 --vocab 512 --documents 600 --lengths uniform:16-16384 > /dev/null

printf 'host: %s, %s, %s steps, 2 ranks, budget %s tokens, pad_to_multiple_of %s\n\n' \
  "$(bench_host)" "$bin" "$steps" "$budget" "$multiple"
printf '| mix | batching | micro-batches | tokens | padding | tokens / micro-batch | rank balance |\n'
printf '|---|---|---|---|---|---|---|\n'
for mix in lognormal uniform; do
  mean=$("$bin" data inspect "$mix.h5" --json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["lengths"]["mean"])')
  rows=$(/usr/bin/python3 -c "print(max(1, int($budget // $mean)))")
  row "$mix" "plain, $rows rows" --set batch.micro_batch_size="$rows"
  row "$mix" "buckets 16..$budget (powers of 2)" --set "batch.buckets=[$powers]"
  row "$mix" 'buckets "auto"' --set 'batch.buckets="auto"'
  row "$mix" "group_pool = 50" --set batch.group_pool=50
  row "$mix" "group_pool = 10" --set batch.group_pool=10
done
