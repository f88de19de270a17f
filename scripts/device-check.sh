#!/usr/bin/env bash
# The checks that need a GPU, as one prepared script (docs/backend.md, "The
# device check"); everything else is checked on the cpu machines by
# scripts/test.sh. On a lent, bare GPU machine it runs from the bundle that
# scripts/device-bundle.sh packs (build-device-bundle/run.sh calls it); on a
# developer's own GPU machine with the Debian libraries, from a build folder.
#
#   bash scripts/device-check.sh [--bundle DIR | --build DIR]   (default --build build)
#
# What it runs, in this order (the whole script stays under 8 minutes):
#   1. test_cuda: the cuda segment source (cudaMalloc failure -> the OOM
#      postmortem with cudaMemGetInfo figures) and raw kernel launches.
#   2. test_op_harness: every op's instances on cpu, meta and cuda; cuda's
#      values against float64 and cpu, meta.cuda's allocations against
#      cuda's, event for event.
#   3. test_nccl: NcclComm on one rank on the context's stream.
#   4. The quickstart trained on cuda (dense_additive attention) and on cpu,
#      20 steps each: the loss of every step side by side and the largest
#      relative difference (tolerance 2%: fp32 on both, but cuBLASLt's and
#      the block trees' summation orders differ from the cpu's, and 20 steps
#      of AdamW at lr 3e-3 amplify rounding-level differences).
#   5. Speed: qwen3-0.6b in bf16 at 4096 tokens per step on cuda, against
#      PyTorch eager and SDPA on the same GPU (bench/torch_qwen3_step.py).
#   6. Attention forward speed, bf16, head_dim 128, T = 4096..16384, causal,
#      sliding window and documents: the SIMT and tensor-core kernels
#      (bench/flash_attention_bench) against PyTorch's SDPA and
#      FlexAttention (bench/torch_attention_bench.py).
# Output goes to $OUT (the device tool's folder) when set, else to
# device-check-out/: one log per step and summary.txt. Exit 1 if any failed.
set -uo pipefail
mode=build
dir=build
case ${1:-} in
  --bundle) mode=bundle; dir=$2 ;;
  --build) dir=$2 ;;
  "") ;;
  *) echo "device-check: unknown argument $1 (expected --bundle DIR or --build DIR)" >&2; exit 2 ;;
esac
dir=$(cd "$dir" && pwd)
out=${OUT:-$(pwd)/device-check-out}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

