#!/usr/bin/env bash
# Registers, spills and shared memory of every cuda/ kernel per architecture,
# from ptxas -v with the flags of cuda/CMakeLists.txt (this toolkit ships no
# cuobjdump), as a Markdown table for
# bench/RESULTS.md. The goal is no spills: a spill is local-memory traffic on
# every call.
#
#   bash scripts/ptxas-usage.sh [arch ...]   (default: sm_90a sm_80)
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
archs=("$@")
[[ ${#archs[@]} -eq 0 ]] && archs=(sm_90a sm_80)
printf '| file | kernel | arch | registers | spill stores / loads (bytes) | shared (bytes) |\n'
printf '|---|---|---|---|---|---|\n'
for cu in cuda/*.cu; do
  for arch in "${archs[@]}"; do
    "$nvcc" -std=c++20 --extended-lambda -arch="$arch" -Isrc -Icuda -Xptxas=-v -c "$cu" -o /dev/null 2>&1 |
      awk -v file="$(basename "$cu")" -v arch="$arch" '
        /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); fn = substr($0, RSTART + 1, RLENGTH - 2) }
        /bytes spill stores/ { split($0, a, " "); st = a[5]; ld = a[9] }
        /Used [0-9]+ registers/ {
          match($0, /Used [0-9]+ registers/); reg = substr($0, RSTART + 5, RLENGTH - 15)
          sm = "0"; if (match($0, /[0-9]+ bytes smem/)) sm = substr($0, RSTART, RLENGTH - 11)
          cmd = "c++filt " fn; cmd | getline name; close(cmd)
          # The kernel name and the outer names of its template arguments, without
          # parameter lists: "fill_kernel<float, fill_f32>".
          gsub(/headroom::cuda::(\(anonymous namespace\)::)?/, "", name)
          sub(/^void /, "", name)
          short = ""; depth = 0; paren = 0
          for (i = 1; i <= length(name); ++i) {
            c = substr(name, i, 1)
            if (c == "(") { if (depth == 0) break; ++paren; continue }
            if (c == ")") { --paren; continue }
            if (c == "<") ++depth
            if (c == ">") --depth
            if (paren == 0) short = short c
          }
          gsub(/::\{lambda#1\}|::\{lambda\}/, "", short)
          name = short
          printf "| %s | `%s` | %s | %s | %s / %s | %s |\n", file, name, arch, reg, st, ld, sm
        }'
  done
done
