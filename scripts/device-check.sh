#!/usr/bin/env bash
# The checks that need a GPU, as one short script for a lent device machine
# (see docs/backend.md): builds the cuda targets and runs every test that
# skips itself without a device — the cuda segment source and kernels
# (test_cuda) and NcclComm on one rank (test_nccl) — printing their output.
# Everything else is checked on the cpu machines by scripts/test.sh.
#
#   bash scripts/device-check.sh        (repository root; writes build-device/)
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
mkdir -p build-device
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADROOM_CUDA=ON \
  > build-device/build.log
cmake --build build-device -j"$(nproc)" --target test_cuda test_nccl >> build-device/build.log
status=0
for test in build-device/tests/cuda/test_cuda build-device/tests/cuda/test_nccl; do
  [[ -x $test ]] || { echo "missing: $test (see build-device/build.log)"; status=1; continue; }
  echo "== $test"
  "$test" --gtest_brief=1 || status=1
done
exit "$status"
