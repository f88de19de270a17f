#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the quickstart
# experiment (embedded in the binary; the same text as
# experiments/quickstart.toml). Extra arguments go to `headroom train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default
cmake --build --preset default -j"$(nproc)" --target headroom
./build/headroom train --overwrite "$@"
