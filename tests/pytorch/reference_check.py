"""The whole-model check: headroom against an independent PyTorch model
(hf_reference.py), in the manner of llm.c's test_gpt2.

  /usr/bin/python3 reference_check.py --dump <torch_reference_dump> [--keep DIR] [--seed N] [--mutate M]

Runs headroom's dump program (dump_model.cc) into a scratch folder, then for
every case loads headroom's safetensors (weights, batch, loss, per-token loss,
every gradient) and compares them with the reference, per tensor, by the
normalized error max|a - b| / max|b| and the relative L2 error
||a - b|| / ||b||:
  fp32: headroom against the reference in float64 on the same weights; the
        normalized error of every tensor within FP32_TOLERANCE.
  bf16: headroom-bf16 and PyTorch-bf16 (the reference run in bfloat16, as HF
        runs a bf16 model) both against the reference in float64 on the same
        bf16 weights; headroom's relative L2 error at most BF16_FACTOR times
        PyTorch's own, plus BF16_FLOOR.
  fp16: headroom-fp16 against the reference in float64 on the same fp16
        weights. Debian's PyTorch 1.13 has no cpu matmul or silu in float16,
        so the yardstick is its bf16 run's error on those weights scaled by
        the ratio of the unit roundoffs, 2^-11 / 2^-8: headroom's relative L2
        error at most (BF16_FACTOR x PyTorch-bf16's + BF16_FLOOR) / 8.
Exit status 0 when every case passes, 1 otherwise (a missing torch included).

--mutate breaks one convention of the reference (the check must then fail):
  rope-interleaved   RoPE rotating pairs (2i, 2i+1) (Meta's original layout)
  gqa-modulo         query head h reads kv head h % KV instead of h // (H/KV)
  qk-norm-dropped    Qwen3 without q_norm / k_norm
  no-qkv-bias        Qwen2 without its q/k/v biases
  no-doc-mask        attention across documents (causal over the whole pack)
(Positions that do not restart per document cannot be seen while attention
stays within each document: RoPE's scores depend only on position
differences, so a per-document offset changes nothing but rounding.)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

for module, package in (("numpy", "python3-numpy"), ("torch", "python3-torch")):
    try:
        __import__(module)
    except ImportError as e:
        print(
            f"FAIL: {sys.executable} cannot import {module} ({e}): the whole-model check needs "
            f"Debian's {package}; scripts/setup.sh installs it (with libopenblas0-pthread for torch)",
            file=sys.stderr,
        )
        sys.exit(1)
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402

# fp32 against float64: 2 layers of fp32 rounding give ~1e-6 (measured over
# seeds 1-8: at most 3.2e-6, a Qwen2 k_proj bias gradient); 1e-5 leaves room,
# and a convention error puts the worst gradient at 0.7 or more (--mutate).
FP32_TOLERANCE = 1e-5
# bf16: both sides round at every op boundary, so their errors against
# float64 are of one size (1-5 %) but not equal: which intermediates stay fp32
# differs (headroom keeps the logits, RoPE's cos/sin and the attention
# probabilities in fp32, HF rounds them to bf16) and the roundings are
# different random walks. The relative L2 error averages over a tensor, so
# its ratio is steadier than the max's. Measured over seeds 1-8 (about 1,700
# tensors), headroom / PyTorch has median 0.8-0.9 for every kind of tensor and
# max 2.3 (the v_proj and k_proj bias gradients: sums over tokens that nearly
# cancel); 3x covers that spread, while a convention error fails every tensor
# of the cases it concerns, the worst gradient at 55x or more (--mutate). The
# floor, a quarter of bf16's unit roundoff 2^-8, covers tensors PyTorch
# happens to get nearly exact (the loss, a mean whose roundings cancel:
# PyTorch 1e-5, headroom up to 3e-4).
BF16_FACTOR = 3.0
BF16_FLOOR = 2.0**-10

ARCHS = ("llama", "qwen2", "qwen3")
HEADS = ("untied", "tied")
DTYPES = ("fp32", "bf16", "fp16")
# fp16 keeps 3 more mantissa bits than bf16: its rounding errors are 8x smaller.
FP16_OVER_BF16 = 2.0**-3


def rel_l2(a, b):
    a, b = a.double(), b.double()
    scale = b.norm().item()
    return (a - b).norm().item() / scale if scale else (a - b).norm().item()


def norm_err(a, b):
    a, b = a.double(), b.double()
    scale = b.abs().max().item()
    diff = (a - b).abs().max().item()
    if scale == 0:
        return diff
    return diff / scale


def batch_from(results):
    """The batch as the reference sees it, derived from tokens and cu_seqlens
    alone (targets: the next token of the same document; positions from 0 in
    each document), and checked against what headroom used."""
    tokens = results["batch.tokens"].long()
    cu = results["batch.cu_seqlens"].long().tolist()
    T = tokens.shape[0]
    if cu[0] != 0 or cu[-1] != T or any(a >= b for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens {cu} is not a partition of {T} tokens")
    doc_ids = torch.zeros(T, dtype=torch.long)
    positions = torch.zeros(T, dtype=torch.long)
    targets = torch.full((T,), -1, dtype=torch.long)
    for d, (a, b) in enumerate(zip(cu, cu[1:])):
        doc_ids[a:b] = d
        positions[a:b] = torch.arange(b - a)
        targets[a : b - 1] = tokens[a + 1 : b]
    for name, mine in (("positions", positions), ("targets", targets)):
        theirs = results[f"batch.{name}"].long()
        if not torch.equal(mine, theirs):
            bad = (mine != theirs).nonzero()[0].item()
            raise ValueError(f"batch.{name}[{bad}] = {theirs[bad].item()}, expected {mine[bad].item()}")
    return tokens, positions, doc_ids, targets


def apply_mutation(mutation, model, positions, doc_ids):
    """The broken variant of the reference that --mutate asks for."""
    if mutation == "rope-interleaved":

        def cos_sin(pos, head_dim, theta, dtype):
            inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
            emb = (pos.float()[:, None] * inv_freq[None, :]).repeat_interleave(2, dim=-1)
            return emb.cos().to(dtype), emb.sin().to(dtype)

        def rotate_pairs(x):
            return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)

        ref.rope_cos_sin, ref.rotate_half = cos_sin, rotate_pairs
    elif mutation == "gqa-modulo":
        ref.repeat_kv = lambda x, rep: x.repeat(rep, 1, 1)
    elif mutation == "qk-norm-dropped":
        for layer in model.model.layers:
            if model.c.qk_norm:
                layer.self_attn.q_norm.forward = lambda x: x
                layer.self_attn.k_norm.forward = lambda x: x
    elif mutation == "no-qkv-bias":
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    if proj.bias is not None:
                        proj.bias.zero_()
    elif mutation == "no-doc-mask":
        doc_ids = torch.zeros_like(doc_ids)
    elif mutation is not None:
        raise ValueError(f"--mutate {mutation}: unknown")
    return positions, doc_ids


def run_reference(config, weights, dtype, batch, mutation):
    tokens, positions, doc_ids, targets = batch
    model = ref.CausalLM(config)
    model.load(weights, dtype)
    positions, doc_ids = apply_mutation(mutation, model, positions, doc_ids)
    loss, token_loss, grads = ref.loss_and_grads(model, tokens, positions, doc_ids, targets)
    # A mutation can leave a parameter unused (no gradient): count it as zero.
    for name, p in model.named_parameters():
        if grads.get(name) is None:
            grads[name] = torch.zeros_like(p)
    return loss, token_loss, grads


def compare_case(case_dir, dtype_name, mutation):
    """Rows (tensor, max|ref|, headroom and pytorch normalized errors, headroom and
    pytorch relative L2 errors, within tolerance)."""

    with open(os.path.join(case_dir, "config.json")) as f:
        config = ref.Config(json.load(f))
    weights = ref.read_safetensors(os.path.join(case_dir, "model.safetensors"))
    results = ref.read_safetensors(os.path.join(case_dir, "results.safetensors"))
    batch = batch_from(results)
    counted = batch[3] >= 0

    exact_loss, exact_tokens, exact_grads = run_reference(config, weights, torch.float64, batch, mutation)
    # fp16: PyTorch's bf16 run is the yardstick (no fp16 matmul on its cpu).
    low = torch.float32 if dtype_name == "fp32" else torch.bfloat16
    pt_loss, pt_tokens, pt_grads = run_reference(config, weights, low, batch, mutation)

    names = sorted(exact_grads)
    hr_names = sorted(n[len("grad.") :] for n in results if n.startswith("grad."))
    if hr_names != names:
        raise ValueError(f"{case_dir}: headroom's gradients {hr_names} != the reference's {names}")

    triples = [
        ("loss", results["loss"], pt_loss.reshape(1), exact_loss.reshape(1)),
        ("token_loss (lse - logit[target])", results["token_loss"][counted], pt_tokens[counted],
         exact_tokens[counted]),
    ]
    triples += [(f"grad {n}", results["grad." + n], pt_grads[n], exact_grads[n]) for n in names]
    rows = []
    for label, hr, pt, exact in triples:
        m_hr, m_pt = norm_err(hr, exact), norm_err(pt, exact)
        l_hr, l_pt = rel_l2(hr, exact), rel_l2(pt, exact)
        if dtype_name == "fp32":
            ok = m_hr <= FP32_TOLERANCE
        elif dtype_name == "bf16":
            ok = l_hr <= BF16_FACTOR * l_pt + BF16_FLOOR
        else:
            ok = l_hr <= FP16_OVER_BF16 * (BF16_FACTOR * l_pt + BF16_FLOOR)
        rows.append((label, exact.double().abs().max().item(), m_hr, m_pt, l_hr, l_pt, ok))
    return rows


def blas_in_use():
    torch.mm(torch.ones(8, 8), torch.ones(8, 8))
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.lower()}
    return ", ".join(sorted(libs)) or "none mapped"


def print_case(case, rows):
    print(f"\n{case}")
    print(f"  {'':53s} {'':9s} {'max|x-ref|/max|ref|':>19s} {'||x-ref||/||ref||':>19s}")
    print(f"  {'tensor':53s} {'max|ref|':>9s} {'headroom':>9s} {'pytorch':>9s} {'headroom':>9s} {'pytorch':>9s}")
    for label, scale, m_hr, m_pt, l_hr, l_pt, ok in rows:
        mark = "" if ok else "  FAIL"
        print(f"  {label:53s} {scale:9.2e} {m_hr:9.2e} {m_pt:9.2e} {l_hr:9.2e} {l_pt:9.2e}{mark}")


def print_summary(results):
    """One line per case: the gated error (fp32: normalized, bf16: relative
    L2) of the loss, the per-token loss and the worst gradient, headroom then
    pytorch, and the gradient where headroom is furthest behind pytorch."""
    print("\nsummary (fp32: max|x-ref|/max|ref|; bf16, fp16: ||x-ref||/||ref||), each headroom then "
          "pytorch (fp16: pytorch in bf16)")
    print(f"{'case':18s} {'loss':>19s} {'token_loss':>19s} {'worst gradient':>19s}  worst hr/pt gradient ratio  fails")
    for case, dtype_name, rows in results:
        g = 2 if dtype_name == "fp32" else 4
        grads = [r for r in rows if r[0].startswith("grad")]
        worst = max(grads, key=lambda r: r[g])
        behind = max(grads, key=lambda r: r[g] / max(r[g + 1], 1e-30))
        ratio = min(behind[g] / max(behind[g + 1], 1e-30), 9999)
        short = behind[0].replace("grad model.layers.", "L").replace("grad ", "")[:22]
        fails = sum(not r[6] for r in rows)
        loss, tok = rows[0], rows[1]
        print(
            f"{case:18s} {loss[g]:9.2e} {loss[g + 1]:9.2e} {tok[g]:9.2e} {tok[g + 1]:9.2e} "
            f"{worst[g]:9.2e} {worst[g + 1]:9.2e}  {ratio:7.2f} {short:22s} {fails}"
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump", required=True, help="the torch_reference_dump program")
    parser.add_argument("--keep", help="write the dump here and keep it (default: a scratch folder)")
    parser.add_argument("--seed", type=int, default=1, help="of the weights and the batch")
    parser.add_argument("--mutate", help="break one convention of the reference (see the docstring)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny shapes: threads cost more than they give
    start = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="headroom-torchref-") as scratch:
        out = args.keep or scratch
        # One thread: at these shapes OpenMP's threads only spin, and on a
        # loaded 2-core machine libgomp's spin-waiting made the dump 10x slower.
        env = dict(os.environ, OMP_NUM_THREADS="1")
        command = [args.dump, out, str(args.seed)]
        dump = subprocess.run(command, capture_output=True, text=True, env=env)
        if dump.returncode != 0:
            print(f"FAIL: {' '.join(command)} exited with {dump.returncode}:\n{dump.stdout}{dump.stderr}")
            return 1
        dumped = time.perf_counter()
        print(f"torch {torch.__version__}, BLAS {blas_in_use()}; seed {args.seed}, mutation {args.mutate}")
        print(
            f"ref = the reference in float64; fp32: headroom max|x-ref|/max|ref| <= {FP32_TOLERANCE:g}; "
            f"bf16: headroom ||x-ref||/||ref|| <= {BF16_FACTOR:g} x pytorch-bf16's + {BF16_FLOOR:g}; "
            f"fp16: the bf16 bound x {FP16_OVER_BF16:g}"
        )
        results, failures = [], 0
        for arch in ARCHS:
            for head in HEADS:
                for dtype_name in DTYPES:
                    case = f"{arch}-{head}-{dtype_name}"
                    try:
                        rows = compare_case(os.path.join(out, case), dtype_name, args.mutate)
                    except (OSError, ValueError) as e:
                        print(f"\nFAIL: {case}: {e}")
                        failures += 1
                        continue
                    print_case(case, rows)
                    failures += sum(not r[6] for r in rows)
                    results.append((case, dtype_name, rows))
        print_summary(results)
        end = time.perf_counter()
        print(f"\ndump {dumped - start:.1f} s, reference {end - dumped:.1f} s, total {end - start:.1f} s")
    if failures:
        print(f"FAIL: {failures} tensors (or cases) outside tolerance")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
