#!/usr/bin/env bash
# LoRA against full fine-tuning, planned (meta backend: every allocation of
# the run, no math) for a real model: qwen3-8b in bf16, one 2048-token
# sequence per micro-batch, full activation checkpointing, loss chunks of
# 1024 with recompute, one rank, no capacity limit. Prints each category's
# peak (and its bytes at the moment of the overall peak) side by side:
# full fine-tuning, LoRA r=16 on q_proj/v_proj, LoRA r=16 on every linear
# layer. Markdown.
#
#   bash bench/lora_bench.sh [preset] [seq]      (repository root, after a build)
set -euo pipefail
preset=${1:-qwen3-8b}
seq=${2:-2048}
bin=$(pwd)/build/headroom
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir -p data
"$bin" data synth data/seq.h5 --vocab 151936 --documents 16 --lengths "fixed:$seq" > synth.log

common=(--set model.preset="$preset" --set model.dtype=bf16 --set run.steps=1
  --set schedule.warmup_steps=0 --set data.path=data/seq.h5 --set batch.mode=padded
  --set batch.micro_batch_size=1 --set batch.seq_len="$seq" --set loss.chunk_size=1024
  --set loss.mode=recompute --set checkpoint.activations=full --set memory.device_capacity=0
  --set memory.allocator=exact)
all='["q_proj","k_proj","v_proj","o_proj","gate_proj","up_proj","down_proj"]'
"$bin" plan "${common[@]}" --set run.name=full > full.txt
"$bin" plan "${common[@]}" --set lora.enabled=true --set lora.rank=16 --set run.name=qv > qv.txt
"$bin" plan "${common[@]}" --set lora.enabled=true --set lora.rank=16 \
  --set "lora.targets=$all" --set run.name=all > all.txt

/usr/bin/python3 - "$preset" "$seq" <<'PY'
import re, sys
preset, seq = sys.argv[1], sys.argv[2]
runs = [("full fine-tuning", "full.txt"), ("LoRA r=16 q,v", "qv.txt"), ("LoRA r=16 all linear", "all.txt")]
def parse(path):
    text = open(path).read()
    rows = {}
    for m in re.finditer(r"^  (\w+)\s+[\d.]+ \w+ \((\d+) B\)\s+(?:[\d.]+ \w+ \((\d+) B\)|0 B)", text, re.M):
        rows[m.group(1)] = (int(m.group(2)), int(m.group(3) or 0))
    peak = int(re.search(r"peak allocated\s+[\d.]+ \w+ \((\d+) B\)", text).group(1))
    return rows, peak
data = [parse(p) for _, p in runs]
gib = lambda b: f"{b / 2**30:.2f}"
print(f"{preset} bf16, one {seq}-token sequence, full checkpointing, loss chunks 1024 (recompute), one rank; GiB, peak of the category / its bytes at the overall peak:\n")
print("| category | " + " | ".join(name for name, _ in runs) + " |")
print("|---|" + "---|" * len(runs))
cats = ["param", "grad", "optim", "activation", "checkpoint", "logits", "attention", "comm", "workspace"]
for c in cats:
    cells = []
    for rows, _ in data:
        peak, at = rows.get(c, (0, 0))
        cells.append(f"{gib(peak)} / {gib(at)}")
    print(f"| {c} | " + " | ".join(cells) + " |")
print("| **peak allocated** | " + " | ".join(f"**{gib(p)}**" for _, p in data) + " |")
PY