if [[ $mode == bundle ]]; then
  bin=$dir/bin
  headroom=$bin/headroom
  test_cuda=$bin/test_cuda test_nccl=$bin/test_nccl test_op_harness=$bin/test_op_harness
  # The GPU stack is the device's own: cuBLASLt from the CUDA toolkit or
  # PyTorch's wheels, NCCL from PyTorch's wheel.
  gpu_libs=""
  for lib in libcublasLt.so.13 libnccl.so.2; do
    found=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets /opt /usr/lib \
      -name "$lib" 2>/dev/null | head -1)
    if [[ -n $found ]]; then
      gpu_libs+=${gpu_libs:+:}$(dirname "$found")
    else
      say "note: $lib not found on this machine"
    fi
  done
  export LD_LIBRARY_PATH=$dir/lib${gpu_libs:+:$gpu_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # Open MPI's components and help files, from the bundle (device-bundle.sh).
  export OPAL_PREFIX=$dir/ompi
else
  headroom=$dir/headroom
  test_cuda=$dir/tests/cuda/test_cuda test_nccl=$dir/tests/cuda/test_nccl
  test_op_harness=$dir/tests/backend/test_op_harness
fi

say "== device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "== host: $(nproc) cores, glibc $(ldd --version 2>&1 | head -1 | awk '{print $NF}')"
status=0

run_test() {
  local name=$1 binary=$2 limit=$3
  shift 3
  if [[ ! -x $binary ]]; then
    say "$name: MISSING ($binary)"
    status=1
    return
  fi
  local start=$SECONDS
  timeout "$limit" "$binary" --gtest_brief=1 "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local passed failed skipped
  passed=$(grep -c '^\[       OK \]' "$out/$name.log")
  failed=$(grep -c '^\[  FAILED  \]' "$out/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \]' "$out/$name.log")
  say "$name: rc=$rc in $((SECONDS - start)) s; $(grep -E '^\[  PASSED  \]' "$out/$name.log" | tail -1)" \
    "failed lines $failed, skipped $skipped"
  [[ $rc -eq 0 ]] || { status=1; grep -E '^\[  FAILED  \]|Failure|error' "$out/$name.log" | head -40 | tee -a "$summary"; }
  : "$passed"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run_test test_cuda "$test_cuda" 120
run_test test_op_harness "$test_op_harness" 240
run_test test_nccl "$test_nccl" 120

# The quickstart on cuda and on cpu, side by side.
work=$(mktemp -d)
train_one() {
  local backend=$1
  local start=$SECONDS
  (cd "$work" && timeout 120 "$headroom" train --overwrite \
    --set run.backend="$backend" --set attention.backend=dense_additive --set run.steps=20 \
    --set run.out_dir="$work/$backend" > "$out/train_$backend.log" 2>&1)
  local rc=$?
  say "train on $backend: rc=$rc in $((SECONDS - start)) s"
  [[ $rc -eq 0 ]] || { status=1; tail -20 "$out/train_$backend.log" | tee -a "$summary"; }
}
if [[ -x $headroom ]]; then
  train_one cuda
  train_one cpu
  # "step N ... loss X" lines of both logs, side by side.
  python3 - "$out/train_cuda.log" "$out/train_cpu.log" <<'EOF' | tee -a "$summary" || status=1
import re, sys
def losses(path):
    found = {}
    for line in open(path, errors="replace"):
        m = re.search(r"step\s+(\d+).*?loss[ =:]+([-+0-9.eE]+)", line)
        if m:
            found[int(m.group(1))] = float(m.group(2))
    return found
cuda, cpu = losses(sys.argv[1]), losses(sys.argv[2])
steps = sorted(set(cuda) & set(cpu))
if not steps:
    print("loss comparison: no common steps (see train_cuda.log / train_cpu.log)")
    sys.exit(1)
worst = max(abs(cuda[s] - cpu[s]) / max(abs(cpu[s]), 1e-12) for s in steps)
for s in steps:
    print(f"step {s:3d}  cuda {cuda[s]:.6f}  cpu {cpu[s]:.6f}")
print(f"loss comparison: {len(steps)} steps, largest relative difference {worst:.2e}")
sys.exit(0 if worst < 2e-2 else 1)
EOF
  cp "$work"/cuda/quickstart/trace.rank0.h5 "$out/trace_cuda.h5" 2>/dev/null || true
else
  say "headroom: MISSING ($headroom)"
  status=1
fi
# Speed: qwen3-0.6b in bf16, one row of 4096 tokens per step (chunked loss,
# activations checkpointed per block), headroom on cuda against PyTorch on
# the same GPU (eager and SDPA attention, AdamW), median tokens/s of the
# steps after the first, and the model FLOP rate as a share of the card's
# dense bf16 peak (989 TFLOP/s for H100 SXM and H200).
torch_step=$dir/bench/torch_qwen3_step.py
[[ -f $torch_step ]] || torch_step=$(cd "$(dirname "$0")/.." && pwd)/bench/torch_qwen3_step.py
shape="151936 1024 3072 28 16 8 128 1 4096"  # V C F L H KV D B S, model_config.cc's qwen3-0.6b
read -r V C F L H KV D B S <<< "$shape"
flops_per_token=$(awk -v V="$V" -v C="$C" -v F="$F" -v L="$L" -v H="$H" -v KV="$KV" -v D="$D" \
  -v S="$S" 'BEGIN {n = L * (C*H*D + 2*C*KV*D + H*D*C + 3*C*F) + V*C; print 6*n + 12*L*H*D*(S+1)/2}')
mfu() { awk -v t="$1" -v f="$flops_per_token" 'BEGIN {if (t + 0 == 0) print "-"; else printf "%.1f%%", 100 * t * f / 989e12}'; }
speed_steps=8
if [[ -x $headroom ]]; then
  (cd "$work" && timeout 240 "$headroom" train --overwrite --set run.name='"speed"' \
    --set model.preset='"qwen3-0.6b"' --set model.dtype='"bf16"' --set run.backend='"cuda"' \
    --set attention.backend='"dense_additive"' --set batch.mode='"padded"' \
    --set batch.micro_batch_size=1 --set batch.seq_len="$S" --set data.path='"speed.h5"' \
    --set data.synthetic_lengths="\"fixed:$S\"" --set data.synthetic_documents=64 \
    --set loss.chunk_size=1024 --set loss.mode='"recompute"' --set checkpoint.activations='"full"' \
    --set run.steps=$speed_steps --set schedule.warmup_steps=1 --set memory.device_capacity=0 \
    --set run.out_dir="\"$work/speed\"" > "$out/speed_headroom.log" 2>&1)
  say "speed, headroom on cuda: rc=$?"
fi
headroom_tps=$(grep -oE '^step [0-9]+/[0-9]+ .* ([0-9.]+) tok/s' "$out/speed_headroom.log" 2>/dev/null |
  awk 'NR > 1 {print $(NF-1)}' | sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : 0}')
torch_tps() { timeout 240 python3 "$torch_step" bf16 "$speed_steps" $shape cuda "$1" 1000000 2>> "$out/speed_torch.log" || echo 0; }
sdpa_tps=$(torch_tps sdpa)
eager_tps=$(torch_tps eager)
say ""
say "| system (bf16, qwen3-0.6b, [1, $S]) | tokens/s | MFU (of 989 TFLOP/s) | headroom / it |"
say "|---|---|---|---|"
say "| headroom cuda, dense_additive | $headroom_tps | $(mfu "$headroom_tps") | 1.00 |"
for row in "PyTorch eager:$eager_tps" "PyTorch SDPA:$sdpa_tps"; do
  name=${row%%:*} tps=${row##*:}
  say "| $name | $tps | $(mfu "$tps") | $(awk -v h="$headroom_tps" -v t="$tps" 'BEGIN {if (t + 0 == 0) print "-"; else printf "%.2f", h / t}') |"
done

# Attention forward speed: the SIMT and tensor-core kernels, then PyTorch's
# SDPA (flash) and FlexAttention on the same shapes (bench/README.md).
flash_bench=$([[ $mode == bundle ]] && echo "$bin/flash_attention_bench" || echo "$dir/bench/flash_attention_bench")
torch_attention=$dir/bench/torch_attention_bench.py
[[ -f $torch_attention ]] || torch_attention=$(cd "$(dirname "$0")/.." && pwd)/bench/torch_attention_bench.py
say ""
if [[ -x $flash_bench ]]; then
  timeout 90 "$flash_bench" 10 > "$out/attention_headroom.log" 2>&1
  say "attention speed, headroom: rc=$?"
  tee -a "$summary" < "$out/attention_headroom.log"
else
  say "attention speed: MISSING ($flash_bench)"
  status=1
fi
timeout 180 python3 "$torch_attention" 10 > "$out/attention_torch.log" 2>&1
say "attention speed, PyTorch: rc=$?"
tee -a "$summary" < "$out/attention_torch.log"

rm -rf "$work"
say "device-check: exit $status"
exit "$status"
