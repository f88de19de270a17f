"""PyTorch's side of the speed comparisons: one training step of a Qwen3-shaped
model (Hugging Face's conventions, plain modules), AdamW, timed over `steps`
steps; prints the median tokens/s of the steps after the first.

  python3 bench/torch_qwen3_step.py DTYPE STEPS V C F L H KV D B S [DEVICE [ATTENTION [THETA]]]

DTYPE fp32 or bf16 (torch.autocast), DEVICE cpu (the default: 2 threads, as
bench/torch_peer_bench.sh runs it) or cuda (scripts/device-check.sh), ATTENTION
eager (scores, causal mask, softmax, as HF's eager path; the default, since
Debian's PyTorch 1.13 has no scaled_dot_product_attention) or sdpa.

With HEADROOM_PACKED_BINS=FILE (a JSON array of bins, each an array of document
lengths summing to S; B must be 1) every step is one packed row as headroom's
packed batches make it: step i takes bin i mod len(bins), its documents attend
causally within themselves only (an additive [S, S] block-diagonal mask built
in the step, as a collator's 4-D mask is, since eager attention has no varlen
form) and their rotary positions restart at each document (position_ids).
"""
import json, os
import statistics, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

dtype, steps = sys.argv[1], int(sys.argv[2])
V, C, FF, L, H, KV, D, B, S = map(int, sys.argv[3:12])
DEVICE = sys.argv[12] if len(sys.argv) > 12 else "cpu"
ATTENTION = sys.argv[13] if len(sys.argv) > 13 else "eager"
if DEVICE == "cpu":
    torch.set_num_threads(2)
torch.manual_seed(0)
EPS = 1e-6
THETA = float(sys.argv[14]) if len(sys.argv) > 14 else 1e4


class RMSNorm(nn.Module):  # Hugging Face's: in fp32, then back to the input dtype
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
        return self.weight * h.to(x.dtype)


def rotate_half(x):
    return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)


inv_freq = THETA ** (-torch.arange(0, D, 2).float() / D)
angles = torch.outer(torch.arange(S).float(), inv_freq)
COS = torch.cat((angles, angles), -1).cos().to(DEVICE)
SIN = torch.cat((angles, angles), -1).sin().to(DEVICE)
CAUSAL = torch.full((S, S), float("-inf")).triu(1).to(DEVICE) if ATTENTION == "eager" else None
PACKED_BINS = None
if os.environ.get("HEADROOM_PACKED_BINS"):
    PACKED_BINS = json.load(open(os.environ["HEADROOM_PACKED_BINS"]))
    assert B == 1 and all(sum(b) == S for b in PACKED_BINS), "bins must be one row of S tokens"
    assert ATTENTION == "eager", "packed bins need the eager path's mask"


def packed_row(lengths):
    """The block-diagonal causal mask and the positions of one packed row."""
    doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    starts = torch.cumsum(torch.tensor([0] + lengths[:-1]), 0)
    positions = torch.arange(S) - starts[doc]
    visible = (doc[:, None] == doc[None, :]) & (torch.arange(S)[:, None] >= torch.arange(S)[None, :])
    mask = torch.zeros(S, S).masked_fill(~visible, float("-inf"))
    return mask.to(DEVICE), positions.to(DEVICE)


class Step:  # what changes per step: the mask and rotary tables
    mask, cos, sin = CAUSAL, COS, SIN


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(C), RMSNorm(C)
        self.q_proj, self.k_proj = nn.Linear(C, H * D, bias=False), nn.Linear(C, KV * D, bias=False)
        self.v_proj, self.o_proj = nn.Linear(C, KV * D, bias=False), nn.Linear(H * D, C, bias=False)
        self.q_norm, self.k_norm = RMSNorm(D), RMSNorm(D)
        self.gate_proj, self.up_proj = nn.Linear(C, FF, bias=False), nn.Linear(C, FF, bias=False)
        self.down_proj = nn.Linear(FF, C, bias=False)

    def forward(self, x):
        h = self.input_layernorm(x)
        q = self.q_norm(self.q_proj(h).view(B, S, H, D)).transpose(1, 2)
        k = self.k_norm(self.k_proj(h).view(B, S, KV, D)).transpose(1, 2)
        v = self.v_proj(h).view(B, S, KV, D).transpose(1, 2)
        cos, sin = Step.cos.to(q.dtype), Step.sin.to(q.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        if ATTENTION == "sdpa":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q, k.transpose(2, 3)) * D**-0.5 + Step.mask.to(q.dtype)
            p = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            a = torch.matmul(p, v)
        a = a.transpose(1, 2).reshape(B, S, H * D)
        x = x + self.o_proj(a)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList(Layer() for _ in range(L))
        self.norm = RMSNorm(C)

    def forward(self, ids, targets):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        logits = F.linear(self.norm(x), self.embed_tokens.weight)  # tied head
        return F.cross_entropy(logits.float().view(-1, V), targets.view(-1))


model = Model().to(DEVICE)
for p in model.parameters():
    if p.dim() == 2:
        nn.init.normal_(p, std=0.02)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
ids = torch.randint(0, V, (B, S), device=DEVICE)
targets = torch.roll(ids, -1, 1)
times = []
for step in range(steps):
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if PACKED_BINS:
        Step.mask, positions = packed_row(PACKED_BINS[step % len(PACKED_BINS)])
        Step.cos, Step.sin = COS[positions], SIN[positions]
    opt.zero_grad(set_to_none=True)
    with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=dtype == "bf16"):
        loss = model(ids, targets)
    loss.backward()
    opt.step()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
print(f"{B * S / statistics.median(times[1:]):.0f}")
