"""A Llama / Qwen2 / Qwen3 decoder in plain PyTorch, as Hugging Face
transformers writes it (modeling_llama.py, modeling_qwen2.py,
modeling_qwen3.py), without the transformers library.

Module and parameter names are Hugging Face's, so named_parameters() gives
the names of a checkpoint ("model.layers.0.self_attn.q_proj.weight"). The
conventions under test:
  - RMSNorm in fp32 (float64 for a float64 model), weight applied after the
    cast back: weight * (x * rsqrt(mean(x^2) + eps)).to(input dtype)
  - RoPE "rotate_half": the pair (i, i + D/2) rotates by position * inv_freq[i],
    inv_freq[i] = 1 / theta^(2i / D), angles in fp32 as HF computes them,
    cos / sin cast to the activations' dtype
  - Qwen3: per-head RMSNorm over D on q and k (q_norm, k_norm), before RoPE
  - Qwen2: bias on q_proj, k_proj, v_proj; Llama: attention_bias
  - GQA: query head h reads key/value head h // (H / KV) (repeat_kv)
  - SwiGLU MLP: down(silu(gate(x)) * up(x))
  - eager attention: softmax in fp32, probabilities cast back
  - tied head: lm_head.weight is model.embed_tokens.weight (one Parameter)
  - loss: cross-entropy of logits.float(), mean over counted tokens
Packed documents: positions restart at 0 in each document and a token
attends only to earlier tokens of its own document (a block-diagonal causal
mask), what flash-attention's varlen path computes from cu_seqlens.
"""

import json
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

_NUMPY_OF = {"F32": "<f4", "I32": "<i4", "I64": "<i8", "U8": "u1"}


def read_safetensors(path):
    """{name: torch tensor}; BF16 widened exactly and returned as bfloat16, F16
    read by numpy's own IEEE half (an independent decoder) as float16."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = data[base + begin : base + end]
        shape = entry["shape"]
        if entry["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            t = torch.from_numpy(bits.view(np.float32).reshape(shape).copy()).to(torch.bfloat16)
        elif entry["dtype"] == "F16":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(shape).copy())
            t = t.to(torch.float16)
        elif entry["dtype"] in _NUMPY_OF:
            t = torch.from_numpy(np.frombuffer(raw, dtype=_NUMPY_OF[entry["dtype"]]).reshape(shape).copy())
        else:
            raise ValueError(f"{path}: tensor {name}: dtype {entry['dtype']} not handled")
        out[name] = t
    return out


def _acc(dtype):
    """The dtype HF upcasts to for norms and softmax: fp32, or float64 for a float64 model."""
    return torch.float64 if dtype == torch.float64 else torch.float32


class Config:
    def __init__(self, j):
        arch = j["architectures"][0]
        if arch not in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"):
            raise ValueError(f"config.json: architectures[0] {arch} not handled")
        self.arch = arch
        self.vocab_size = j["vocab_size"]
        self.hidden_size = j["hidden_size"]
        self.intermediate_size = j["intermediate_size"]
        self.num_layers = j["num_hidden_layers"]
        self.num_heads = j["num_attention_heads"]
        self.num_kv_heads = j.get("num_key_value_heads", self.num_heads)
        self.head_dim = j.get("head_dim", self.hidden_size // self.num_heads)
        self.rope_theta = j.get("rope_theta", 10000.0)
        self.rms_norm_eps = j["rms_norm_eps"]
        self.tie = j.get("tie_word_embeddings", False)
        # Qwen2Attention hard-codes bias=True on q/k/v; the others read attention_bias.
        self.qkv_bias = True if arch == "Qwen2ForCausalLM" else j.get("attention_bias", False)
        self.qk_norm = arch == "Qwen3ForCausalLM"


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(_acc(dtype))
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_cos_sin(positions, head_dim, theta, dtype):
    """(T, D) cos and sin, as LlamaRotaryEmbedding: fp32 angles, then cast."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, rep):
    """(KV, T, D) -> (KV * rep, T, D): kv head j serves query heads j*rep .. j*rep + rep-1."""
    KV, T, D = x.shape
    return x[:, None].expand(KV, rep, T, D).reshape(KV * rep, T, D)


def apply_rope(x, cos, sin):
    """x (heads, T, D); cos, sin (T, D)."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        H, KV, D, C = c.num_heads, c.num_kv_heads, c.head_dim, c.hidden_size
        self.q_proj = nn.Linear(C, H * D, bias=c.qkv_bias)
        self.k_proj = nn.Linear(C, KV * D, bias=c.qkv_bias)
        self.v_proj = nn.Linear(C, KV * D, bias=c.qkv_bias)
        self.o_proj = nn.Linear(H * D, C, bias=False)
        if c.qk_norm:
            self.q_norm = RMSNorm(D, c.rms_norm_eps)
            self.k_norm = RMSNorm(D, c.rms_norm_eps)

    def forward(self, x, cos, sin, mask):
        c = self.c
        T, H, KV, D = x.shape[0], c.num_heads, c.num_kv_heads, c.head_dim
        q = self.q_proj(x).view(T, H, D)
        k = self.k_proj(x).view(T, KV, D)
        v = self.v_proj(x).view(T, KV, D)
        if c.qk_norm:  # Qwen3: over D, per head, before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # (heads, T, D)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k, v = repeat_kv(k, H // KV), repeat_kv(v, H // KV)
        scores = torch.matmul(q, k.transpose(1, 2)) * D**-0.5
        scores = scores.masked_fill(~mask, float("-inf"))
        p = F.softmax(scores, dim=-1, dtype=_acc(q.dtype)).to(q.dtype)
        out = torch.matmul(p, v).transpose(0, 1).reshape(T, H * D)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class CausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Decoder(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie:
            self.lm_head.weight = self.model.embed_tokens.weight

    def load(self, weights, dtype):
        """Every parameter from `weights` ({HF name: tensor}), converted to
        dtype; the file must hold exactly this architecture's tensors."""
        names = dict(self.named_parameters())  # a tied head appears once
        if set(names) != set(weights):
            raise ValueError(
                f"tensor names differ: only in the file {sorted(set(weights) - set(names))}, "
                f"only in the reference {sorted(set(names) - set(weights))}"
            )
        self.to(dtype)
        with torch.no_grad():
            for name, p in names.items():
                if tuple(p.shape) != tuple(weights[name].shape):
                    raise ValueError(f"{name}: shape {tuple(weights[name].shape)}, expected {tuple(p.shape)}")
                p.copy_(weights[name].to(dtype))

    def forward(self, tokens, positions, doc_ids):
        """tokens, positions, doc_ids (T) int64 -> logits (T, V)."""
        dtype = self.model.embed_tokens.weight.dtype
        T = tokens.shape[0]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        mask = causal & (doc_ids[:, None] == doc_ids[None, :])
        cos, sin = rope_cos_sin(positions, self.c.head_dim, self.c.rope_theta, dtype)
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.model.norm(x))


def loss_and_grads(model, tokens, positions, doc_ids, targets):
    """Mean cross-entropy over targets != -1, each token's loss (0 without a
    target), and {HF name: gradient}, all detached."""
    model.zero_grad(set_to_none=True)
    logits = model(tokens, positions, doc_ids)
    wide = logits.to(_acc(logits.dtype))
    token_loss = F.cross_entropy(wide, targets, ignore_index=-1, reduction="none")
    loss = F.cross_entropy(wide, targets, ignore_index=-1)
    loss.backward()
    # None for a parameter the loss does not reach (only a broken variant has one).
    grads = {n: None if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()}
    return loss.detach(), token_loss.detach(), grads
