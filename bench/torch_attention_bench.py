"""PyTorch's attention forward on the shapes of bench/flash_attention_bench.cc.

bf16, head_dim 128, 32 query heads over 8 kv heads (enable_gqa), T = 4096,
8192, 16384: scaled_dot_product_attention with is_causal (its flash
backend) for causal, and FlexAttention (torch.nn.attention.flex_attention,
compiled) for the sliding window of 1024 and for packed documents of 512 to
4096 tokens (the C++ bench's cycle of lengths). TFLOP/s count only the visible pairs, 4 D FLOPs each.
Median of 10 timed calls after 2 untimed (CUDA events). Prints a Markdown
table.

    python3 bench/torch_attention_bench.py [repeats]   (needs a GPU and PyTorch >= 2.5)
"""
import sys

import torch
import torch.nn.functional as F

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 10
H, KV, D = 32, 8, 128


def median_ms(fn):
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def documents(t):
    lengths = [512, 3072, 1024, 4096, 768, 2048, 1536, 2560]
    cu = [0]
    while cu[-1] < t:
        cu.append(min(t, cu[-1] + lengths[(len(cu) - 1) % 8]))
    return cu


print(f"device: {torch.cuda.get_device_name()}; PyTorch {torch.__version__}; bf16, head_dim {D}, "
      f"{H} heads over {KV} kv heads, median of {repeats}\n")
print("| mask | T | visible pairs | PyTorch | ms | TFLOP/s |")
print("|---|---|---|---|---|---|")
try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    flex = torch.compile(flex_attention)
except Exception as e:  # an older PyTorch: SDPA only
    print(f"(no FlexAttention: {e})")
    flex = None

for t in (4096, 8192, 16384):
    q = torch.randn(1, H, t, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, KV, t, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, KV, t, D, device="cuda", dtype=torch.bfloat16)
    pairs = t * (t + 1) / 2
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                              enable_gqa=True))
    print(f"| causal | {t} | {pairs:.3g} | SDPA (flash) | {ms:.3f} | {4 * D * pairs * H / ms / 1e9:.1f} |")
    if flex is None:
        continue
    window = 1024
    pairs = sum(min(i + 1, window) for i in range(t))

    def sliding(b, h, qi, ki):
        return (qi >= ki) & (qi - ki < window)

    mask = create_block_mask(sliding, None, None, t, t)
    ms = median_ms(lambda: flex(q, k, v, block_mask=mask, enable_gqa=True))
    print(f"| sliding_window {window} | {t} | {pairs:.3g} | FlexAttention | {ms:.3f} | "
          f"{4 * D * pairs * H / ms / 1e9:.1f} |")
    cu = documents(t)
    doc = torch.zeros(t, dtype=torch.int32, device="cuda")
    for d in range(len(cu) - 1):
        doc[cu[d]:cu[d + 1]] = d
    pairs = sum((cu[d + 1] - cu[d]) * (cu[d + 1] - cu[d] + 1) / 2 for d in range(len(cu) - 1))

    def in_document(b, h, qi, ki):
        return (doc[qi] == doc[ki]) & (qi >= ki)

    mask = create_block_mask(in_document, None, None, t, t)
    ms = median_ms(lambda: flex(q, k, v, block_mask=mask, enable_gqa=True))
    print(f"| document | {t} | {pairs:.3g} | FlexAttention | {ms:.3f} | "
          f"{4 * D * pairs * H / ms / 1e9:.1f} |")
