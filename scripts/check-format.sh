#!/usr/bin/env bash
# Fails when a C++/CUDA source differs from what clang-format (the repo's
# .clang-format) would write. `scripts/check-format.sh --fix` rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
# Tracked files and new ones not yet added (but not ignored ones): a new
# header formatted only after `git add` was once what failed CI.
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
clang-format --dry-run --Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
