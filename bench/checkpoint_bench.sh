#!/usr/bin/env bash
# Checkpoint save time and size, checkpoint.format = "sharded" against
# "consolidated", at N = 2 and 4 ranks under mpirun, ZeRO-1 and ZeRO-3: a
# training of `steps` steps saving after every one; the time is `train`'s
# "median X s per save" (rank 0's wall time from the first write until the
# folder is complete on every rank), the size the bytes of the last step-N
# folder. On a machine with fewer cores than ranks, mpirun runs with
# --oversubscribe (the ranks share the cores: say so next to the numbers).
# Prints a Markdown table.
#
#   bash bench/checkpoint_bench.sh [steps] [preset]   (repository root, after a build)
set -euo pipefail
steps=${1:-5}
preset=${2:-tiny}
bin=$(pwd)/build/headroom
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

common=(--set model.preset="$preset" --set model.dtype=bf16 --set run.steps="$steps"
  --set schedule.warmup_steps=1 --set batch.max_tokens_per_micro_batch=256
  --set data.max_sample_tokens=256 --set loss.chunk_size=256 --set data.synthetic_documents=200
  --set checkpoint.save_every=1)
# The corpus once, outside the timed runs.
"$bin" plan "${common[@]}" --set run.steps=1 --set run.name=corpus > corpus.log 2>&1

printf '| format | zero | ranks | save s (median of %s) | bytes on disk | files |\n' "$steps"
printf '|---|---|---|---|---|---|\n'
for stage in 1 3; do
  for n in 2 4; do
    for format in consolidated sharded; do
      name="$format-z$stage-n$n"
      mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np "$n" \
        "$bin" train "${common[@]}" --set zero.stage="$stage" --set checkpoint.format=$format \
        --set batch.grad_accum=$((4 / n)) --set run.name="$name" > "$name.log" 2>&1
      seconds=$(sed -n 's/^checkpoints: .* median \([0-9.]*\) s per save.*/\1/p' "$name.log")
      dir="results/$name/checkpoints/step-$steps"
      bytes=$(du -sb "$dir" | cut -f1)
      files=$(ls "$dir" | wc -l)
      printf '| %s | %s | %s | %s | %s | %s |\n' "$format" "$stage" "$n" "$seconds" \
        "$(echo "$bytes" | sed -e :a -e 's/\B[0-9]\{3\}\>/,&/;ta')" "$files"
    done
  done
done
