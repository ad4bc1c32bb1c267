"""The llama architecture in PyTorch, written to match the engine's forward exactly.

RMSNorm -> attention (RoPE, optional GQA) -> residual, RMSNorm -> SwiGLU -> residual.
RoPE pairs *adjacent* dimensions (2i, 2i+1) of each head: the convention GGUF readers use for
general.architecture = llama, so the exported q/k weights need no permutation.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    n_vocab: int = 4096
    d_model: int = 320
    n_layer: int = 6
    n_head: int = 8
    n_head_kv: int = 4
    d_ff: int = 864
    n_ctx: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self):
        return self.d_model // self.n_head

    def to_dict(self):
        return asdict(self)


# Family v2 (issue 13): the same shapes with a 1,024-token context, fine-tuned from v1 (ctx 256).
TARGET_V1 = Config()
DRAFT_V1 = Config(d_model=128, n_layer=2, n_head=4, n_head_kv=4, d_ff=384)
TARGET = Config(n_ctx=1024)
DRAFT = Config(d_model=128, n_layer=2, n_head=4, n_head_kv=4, d_ff=384, n_ctx=1024)


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, n_ctx, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = torch.outer(torch.arange(n_ctx, dtype=torch.float64), inv)  # [n_ctx, head_dim/2]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin):
    # x: [B, H, T, head_dim]; pairs (2i, 2i+1) rotate by angle pos * theta^(-2i/head_dim)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    r0 = x0 * cos - x1 * sin
    r1 = x0 * sin + x1 * cos
    return torch.stack((r0, r1), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.attn_norm = RMSNorm(c.d_model, c.norm_eps)
        self.wq = nn.Linear(c.d_model, c.n_head * hd, bias=False)
        self.wk = nn.Linear(c.d_model, c.n_head_kv * hd, bias=False)
        self.wv = nn.Linear(c.d_model, c.n_head_kv * hd, bias=False)
        self.wo = nn.Linear(c.n_head * hd, c.d_model, bias=False)
        self.ffn_norm = RMSNorm(c.d_model, c.norm_eps)
        self.w_gate = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.w_up = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.w_down = nn.Linear(c.d_ff, c.d_model, bias=False)

    def forward(self, x, cos, sin, mask):
        c = self.c
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, c.n_head, c.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = c.n_head // c.n_head_kv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c.head_dim)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c.n_vocab, c.d_model)
        self.blocks = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
        self.norm = RMSNorm(c.d_model, c.norm_eps)
        self.out = nn.Linear(c.d_model, c.n_vocab, bias=False)
        cos, sin = rope_tables(c.head_dim, c.n_ctx, c.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.apply(self._init)
        for b in self.blocks:  # scaled init of residual projections (GPT-2)
            nn.init.normal_(b.wo.weight, std=0.02 / math.sqrt(2 * c.n_layer))
            nn.init.normal_(b.w_down.weight, std=0.02 / math.sqrt(2 * c.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        """idx: [B, T] token ids -> logits [B, T, n_vocab]."""
        T = idx.shape[1]
        x = self.tok_emb(idx)
        cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).triu(1)
        for b in self.blocks:
            x = b(x, cos, sin, mask)
        return self.out(self.norm(x))

    def hidden_from_embeds(self, x):
        """x: [B, T, d] input embeddings at positions 0..T-1 (instead of the token lookup) ->
        the residual stream after the last block [B, T, d] (before the final norm). PIPO's
        backbone runs on pair latents this way (docs/design/pipo.md); forward() is unchanged."""
        T = x.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        for b in self.blocks:
            x = b(x, cos, sin, mask)
        return x

    def n_params(self, exclude_embeddings=False):
        n = sum(p.numel() for p in self.parameters())
        if exclude_embeddings:
            n -= self.tok_emb.weight.numel() + self.out.weight.numel()
        return n
