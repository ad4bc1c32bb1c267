"""PIPO ("Pair-In, Pair-Out") dual-end decoding in PyTorch, written to match the engine.

The contract (math, file layout, release unit) is docs/design/pipo.md; the C++ side is
engine/pipo/. A pair sequence is a flat id sequence z of even length 2m, pair j = (z[2j],
z[2j+1]); the second slot may be PAD (-1), which has its own embedding row (pad_embd).

- Compressor: latent_j = e(a) + e(b) + fc2(SiLU(fc1([e(a); e(b)]))), fc1 2d -> 2d, fc2 2d -> d,
  both with bias; fc2 and pad_embd start at zero, so the untrained compressor is e(a) + e(b)
  (e(a) for (a, PAD)).
- Backbone: model.Llama run on the latents at positions 0..m-1 (Llama.hidden_from_embeds);
  h_j = residual stream after the last layer, logits_j = out(norm(h_j)) predicts the first token
  of pair j + 1.
- MTP head: feature_drafters.MTP (the specchat-mtp head) bound to the backbone: row j takes h_j
  and t1 = the first token of pair j + 1 at position j; its embedding, final norm and LM head are
  the backbone's tensors; its logits predict the second token of pair j + 1.
- Confidence: c_j = sigmoid(fc2(SiLU(fc1(RMSNorm([h_j; g_j]) * w)))), fc1 2d -> C, fc2 C -> 1.

Helpers: pair_align / pairs_of (flat ids <-> [m, 2]), Pipo.step (one decode step by full
recompute, the reference for the engine's decoder), load_unit (a release unit folder read back
from its GGUF files: exactly the F16-rounded numbers the engine loads).
"""
import json
import os
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import Llama, RMSNorm, TARGET, Config
from feature_drafters import MTP

PAD = -1           # storage's kPairPad: never a vocabulary id
EOS_ID, EOT_ID = 2, 6


@dataclass
class PipoConfig:
    d_model: int = 320
    conf_dim: int = 128       # C
    pair_size: int = 2
    norm_eps: float = 1e-5

    def to_dict(self):
        return asdict(self)


def pair_align(ids):
    """A prompt of odd length gets one PAD appended."""
    ids = list(ids)
    return ids + [PAD] if len(ids) % 2 else ids


def pairs_of(z):
    """Flat pair sequence (len 2m, PAD = -1) -> LongTensor [m, 2]."""
    assert len(z) % 2 == 0, len(z)
    assert all(z[i] != PAD for i in range(0, len(z), 2)), "a pair's first slot is never PAD"
    return torch.tensor(z, dtype=torch.long).view(-1, 2)


class Compressor(nn.Module):
    def __init__(self, c: PipoConfig):
        super().__init__()
        d = c.d_model
        self.pad_embd = nn.Parameter(torch.zeros(d))
        self.fc1 = nn.Linear(2 * d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        nn.init.zeros_(self.fc2.weight)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, emb, pairs):
        """emb: the backbone's nn.Embedding; pairs: [..., 2] ids (second may be PAD) -> [..., d]."""
        a, b = pairs[..., 0], pairs[..., 1]
        ea = emb(a)
        eb = torch.where((b == PAD).unsqueeze(-1), self.pad_embd.expand_as(ea), emb(b.clamp_min(0)))
        x = torch.cat((ea, eb), dim=-1)
        return ea + eb + self.fc2(F.silu(self.fc1(x)))


class Confidence(nn.Module):
    def __init__(self, c: PipoConfig):
        super().__init__()
        self.norm = RMSNorm(2 * c.d_model, c.norm_eps)
        self.fc1 = nn.Linear(2 * c.d_model, c.conf_dim)
        self.fc2 = nn.Linear(c.conf_dim, 1)

    def logit(self, h, g):
        return self.fc2(F.silu(self.fc1(self.norm(torch.cat((h, g), dim=-1))))).squeeze(-1)

    def forward(self, h, g):
        return torch.sigmoid(self.logit(h, g))


