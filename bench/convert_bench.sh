#!/usr/bin/env bash
# `headroom data convert` throughput (JSONL MB/s, tokens/s) and peak RSS on
# generated corpora of ~20 and ~100 MB: token ids only, ids + loss_mask, and
# gzip. The documents are a `headroom data synth` Markov corpus (vocab 32000,
# lognormal lengths, median 600 tokens) written out as JSONL by numpy/h5py.
# Peak RSS that does not grow from 20 to 100 MB is the streaming claim.
# Prints a Markdown table of medians over 3 runs.
#
#   bash bench/convert_bench.sh              (from the repository root, after a build)
#   HEADROOM_BIN=build-x/headroom bash bench/convert_bench.sh
set -euo pipefail
bin=$(realpath "${HEADROOM_BIN:-build/headroom}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

"$bin" data synth corpus.h5 --vocab 32000 --documents 12000 \
  --lengths lognormal:600,1.0,16-16384 --seed 1 > synth.log

/usr/bin/python3 - "$bin" <<'PY'
import json, os, statistics, subprocess, sys
import h5py, numpy as np

bin_ = sys.argv[1]
with h5py.File("corpus.h5", "r") as f:
    tokens, offsets = f["tokens"][:], f["offsets"][:]
rng = np.random.default_rng(0)

def write_jsonl(path, megabytes, with_mask):
    """Documents of the corpus, cycled, until the file reaches `megabytes` (10^6 bytes)."""
    size, d = 0, 0
    with open(path, "w") as out:
        while size < megabytes * 1e6:
            k = d % (len(offsets) - 1)
            ids = tokens[offsets[k]:offsets[k + 1]]
            line = '{"input_ids": [' + ", ".join(map(str, ids.tolist())) + "]"
            if with_mask:  # a prompt of random length, then the answer
                p = int(rng.integers(0, len(ids)))
                line += ', "loss_mask": [' + ", ".join(["0"] * p + ["1"] * (len(ids) - p)) + "]"
            line += "}\n"
            out.write(line)
            size += len(line)
            d += 1
    return size

cases = [("ids", 20, False, False), ("ids", 100, False, False),
         ("ids + loss_mask", 100, True, False), ("ids, gzip -6", 100, False, True)]
rows = []
for name, mb, mask, gz in cases:
    path = f"in_{mb}_{int(mask)}.jsonl"
    if not os.path.exists(path):
        write_jsonl(path, mb, mask)
    jsonl_bytes = os.path.getsize(path)
    if gz:
        subprocess.run(["gzip", "-6", "-k", "-f", path], check=True)
        path += ".gz"
    runs = []
    for _ in range(3):
        p = subprocess.Popen([bin_, "data", "convert", path, "out.h5", "--vocab", "32000",
                              "--overwrite", "--json"], stdout=subprocess.PIPE)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
        assert status == 0, f"convert failed on {path}"
        s = json.loads(out)
        # Peak RSS as the converter reports it (VmHWM, after exec): the
        # child's ru_maxrss would include this Python process, forked.
        runs.append(dict(s=s, cpu=usage.ru_utime + usage.ru_stime,
                         rss=s["peak_rss_bytes"]))
    med = lambda key: statistics.median(r[key] for r in runs)
    s = runs[0]["s"]
    seconds = statistics.median(r["s"]["seconds"] for r in runs)
    rows.append((name, jsonl_bytes / 1e6, os.path.getsize(path) / 1e6, s["documents"], s["tokens"],
                 seconds, jsonl_bytes / 1e6 / seconds, s["tokens"] / seconds / 1e6, med("cpu"),
                 med("rss") / 2**20, os.path.getsize("out.h5") / 1e6))

print("| input | JSONL MB | file MB | documents | tokens | median s | JSONL MB/s | Mtokens/s "
      "| CPU s | peak RSS | HDF5 MB |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.1f} | {r[3]} | {r[4]} | {r[5]:.2f} | {r[6]:.1f} | "
          f"{r[7]:.2f} | {r[8]:.2f} | {r[9]:.1f} MiB | {r[10]:.1f} |")
PY
