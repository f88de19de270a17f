#!/usr/bin/env bash
# headroom against PyTorch on packed batches, the shapes a user's data gives
# (issue 45): the quickstart as it ships (the tiny Qwen3, packed bins of
# <= 2048 tokens padded to a multiple of 64, document mask, block-sparse
# attention) against bench/torch_qwen3_step.py training one [1, 2048] row
# per step made of the same bins (`headroom data batches` of the same
# config: the documents' lengths, the padding as a segment of its own),
# each document attending causally within itself through an additive
# block-diagonal mask and its rotary positions restarting (eager attention,
# as Hugging Face runs a packed row without flash-attn; Debian's PyTorch 1.13
# has no SDPA). Both sides as bench/torch_peer_bench.sh sets them: AdamW,
# 2 threads, no gradient clipping, the whole loss at once (loss.chunk_size =
# 0), fp32 and bf16 (PyTorch: torch.autocast).
#
# Prints a Markdown table: median tokens/s (all tokens of the row, padding
# included, on both sides) over the steps after the first two, per round
# alternating the two systems, their medians and the ratio; and for headroom
# one more run of 100 steps with ONEDNN_VERBOSE=2: the distinct token counts
# of its micro-batches and the oneDNN primitives made.
#
# PyTorch runs [torch_steps] steps (default 5, the first untimed): Debian's
# PyTorch takes seconds per 2048-token step on a 2-core host.
#
#   bash bench/packed_peer_bench.sh [steps] [rounds] [torch_steps]   (repository root, after a build)
set -euo pipefail
steps=${1:-20}
rounds=${2:-3}
torch_steps=${3:-5}
bin=$(realpath "${HEADROOM:-build/headroom}")
bench_dir=$(cd "$(dirname "$0")" && pwd)
. "$bench_dir/lib.sh"
bench_enter_scratch
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2

common=(--set loss.chunk_size=0 --set optimizer.grad_clip=0 --set memory.device_capacity=0
  --set schedule.warmup_steps=1)

# The quickstart's data, made once outside the timed runs.
"$bin" train --set run.steps=2 "${common[@]}" > /dev/null 2>&1

# The bins of the first 20 steps (the most `data batches` prints), as lengths
# of documents plus the padding segment; PyTorch cycles through them.
"$bin" data batches --steps 20 --json > batches.json
/usr/bin/python3 - <<'PY'
import json, h5py
j = json.load(open("batches.json"))
with h5py.File("results/data/quickstart-markov.h5", "r") as f:
    offsets = f["offsets"][:]
bins = []
for s in j["steps"]:
    for r in s["ranks"]:
        for b in r["micro_batches"]:
            assert b["truncated"] == 0, "the quickstart truncates nothing"
            lengths = [int(offsets[d + 1] - offsets[d]) for d in b["document_indices"]]
            assert sum(lengths) + b["padding"] == b["tokens"], b
            bins.append(lengths + ([b["padding"]] if b["padding"] else []))
assert len({sum(b) for b in bins}) == 1, "PyTorch's row needs one token count"
json.dump(bins, open("bins.json", "w"))
PY
row=$(/usr/bin/python3 -c 'import json; print(sum(json.load(open("bins.json"))[0]))')

headroom_run() {  # dtype name [steps] -> median tok/s
  "$bin" train --overwrite --set run.name="\"$2\"" --set model.dtype="\"$1\"" \
    --set run.steps="${3:-$steps}" "${common[@]}" > "$2.log" 2>&1 ||
    { tail -20 "$2.log" >&2; exit 1; }
  bench_trace_rate "results/$2/trace.rank0.h5" 2
}
torch_run() {  # dtype -> median tok/s (torch_qwen3_step.py skips only the first step)
  HEADROOM_PACKED_BINS=bins.json /usr/bin/python3 "$bench_dir/torch_qwen3_step.py" "$1" \
    "$torch_steps" 512 256 688 4 4 2 64 1 "$row"
}

printf 'host: %s, %s, %s steps (PyTorch %s) x [1, %s] packed, %s rounds; PyTorch %s\n\n' \
  "$(bench_host)" "$bin" "$steps" "$torch_steps" "$row" "$rounds" "$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
printf '| dtype | headroom tok/s per round | PyTorch tok/s per round | headroom | PyTorch | headroom / PyTorch | token counts in 100 steps | primitives made in 100 steps | distinct primitives |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for dtype in fp32 bf16; do
  hr=() pt=()
  for ((r = 0; r < rounds; ++r)); do
    hr+=("$(headroom_run "$dtype" "hr-$dtype-$r")")
    pt+=("$(torch_run "$dtype")")
  done
  ONEDNN_VERBOSE=2 headroom_run "$dtype" "hr-$dtype-verbose" 100 > /dev/null
  made=$(grep -c ',create:' "hr-$dtype-verbose.log" || true)
  # A primitive's descriptor is its create line less the cache outcome and
  # the time (the last field): made = distinct when none is ever re-made.
  distinct=$(grep ',create:' "hr-$dtype-verbose.log" | sed -e 's/,create:[a-z_]*,/,create,/' \
    -e 's/,[^,]*$//' | sort -u | wc -l)
  counts=$(/usr/bin/python3 - "results/hr-$dtype-verbose/trace.rank0.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(len(set(f["steps"]["padded_tokens"][:])))
PY
)
  h=$(echo "${hr[@]}" | bench_median) p=$(echo "${pt[@]}" | bench_median)
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$dtype" "$(echo "${hr[@]}" | tr ' ' /)" \
    "$(echo "${pt[@]}" | tr ' ' /)" "$h" "$p" \
    "$(awk -v h="$h" -v p="$p" 'BEGIN {printf "%.2f", h / p}')" "$counts" "$made" "$distinct"
done
