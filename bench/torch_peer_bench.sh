#!/usr/bin/env bash
# headroom against PyTorch on the same training step, side by side in one
# run: the quickstart model ("tiny": Qwen3 shape, hidden 256, 4 layers, 4
# query / 2 kv heads of 64, ffn 688, vocab 512, tied head), 4 rows of 512
# tokens per step (a padded [4, 512] batch of full-length documents, so no
# step after the first meets a new gemm shape), AdamW, 2 threads, fp32 and
# bf16 (PyTorch: torch.autocast on cpu). PyTorch's model is written out in
# plain modules with Hugging Face's conventions and eager attention (Debian's
# PyTorch 1.13 has no scaled_dot_product_attention), its fp32 matmuls on
# Debian's OpenBLAS (libopenblas0-pthread), bf16 on its oneDNN.
# Prints a Markdown table of median tokens/s over the steps after the first,
# and each system's model FLOP rate (6 N per token for the N weights of the
# matmuls, head included, plus 12 H D per visible key per layer for
# attention's forward and backward) as a share of the gemm ceiling that
# build/bench/gemm_bench measures on the same host (when it is built).
#
#   bash bench/torch_peer_bench.sh [steps] [rounds] [preset]   (repository root, after a build)
#
# HEADROOM=build-avx2/headroom measures another build (the `avx2` preset:
# an AVX2-only CPU's kernels, on this one; its gemm_bench beside it).
#
# preset "tiny" (the default, [4, 512] per step) or "small-50m" (hidden 512,
# 12 layers, 8 / 4 heads, ffn 1920, vocab 8192; one row of 2048 per step).
#
# rounds > 1 alternates the two systems that many times and takes the median
# of the rounds' medians: on a shared machine load drifts between runs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_dir=$(cd "$(dirname "$0")" && pwd)
steps=${1:-10}
rounds=${2:-1}
preset=${3:-tiny}
case "$preset" in
  tiny) shape="512 256 688 4 4 2 64 4 512" ;;       # V C F L H KV D B S
  small-50m) shape="8192 512 1920 12 8 4 64 1 2048" ;;
  *) echo "torch_peer_bench.sh: preset must be tiny or small-50m, got $preset" >&2; exit 2 ;;
esac
read -r V C F L H KV D B S <<< "$shape"
bin=$(realpath -m "${HEADROOM:-build/headroom}")
[ -x "$bin" ] || { echo "torch_peer_bench.sh: no $bin; build first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2

headroom_run() {  # dtype round -> median tok/s
  local name="peer-$1-$2"
  "$bin" train --overwrite --set run.name="\"$name\"" --set model.preset="\"$preset\"" \
    --set model.dtype="\"$1\"" --set run.steps="$steps" --set schedule.warmup_steps=1 \
    --set batch.mode='"padded"' --set batch.micro_batch_size="$B" --set batch.seq_len="$S" \
    --set data.path="\"peer-$S.h5\"" --set data.synthetic_lengths="\"fixed:$S\"" \
    --set data.synthetic_documents=400 --set loss.chunk_size=0 \
    --set optimizer.grad_clip=0 --set memory.device_capacity=0 > "$name.log" 2>&1
  /usr/bin/python3 - "results/$name/trace.rank0.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    s = f["steps"][:]
print(f"{np.median(s[1:]['tokens_per_second']):.0f}")
PY
}

torch_run() {  # dtype -> median tok/s
  /usr/bin/python3 "$bench_dir/torch_qwen3_step.py" "$1" "$steps" $shape
}

median() { echo "$@" | bench_median; }

# Model FLOPs per token of the shape (causal rows of S: (S + 1) / 2 visible
# keys per query).
flops_per_token=$(awk -v V="$V" -v C="$C" -v F="$F" -v L="$L" -v H="$H" -v KV="$KV" -v D="$D" \
  -v S="$S" 'BEGIN {n = L * (C*H*D + 2*C*KV*D + H*D*C + 3*C*F) + V*C; print 6*n + 12*L*H*D*(S+1)/2}')
ceiling() {  # dtype -> the best median GFLOP/s of gemm_bench, or "-"
  [ -n "${gemm_table:-}" ] || { echo "-"; return; }
  printf '%s\n' "$gemm_table" | awk -F'|' -v d="$1" '$2 ~ "^ *"d" " {if ($4+0 > m) m = $4+0} END {print m ? m : "-"}'
}
share() {  # tok/s dtype -> "G GFLOP/s (P% of the ceiling)"
  local c; c=$(ceiling "$2")
  awk -v t="$1" -v f="$flops_per_token" -v c="$c" 'BEGIN {g = t * f / 1e9;
    if (c == "-") printf "%.0f GFLOP/s", g; else printf "%.0f GFLOP/s (%.0f%%)", g, 100 * g / c}'
}
gemm_bin=$(dirname "$bin")/bench/gemm_bench
gemm_table=$([ -x "$gemm_bin" ] && "$gemm_bin" 5 || true)

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
grep -qw amx_bf16 /proc/cpuinfo && kind="AMX" || { grep -qw avx512f /proc/cpuinfo && kind="AVX-512" || kind="AVX2"; }
echo "host: $cpu ($kind), 2 threads, $preset, $steps steps x [$B, $S], $rounds round(s); $(/usr/bin/python3 -c 'import torch; print("PyTorch", torch.__version__)')"
echo "gemm ceiling (gemm_bench, best median): fp32 $(ceiling fp32), bf16 $(ceiling bf16) GFLOP/s; model FLOPs per token $flops_per_token"
echo
printf '| dtype | headroom tok/s | PyTorch tok/s | headroom / PyTorch | headroom model rate | PyTorch model rate |\n|---|---|---|---|---|---|\n'
for dtype in fp32 bf16; do
  hr=() pt=()
  for round in $(seq "$rounds"); do
    hr+=("$(headroom_run "$dtype" "$round")")
    pt+=("$(torch_run "$dtype")")
  done
  h=$(median "${hr[@]}") p=$(median "${pt[@]}")
  printf '| %s | %s | %s | %s | %s | %s |\n' "$dtype" "$h" "$p" \
    "$(awk -v h="$h" -v p="$p" 'BEGIN {printf "%.2f", h / p}')" "$(share "$h" "$dtype")" \
    "$(share "$p" "$dtype")"
done
