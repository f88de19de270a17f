#!/usr/bin/env bash
# Smoke test: can Slurm's srun launch `headroom train` as a 2-rank MPI job?
#
# Needs a Slurm that is already running (slurmctld, slurmd, munged) with at
# least 2 CPUs free; this script installs and starts nothing. It trains 3 tiny
# steps on a synthetic corpus in a temporary folder and checks that
#   1. srun exits 0, rank 0 prints one progress line per step, and there is
#      one trace per rank (trace.rank0.h5, trace.rank1.h5) saying world_size 2
#      (the attribute is checked only where a python3 has h5py);
#   2. a job whose rank 0 fails ends quickly with exit code 2 and names
#      "rank 0 of 2", instead of rank 1 waiting in a collective forever.
#
# Usage: scripts/slurm-smoke.sh            (HEADROOM=path/to/headroom to pick
#        the binary, SRUN_MPI=pmix the srun --mpi plugin, KEEP=1 to keep the
#        folder). Exit status 0 when every check passes, 1 otherwise.
#
# --mpi=pmix is the default because Debian's Open MPI 4.1 only talks PMIx
# (MCA pmix ext3x): with --mpi=pmi2 its MPI_Init fails ("OMPI was not built
# with SLURM's PMI support"), and with --mpi=none headroom sees no launcher
# and every task trains alone.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
headroom="${HEADROOM:-$here/../build/headroom}"
mpi="${SRUN_MPI:-pmix}"
steps=3
failures=0

pass() { echo "PASS: $*"; }
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Preconditions: checked, never fixed here.
if ! command -v srun >/dev/null || ! sinfo -h >/dev/null 2>&1; then
  echo "FAIL: no running Slurm (srun/sinfo); start munged, slurmctld and slurmd first"
  exit 1
fi
if [[ ! -x "$headroom" ]]; then
  echo "FAIL: $headroom is not an executable (build it, or set HEADROOM)"
  exit 1
fi
headroom="$(cd "$(dirname "$headroom")" && pwd)/$(basename "$headroom")"

# The run writes results/ under its working directory, so it gets its own.
work="$(mktemp -d "${TMPDIR:-/tmp}/slurm-smoke.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then
  echo "keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi
cd "$work"

# Tiny and quick; zero.stage=3 exercises every collective (reduce-scatter,
# all-gather, all-reduce, broadcast). One thread per rank: 2 ranks on 2 cores.
args=(train
  --set "run.steps=$steps"
  --set data.synthetic_documents=60
  --set batch.max_tokens_per_micro_batch=256
  --set loss.chunk_size=128
  --set schedule.warmup_steps=1
  --set zero.stage=3)

# timeout: a launcher that is not wired up tends to hang in MPI_Init or in the
# first collective rather than fail.
rc=0
OMP_NUM_THREADS=1 timeout 300 srun -n 2 --mpi="$mpi" "$headroom" "${args[@]}" \
  --set run.name=srun >stdout.txt 2>stderr.txt || rc=$?
if [[ $rc -eq 0 ]]; then
  pass "srun -n 2 --mpi=$mpi headroom train exited 0"
else
  fail "srun -n 2 --mpi=$mpi headroom train exited $rc; the end of its stderr:"
  tail -n 20 stderr.txt | sed 's/^/  /'
fi

lines="$(grep -c "^step [0-9]*/$steps " stdout.txt || true)"
if [[ "$lines" == "$steps" ]]; then
  pass "$steps progress lines (rank 0 only)"
else
  fail "expected $steps progress lines, got $lines"
fi

for rank in 0 1; do
  trace="results/srun/trace.rank$rank.h5"
  if [[ -f "$trace" ]]; then
    pass "$trace exists"
  else
    fail "$trace is missing"
  fi
done

# world_size 2 in each trace proves the ranks found each other (two
# independent single-rank runs would both write trace.rank0.h5).
# The python3 first on PATH may be a virtual environment without h5py;
# Debian's (python3-h5py) is tried next.
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import h5py' 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [[ -f results/srun/trace.rank1.h5 && -n "$python" ]]; then
  sizes="$("$python" -c '
import h5py
print(" ".join(str(h5py.File(f"results/srun/trace.rank{r}.h5", "r").attrs["world_size"])
               for r in (0, 1)))')"
  if [[ "$sizes" == "2 2" ]]; then
    pass "both traces say world_size 2"
  else
    fail "trace world sizes are '$sizes', expected '2 2'"
  fi
else
  echo "SKIP: world_size attribute (no trace.rank1.h5, or python3 without h5py)"
fi

# Failure path: rank 0 cannot find its data; MPI_Abort must take rank 1
# (waiting in a barrier) down with it and srun must pass on exit code 2.
rc=0
start=$SECONDS
OMP_NUM_THREADS=1 timeout 60 srun -n 2 --mpi="$mpi" "$headroom" "${args[@]}" \
  --set run.name=srun-fail --set data.path=missing.h5 \
  --set data.synthesize_if_missing=false >fail-stdout.txt 2>fail-stderr.txt || rc=$?
elapsed=$((SECONDS - start))
if [[ $rc -eq 2 ]]; then
  pass "failing job exited 2 after ${elapsed}s"
elif [[ $rc -eq 124 ]]; then
  fail "failing job hung (killed by timeout after ${elapsed}s)"
else
  fail "failing job exited $rc after ${elapsed}s, expected 2"
fi
if grep -q "rank 0 of 2" fail-stderr.txt; then
  pass "its error names rank 0 of 2"
else
  fail "its error does not name 'rank 0 of 2'; the end of its stderr:"
  tail -n 20 fail-stderr.txt | sed 's/^/  /'
fi

if [[ $failures -eq 0 ]]; then
  echo "PASS: slurm smoke"
else
  echo "FAIL: slurm smoke ($failures checks failed)"
  exit 1
fi
