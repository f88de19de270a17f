#!/usr/bin/env bash
# How long `headroom report` takes, and how big its HTML / Perfetto / JSON
# are, for the quickstart trace and for a qwen3-8b plan of 150 steps (about
# 600,000 allocator events, 31 MB of trace; and of 250 steps, a million), and how long headless Chromium
# takes to run the page's script (data-script-ms, the page's own clock).
# Target: the HTML under ~5 MB and opening in under a second.
#
#   bash bench/report_bench.sh [quickstart run folder]   (from the repository root, after a build)
#
# Without a folder it trains the quickstart first (150 steps: minutes on 2 cores).
set -euo pipefail
bin=${HEADROOM:-$(pwd)/build/headroom}
quickstart=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -n "$quickstart" ] && quickstart=$(realpath "$quickstart")
cd "$work"
if [ -z "$quickstart" ]; then
  "$bin" train > train.log
  quickstart=$work/results/quickstart
fi
for steps in 150 250; do  # about 600,000 and 1,000,000 events
  "$bin" plan --set run.name=plan8b-$steps --set model.preset=qwen3-8b --set model.dtype=bf16 \
    --set batch.max_tokens_per_micro_batch=4096 --set run.steps=$steps --set schedule.warmup_steps=1 \
    --set memory.device_capacity=0 --set loss.chunk_size=1024 > plan.log
done
plan8b_150=$work/results/plan8b-150
plan8b_250=$work/results/plan8b-250

ms() {  # median wall ms of 5 runs of "$@"
  local times=()
  for _ in 1 2 3 4 5; do
    local t0 t1
    t0=$(date +%s%N)
    "$@" > /dev/null
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 3p
}
mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.2f", b / 1048576 }'; }

printf '| trace | events | trace MB | text ms | --html ms | HTML MB | --perfetto ms | Perfetto MB | --json MB | page script ms |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for name in quickstart plan8b_150 plan8b_250; do
  dir=${!name}
  trace=$(ls "$dir"/*.rank0.h5 | head -1)
  events=$("$bin" report "$dir" | awk '/events replayed/ { print $2; exit }')
  text=$(ms "$bin" report "$dir")
  html=$(ms "$bin" report "$dir" --html "$name.html")
  perfetto=$(ms "$bin" report "$dir" --perfetto "$name.perfetto.json")
  "$bin" report "$dir" --json > "$name.json"
  script=-
  if command -v chromium > /dev/null; then
    script=$(HOME=$work timeout 120 chromium --headless --disable-gpu --no-sandbox \
      --user-data-dir="$work/chromium" --dump-dom "file://$work/$name.html" 2> /dev/null |
      grep -o 'data-script-ms="[0-9]*"' | grep -o '[0-9]*' || echo "?")
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$events" "$(mb "$trace")" \
    "$text" "$html" "$(mb "$name.html")" "$perfetto" "$(mb "$name.perfetto.json")" \
    "$(mb "$name.json")" "$script"
done
