#!/usr/bin/env bash
# Where a training step's time goes, per op, fp32 and bf16 side by side:
# `perf record` (Debian's linux-perf) samples headroom training the same
# fixed step as bench/torch_peer_bench.sh (padded, full-length documents,
# no chunked loss, 2 threads), after a delay that skips start-up and the
# first steps, and each sample is charged to an op:
#   - samples in headroom's own code go to the source file of the function
#     they are in (addr2line on the sample's address, outermost frame): the
#     cpu kernels are one op per file (attention.cc, rmsnorm.cc, swiglu.cc,
#     ...), so the file names the op;
#   - oneDNN's JIT code and libdnnl are the GEMMs (every matmul, the loss
#     head's included);
#   - libgomp is the OpenMP runtime (forks, barriers, threads spinning idle);
#   - libm (expf in swiglu and the loss, sincos in rope), libc (memset,
#     memcpy, malloc) and the kernel (page faults, scheduling) are shown as
#     such: perf without call graphs cannot say which op called them.
# Prints a Markdown table: each op's share of the samples (both threads'
# CPU time) and that share of the median step's wall time, in ms.
#
#   bash bench/step_profile.sh [steps] [preset] [delay_ms]   (repository root, after a build)
#
# HEADROOM=build-avx2/headroom profiles another build (the `avx2` preset:
# an AVX2-only CPU's kernels, on this one).
#
# preset "tiny" (default: [4, 512] per step) or "small-50m" ([1, 2048]);
# delay_ms (default 2500 for tiny, 12000 for small-50m) must exceed start-up
# plus a step or two, or the first step's oneDNN JIT compilation is counted.
set -euo pipefail
steps=${1:-20}
preset=${2:-tiny}
case "$preset" in
  tiny) B=4 S=512 delay=${3:-2500} ;;
  small-50m) B=1 S=2048 delay=${3:-12000} ;;
  *) echo "step_profile.sh: preset must be tiny or small-50m, got $preset" >&2; exit 2 ;;
esac
command -v perf > /dev/null || { echo "step_profile.sh: needs perf (apt-get install linux-perf)" >&2; exit 2; }
bin=$(realpath -m "${HEADROOM:-build/headroom}")
[ -x "$bin" ] || { echo "step_profile.sh: no $bin; build first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMP_NUM_THREADS=2

for dtype in fp32 bf16; do
  perf record -q -F 999 -D "$delay" -o "perf.$dtype.data" "$bin" train --overwrite \
    --set run.name="\"prof-$dtype\"" --set model.preset="\"$preset\"" \
    --set model.dtype="\"$dtype\"" --set run.steps="$steps" --set schedule.warmup_steps=1 \
    --set batch.mode='"padded"' --set batch.micro_batch_size="$B" --set batch.seq_len="$S" \
    --set data.path="\"prof-$S.h5\"" --set data.synthetic_lengths="\"fixed:$S\"" \
    --set data.synthetic_documents=400 --set loss.chunk_size=0 \
    --set optimizer.grad_clip=0 --set memory.device_capacity=0 > "prof-$dtype.log" 2>&1
  perf report -i "perf.$dtype.data" --no-children --sort dso,sym -v --percent-limit 0 \
    2> /dev/null | grep '%' > "report.$dtype.txt"
done

/usr/bin/python3 - "$bin" "$steps" "$preset" "$((B * S))" <<'PY'
import collections, os, re, subprocess, sys
import h5py, numpy as np

binary, steps, preset = sys.argv[1], int(sys.argv[2]), sys.argv[3]
line_re = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+(0x[0-9a-f]+)\s+\S+\s+\[(.)\]\s+(.*)$")


def op_of_files(addresses):
    """Source file stem of the outermost function at each address in headroom."""
    if not addresses:
        return {}
    # -a starts each address's block with the address; -i then prints its
    # inline chain, innermost first, so the block's last line is the
    # function the code was inlined into.
    out = subprocess.run(["addr2line", "-a", "-i", "-e", binary], input="\n".join(addresses),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    result, current, last = {}, None, None
    for line in out + ["0xend"]:
        if line.startswith("0x"):
            if current is not None:
                result[current] = last
            current, last = line, None
        else:
            last = line
    ops = {}
    for address in addresses:
        location = result.get("0x" + address[2:].rjust(16, "0")) or "??"
        name = os.path.basename(location.split(":")[0])
        ops[address] = name if name not in ("??", "") else "headroom (no line info)"
    return ops


def profile(dtype):
    rows = []
    for line in open(f"report.{dtype}.txt"):
        m = line_re.match(line)
        if m:
            rows.append((float(m.group(1)), m.group(2), m.group(3), m.group(5)))
    ops_of = op_of_files(sorted({a for _, dso, a, _ in rows if dso == binary}))
    shares = collections.Counter()
    for share, dso, address, symbol in rows:
        base = os.path.basename(dso)
        if dso == binary:
            op = ops_of[address]
        elif base.startswith(("[JIT]", "libdnnl")) or re.fullmatch(r"perf-\d+\.map", base):
            op = "gemm (oneDNN JIT)"
        elif base.startswith("libgomp"):
            op = "OpenMP runtime (libgomp)"
        elif base.startswith("libm."):
            op = "libm (" + symbol.split()[0].lstrip("_").split("_")[0] + ")"
        elif base.startswith("libc."):
            op = "libc (memset, memcpy, malloc)"
        elif base.startswith("[kernel"):
            op = "kernel (page faults, scheduling)"
        else:
            op = base
        shares[op] += share
    with h5py.File(f"results/prof-{dtype}/trace.rank0.h5", "r") as f:
        s = f["steps"][:]
    tokens = np.median(s[1:]["tokens_per_second"])
    return shares, tokens


profiles = {d: profile(d) for d in ("fp32", "bf16")}
tokens_per_step = int(sys.argv[4])
ms = {d: tokens_per_step * 1000.0 / profiles[d][1] for d in profiles}
print(f"step: fp32 {ms['fp32']:.1f} ms ({profiles['fp32'][1]:.0f} tok/s), "
      f"bf16 {ms['bf16']:.1f} ms ({profiles['bf16'][1]:.0f} tok/s), median over steps 2..{steps}")
print()
print("| op (source file or library) | fp32 share | fp32 ms/step | bf16 share | bf16 ms/step | bf16 / fp32 time |")
print("|---|---|---|---|---|---|")
ops = set(profiles["fp32"][0]) | set(profiles["bf16"][0])
order = sorted(ops, key=lambda o: -(profiles["bf16"][0][o] + profiles["fp32"][0][o]))
other = {"fp32": 0.0, "bf16": 0.0}
for op in order:
    a, b = profiles["fp32"][0][op], profiles["bf16"][0][op]
    if max(a, b) < 0.5:
        other["fp32"] += a
        other["bf16"] += b
        continue
    ta, tb = a / 100 * ms["fp32"], b / 100 * ms["bf16"]
    ratio = f"{tb / ta:.2f}" if ta > 0 else "-"
    print(f"| {op} | {a:.1f}% | {ta:.1f} | {b:.1f}% | {tb:.1f} | {ratio} |")
print(f"| everything under 0.5% | {other['fp32']:.1f}% | {other['fp32'] / 100 * ms['fp32']:.1f} "
      f"| {other['bf16']:.1f}% | {other['bf16'] / 100 * ms['bf16']:.1f} | - |")
PY