class Pipo(nn.Module):
    def __init__(self, bc: Config = TARGET, pc: PipoConfig = None):
        super().__init__()
        pc = pc or PipoConfig(d_model=bc.d_model, norm_eps=bc.norm_eps)
        assert pc.d_model == bc.d_model
        self.bc, self.pc = bc, pc
        self.backbone = Llama(bc)
        self.comp = Compressor(pc)
        self.mtp = MTP(bc)
        self.conf = Confidence(pc)

    # --- pieces ---
    def latents(self, pairs):
        return self.comp(self.backbone.tok_emb, pairs)

    def hidden(self, pairs):
        """pairs: [B, m, 2] -> h [B, m, d] (pre final norm)."""
        return self.backbone.hidden_from_embeds(self.latents(pairs))

    def head(self, x):
        """Final norm + LM head of the backbone (shared by the MTP head)."""
        return self.backbone.out(self.backbone.norm(x))

    def mtp_g(self, h, t1):
        """h: [B, m, d]; t1: [B, m] the first token of pair j + 1 for each row j -> g [B, m, d]."""
        return self.mtp(h, self.backbone.tok_emb(t1))

    # --- one decode step (full recompute; the engine's reference) ---
    @torch.no_grad()
    def step(self, z, threshold, temperature=0.0, gen=None, eot=(EOS_ID, EOT_ID)):
        """z: flat pair sequence (even length, PAD = -1). Returns (pair [t1, t2 or PAD], info)
        following docs/design/pipo.md "A decode step"."""
        pairs = pairs_of(z).unsqueeze(0)
        h = self.hidden(pairs)                      # [1, m, d]
        logits = self.head(h[0, -1])
        t1 = sample(logits, temperature, gen)
        info = {"logits": logits, "t1": t1, "ran_head": False}
        if t1 in eot or threshold >= 1.0:
            return [t1, PAD], info
        t1_rows = torch.cat((pairs[0, 1:, 0], torch.tensor([t1])))   # row j: first token of pair j+1
        g = self.mtp_g(h, t1_rows.unsqueeze(0))     # [1, m, d]
        ml = self.head(g[0, -1])
        t2 = sample(ml, temperature, gen)
        c = self.conf(h[0, -1], g[0, -1]).item()
        info.update(ran_head=True, mtp_logits=ml, t2=t2, conf=c)
        return ([t1, t2] if c >= threshold else [t1, PAD]), info

    @torch.no_grad()
    def generate(self, z, steps, threshold, temperature=0.0, gen=None, max_raw=None, confs=None):
        """Appends up to `steps` pairs (or until max_raw raw tokens); stops after an end token.
        confs: a list that receives each step's confidence (None where the head did not run)."""
        z = list(z)
        out, raw = [], 0
        for _ in range(steps):
            pair, info = self.step(z, threshold, temperature, gen)
            if confs is not None:
                confs.append(round(info["conf"], 6) if info["ran_head"] else None)
            if max_raw is not None and pair[1] != PAD and raw + 2 > max_raw:
                pair = [pair[0], PAD]
            out.append(pair)
            z += pair
            raw += 1 + (pair[1] != PAD)
            if pair[0] in (EOS_ID, EOT_ID) or (pair[1] in (EOS_ID, EOT_ID)):
                break
            if max_raw is not None and raw >= max_raw:
                break
        return out


def sample(logits, temperature, gen=None):
    if temperature <= 0:
        return int(logits.argmax())
    p = F.softmax(logits.double() / temperature, -1)
    return int(torch.multinomial(p, 1, generator=gen))


# --- construction -----------------------------------------------------------------------------

def init_from_gguf(target_path, mtp_path, seed=0):
    """The untrained PIPO model: backbone = the plain target's weights, MTP = specchat-mtp's,
    compressor fc2 / pad_embd zero (so it starts as e(a) + e(b)), the rest seeded."""
    from reference_hidden import load_gguf_model
    from train_drafters import warm_start
    torch.manual_seed(seed)
    m = Pipo(TARGET)
    tgt, _ = load_gguf_model(target_path, TARGET)
    m.backbone.load_state_dict(tgt.state_dict())
    warm_start("mtp", m.mtp, mtp_path)
    return m


LAYER_MAP = [("attn_norm", "attn_norm"), ("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"),
             ("wo", "attn_output"), ("ffn_norm", "ffn_norm"), ("w_gate", "ffn_gate"),
             ("w_up", "ffn_up"), ("w_down", "ffn_down")]
IO_MAP = [("comp.fc1.weight", "pipo.comp.fc1.weight"), ("comp.fc1.bias", "pipo.comp.fc1.bias"),
          ("comp.fc2.weight", "pipo.comp.fc2.weight"), ("comp.fc2.bias", "pipo.comp.fc2.bias"),
          ("comp.pad_embd", "pipo.pad_embd"), ("conf.norm.weight", "pipo.conf.norm.weight"),
          ("conf.fc1.weight", "pipo.conf.fc1.weight"), ("conf.fc1.bias", "pipo.conf.fc1.bias"),
          ("conf.fc2.weight", "pipo.conf.fc2.weight"), ("conf.fc2.bias", "pipo.conf.fc2.bias")]


def load_unit(folder):
    """A release unit (pipo.json + backbone/mtp/io GGUF) read back into a Pipo module, exactly
    the numbers the engine loads (F16 widened to f32). Returns (model, manifest)."""
    from reference_hidden import read_gguf, load_gguf_model
    man = json.load(open(os.path.join(folder, "pipo.json")))
    parts = man["parts"]
    bb, meta = load_gguf_model(os.path.join(folder, parts["backbone"]["file"]), TARGET)
    _, io = read_gguf(os.path.join(folder, parts["io"]["file"]))
    imeta, _ = read_gguf(os.path.join(folder, parts["io"]["file"]))
    pc = PipoConfig(d_model=imeta["specchat-pipo-io.embedding_length"],
                    conf_dim=imeta["specchat-pipo-io.confidence_length"],
                    norm_eps=TARGET.norm_eps)
    m = Pipo(TARGET, pc)
    m.backbone.load_state_dict(bb.state_dict())
    _, mt = read_gguf(os.path.join(folder, parts["mtp"]["file"]))
    sd = {f"{n}.weight": mt[f"blk.0.nextn.{n}.weight"] for n in ("eh_proj", "enorm", "hnorm")}
    for a, b in LAYER_MAP:
        sd[f"block.{a}.weight"] = mt[f"blk.0.{b}.weight"]
    m.mtp.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()}, strict=True)
    sd = {}
    for k, g in IO_MAP:
        v = io[g]
        if k == "conf.fc2.bias":
            v = v.reshape(1)
        sd[k] = torch.from_numpy(v.copy())
    sub = {"comp": {}, "conf": {}}
    for k, v in sd.items():
        sub[k.split(".")[0]][k.split(".", 1)[1]] = v
    m.comp.load_state_dict(sub["comp"], strict=True)
    m.conf.load_state_dict(sub["conf"], strict=True)
    m.eval()
    return m, man
