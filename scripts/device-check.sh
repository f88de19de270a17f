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
#      20 steps each: the loss of every step side by side, the largest
#      relative difference, and cuda's peak from its trace.
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
rm -rf "$work"
say "device-check: exit $status"
exit "$status"
