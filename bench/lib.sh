# What the bench scripts share: a throwaway folder, the host line, the
# median of a list, the rss/plan ratio a training prints, and the median
# tokens/s of a trace's steps. Source it: `. "$(dirname "$0")/lib.sh"`.

# cd into a new temporary folder, removed when the script exits.
bench_enter_scratch() {
  bench_scratch=$(mktemp -d)
  trap 'rm -rf "$bench_scratch"' EXIT
  cd "$bench_scratch"
}

# This machine's CPU model, for the table's header: figures change with it.
bench_host() { grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'; }

# The median of the numbers on stdin (words or lines; the mean of the two
# middle ones for an even count).
bench_median() {
  tr ' ' '\n' | grep . | sort -g |
    awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

# The "(ratio R)" of the rss check a training printed to log $1: private
# resident memory over the plan's peak reserved.
bench_rss_ratio() { grep -o '(ratio [0-9.]*)' "$1" | head -1 | tr -dc '0-9.'; }

# The median tokens/s of trace $1's steps after the first $2 (default 2;
# all of them when there are no more), rounded.
bench_trace_rate() {
  /usr/bin/python3 - "$1" "${2:-2}" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    s = f["steps"][:]
skip = int(sys.argv[2])
rest = s[skip:] if len(s) > skip else s
print(f"{np.median(rest['tokens_per_second']):.0f}")
PY
}
