#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test
# suite (ctest). Also checks formatting, since CI treats style as a test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fetch-test-assets.sh  # the Qwen3 tokenizer.json the tokenizer tests need
bash scripts/check-format.sh
cmake --preset default
cmake --build --preset default -j"$(nproc)"
ctest --preset default -j"$(nproc)"
