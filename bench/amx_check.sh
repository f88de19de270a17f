#!/usr/bin/env bash
# The checks of the cpu-speed goals that need an AMX host (issue 18: bf16 at
# least 2x PyTorch's bf16 autocast and fp32 at least 2.5x PyTorch fp32, same
# shapes, same threads, one run), as one prepared script for a Sapphire
# Rapids (or later) machine: the developer machines have no AMX, so these
# tables have never been measured there. Runs, from a build of this tree
# (README command 2 builds it), in this order:
#   1. gemm_bench: the gemm ceiling (fp32, bf16) the FLOP rates below are
#      shares of;
#   2. torch_peer_bench.sh 8 3 tiny and 5 3 small-50m: the issue's table,
#      headroom and PyTorch side by side, with model FLOP rates;
#   3. shape_bench.sh 40 3: what padding micro-batches to a multiple of 64
#      buys where oneDNN takes ~5.5 ms to make a bf16 brgemm primitive;
#   4. with BEFORE=path/to/an/older/headroom, primitive_bench.sh BEFORE
#      build/headroom 40 3: the primitive cache rule against that binary.
# Prints the host and each bench's tables; about 15-25 minutes at 2 threads.
# Exits 2 without AMX (HEADROOM_AMX_CHECK_ANYWAY=1 runs it regardless, as a
# dry run on another host).
#
#   bash bench/amx_check.sh   (repository root, after a build)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! grep -qw amx_bf16 /proc/cpuinfo && [ "${HEADROOM_AMX_CHECK_ANYWAY:-0}" != 1 ]; then
  echo "amx_check.sh: this CPU has no AMX (no amx_bf16 in /proc/cpuinfo); the checks are for an AMX host" >&2
  exit 2
fi
for need in build/headroom build/bench/gemm_bench; do
  [ -x "$need" ] || { echo "amx_check.sh: no $need; build first (bash scripts/test.sh)" >&2; exit 2; }
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

printf '# AMX check, %s\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
printf 'host: %s; %s threads; flags: %s\n' \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" "$OMP_NUM_THREADS" \
  "$(grep -m1 -o -w 'amx_bf16\|amx_tile\|avx512_bf16\|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
printf 'tree: %s\n' "$(git rev-parse --short HEAD 2> /dev/null || echo '(not a git checkout)')"

printf '\n## gemm_bench\n\n'
build/bench/gemm_bench
printf '\n## torch_peer_bench.sh 8 3 tiny\n\n'
bash bench/torch_peer_bench.sh 8 3 tiny
printf '\n## torch_peer_bench.sh 5 3 small-50m\n\n'
bash bench/torch_peer_bench.sh 5 3 small-50m
printf '\n## shape_bench.sh 40 3\n\n'
bash bench/shape_bench.sh 40 3
if [ -n "${BEFORE:-}" ]; then
  printf '\n## primitive_bench.sh %s build/headroom 40 3\n\n' "$BEFORE"
  bash bench/primitive_bench.sh "$BEFORE" build/headroom 40 3
fi
