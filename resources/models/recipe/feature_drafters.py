"""Drafters that read the target's hidden states, in PyTorch, written to match the engine.

The contract (math, GGUF layouts) is docs/design/target-feature-drafters.md; the C++ side is
engine/drafters/*. Two modules:

- DFlash: a block drafter (Chen et al. 2026, arXiv 2602.06036). Target hidden states of a few
  layers are fused per context token (fc + RMSNorm); each drafter layer projects them to K/V
  context rows; a block [anchor, MASK x (B-1)] embedded with the target's table attends to all
  context rows and bidirectionally within itself; the target's LM head turns block rows
  1..B-1 into the marginals of the next B-1 tokens.
- MTP: DeepSeek-V3's multi-token-prediction module (DeepSeek-V3 report §2.2), one module:
  eh_proj([norm(emb(t_{i+1})); norm(h_i)]) -> one causal llama layer -> the target's final norm
  and LM head predict t_{i+2}.

Both keep the target frozen: embedding, final norm and LM head are the target's tensors.
"""
import math
from dataclasses import dataclass, asdict, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import RMSNorm, Block, rope_tables, Config


# --- DFlash -----------------------------------------------------------------------------------

@dataclass
class DFlashConfig:
    d_model: int = 320        # = the target's width
    n_layer: int = 2
    n_head: int = 8
    n_head_kv: int = 4
    d_ff: int = 864
    n_ctx: int = 256          # longest context (RoPE table)
    block_size: int = 16      # widest block trained (anchor row included)
    # Engine hidden-layer ids (the residual stream after target layer il, 0-based). The GGUF
    # stores them +1 (llama.cpp's convention: the hidden state entering layer il + 1).
    taps: list = field(default_factory=lambda: [1, 3, 4])
    mask_id: int = 0          # <unk>: the MASK token's embedding is the target's row 0
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self):
        return self.d_model // self.n_head

    def to_dict(self):
        return asdict(self)


def neox_tables(head_dim, n_ctx, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = torch.outer(torch.arange(n_ctx, dtype=torch.float64), inv)  # [n_ctx, head_dim/2]
    return ang.cos().float(), ang.sin().float()


def apply_neox(x, cos, sin):
    """x: [..., T, head_dim]; cos/sin: [T, head_dim/2]. Rotates pairs (i, i + head_dim/2)."""
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h], x[..., h:]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)


class DFlashLayer(nn.Module):
    def __init__(self, c: DFlashConfig):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.attn_norm = RMSNorm(c.d_model, c.norm_eps)
        self.wq = nn.Linear(c.d_model, c.n_head * hd, bias=False)
        self.wk = nn.Linear(c.d_model, c.n_head_kv * hd, bias=False)
        self.wv = nn.Linear(c.d_model, c.n_head_kv * hd, bias=False)
        self.wo = nn.Linear(c.n_head * hd, c.d_model, bias=False)
        self.q_norm = RMSNorm(hd, c.norm_eps)
        self.k_norm = RMSNorm(hd, c.norm_eps)
        self.ffn_norm = RMSNorm(c.d_model, c.norm_eps)
        self.w_gate = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.w_up = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.w_down = nn.Linear(c.d_ff, c.d_model, bias=False)

    def kv(self, h, cos, sin):
        """h: [N, T, d] (normed) -> k, v: [N, Hkv, T, hd] (k normed and rotated)."""
        c = self.c
        N, T, _ = h.shape
        k = self.k_norm(self.wk(h).view(N, T, c.n_head_kv, c.head_dim)).transpose(1, 2)
        v = self.wv(h).view(N, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        return apply_neox(k, cos, sin), v

    def forward(self, x, ctx_c, ctx_cos, ctx_sin, cos, sin, mask):
        """x: [N, R, d] block rows; ctx_c: [N, T, d] fused features; mask: [N or 1, R, T + R]
        True = hidden. Returns the new block rows."""
        c = self.c
        N, R, _ = x.shape
        h = self.attn_norm(x)
        q = self.q_norm(self.wq(h).view(N, R, c.n_head, c.head_dim)).transpose(1, 2)
        q = apply_neox(q, cos, sin)
        kb, vb = self.kv(h, cos, sin)
        kc, vc = self.kv(ctx_c, ctx_cos, ctx_sin)
        k, v = torch.cat((kc, kb), dim=2), torch.cat((vc, vb), dim=2)
        rep = c.n_head // c.n_head_kv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c.head_dim)
        att = att.masked_fill(mask.unsqueeze(1), float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(N, R, -1)
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class DFlash(nn.Module):
    """The drafter's own weights; tok_emb / lm_head are the frozen target's, passed in."""

    def __init__(self, c: DFlashConfig):
        super().__init__()
        self.c = c
        self.fc = nn.Linear(len(c.taps) * c.d_model, c.d_model, bias=False)
        self.enc_norm = RMSNorm(c.d_model, c.norm_eps)
        self.layers = nn.ModuleList([DFlashLayer(c) for _ in range(c.n_layer)])
        self.out_norm = RMSNorm(c.d_model, c.norm_eps)
        cos, sin = neox_tables(c.head_dim, c.n_ctx + c.block_size, c.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        for l in self.layers:
            nn.init.normal_(l.wo.weight, std=0.02 / math.sqrt(2 * c.n_layer))
            nn.init.normal_(l.w_down.weight, std=0.02 / math.sqrt(2 * c.n_layer))

    def fuse(self, feats):
        """feats: [N, T, m*d] (taps concatenated in order) -> [N, T, d]."""
        return self.enc_norm(self.fc(feats))

    def forward(self, feats, block_emb, block_pos, mask):
        """feats: [N, T, m*d] context features at positions 0..T-1; block_emb: [N, R, d];
        block_pos: [R] positions of the block rows; mask: [N or 1, R, T + R] (True = hidden).
        Returns the final-normed block rows [N, R, d] (feed them to the target's LM head)."""
        T = feats.shape[1]
        ctx_c = self.fuse(feats)
        ccos, csin = self.cos[:T], self.sin[:T]
        bcos, bsin = self.cos[block_pos], self.sin[block_pos]
        x = block_emb
        for l in self.layers:
            x = l(x, ctx_c, ccos, csin, bcos, bsin, mask)
        return self.out_norm(x)


def dflash_blocks(T, anchors, B):
    """Positions and mask for several blocks over one sequence of T context positions.
    anchors: list of anchor positions a (context rows 0..a-1 visible; block rows at a..a+B-1).
    Returns (block_pos [K*B], mask [K*B, T + K*B], True = hidden)."""
    K = len(anchors)
    pos = torch.cat([torch.arange(a, a + B) for a in anchors])
    mask = torch.ones(K * B, T + K * B, dtype=torch.bool)
    for j, a in enumerate(anchors):
        rows = slice(j * B, (j + 1) * B)
        mask[rows, :a] = False
        mask[rows, T + j * B:T + (j + 1) * B] = False
    return pos, mask


# --- MTP --------------------------------------------------------------------------------------

class MTP(nn.Module):
    """One DeepSeek-V3 MTP module over the frozen target (same head layout as the target)."""

    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.enorm = RMSNorm(c.d_model, c.norm_eps)
        self.hnorm = RMSNorm(c.d_model, c.norm_eps)
        self.eh_proj = nn.Linear(2 * c.d_model, c.d_model, bias=False)
        self.block = Block(c)
        cos, sin = rope_tables(c.head_dim, c.n_ctx, c.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        nn.init.normal_(self.block.wo.weight, std=0.02 / math.sqrt(2))
        nn.init.normal_(self.block.w_down.weight, std=0.02 / math.sqrt(2))

    def forward(self, h, next_emb):
        """h: [N, T, d] target last-layer hidden states (pre final norm) at positions 0..T-1;
        next_emb: [N, T, d] embeddings of t_{i+1}. Returns g [N, T, d] (pre final norm);
        target out(norm(g_i)) predicts t_{i+2}."""
        T = h.shape[1]
        u = self.eh_proj(torch.cat((self.enorm(next_emb), self.hnorm(h)), dim=-1))
        mask = torch.ones(T, T, dtype=torch.bool, device=h.device).triu(1)
        return self.block(u, self.cos[:T], self.sin[:T], mask)
