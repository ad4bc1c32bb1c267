"""Exports the feature drafters to GGUF and writes the engine's reference vectors.

usage: export_drafters.py [--out-dir resources/models] [--only dflash|mtp] [--dflash-run NAME]
       (trained: work/dflash.pt or work/NAME.pt, work/mtp.pt)
       export_drafters.py --refs                         (tiny random drafters for the tests)

Layouts: docs/design/target-feature-drafters.md. Matrices F16, norm vectors F32, like the
bundled models. Each file is bound to its target: specchat.target.sha256 is the sha256 of
resources/models/specchat-target.gguf at export, with its architecture and vocabulary size.

--refs writes tests/data/drafters/: dflash-ref.gguf and mtp-ref.gguf (random weights, small
d_ff, bound to the bundled target) and ref.json with the engine-side expectations computed by
PyTorch on the exported (F16-rounded) weights.
"""
import argparse
import hashlib
import json
import os

import numpy as np
import torch

from common import WORK, MODELS, TESTDATA, REPO_ROOT
from export_gguf import GGUFWriter, ALIGN, T_U32, T_F32, T_STR, T_BOOL
from feature_drafters import DFlash, DFlashConfig, MTP, dflash_blocks
from model import TARGET, Config
from reference_hidden import load_gguf_model

TARGET_PATH = os.path.join(MODELS, "specchat-target.gguf")
LAYER_MAP = [("attn_norm", "attn_norm"), ("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"),
             ("wo", "attn_output"), ("ffn_norm", "ffn_norm"), ("w_gate", "ffn_gate"),
             ("w_up", "ffn_up"), ("w_down", "ffn_down")]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def bind(w, target_path):
    w.add("specchat.target.sha256", T_STR, sha256(target_path))
    w.add("specchat.target.architecture", T_STR, "llama")
    w.add("specchat.target.n_vocab", T_U32, TARGET.n_vocab)


def round_f16(m):
    with torch.no_grad():
        for p in m.parameters():
            if p.ndim > 1:
                p.copy_(p.half().float())


def write_dflash(dm, path, name, steps=0, target_path=TARGET_PATH):
    c = dm.c
    w = GGUFWriter()
    w.add("general.architecture", T_STR, "dflash")
    w.add("general.name", T_STR, name)
    w.add("general.alignment", T_U32, ALIGN)
    w.add("general.file_type", T_U32, 1)
    p = "dflash."
    w.add(p + "block_count", T_U32, c.n_layer)
    w.add(p + "embedding_length", T_U32, c.d_model)
    w.add(p + "feed_forward_length", T_U32, c.d_ff)
    w.add(p + "attention.head_count", T_U32, c.n_head)
    w.add(p + "attention.head_count_kv", T_U32, c.n_head_kv)
    w.add(p + "attention.key_length", T_U32, c.head_dim)
    w.add(p + "attention.value_length", T_U32, c.head_dim)
    w.add(p + "attention.layer_norm_rms_epsilon", T_F32, c.norm_eps)
    w.add(p + "rope.freq_base", T_F32, c.rope_theta)
    w.add(p + "context_length", T_U32, c.n_ctx)
    w.add(p + "block_size", T_U32, c.block_size)
    w.add_array(p + "target_layers", T_U32, [l + 1 for l in c.taps])  # llama.cpp's +1 convention
    w.add("tokenizer.ggml.mask_token_id", T_U32, c.mask_id)
    w.add("specchat.training_steps", T_U32, steps)
    bind(w, target_path)
    sd = {k: v.numpy() for k, v in dm.state_dict().items()}
    w.add_tensor("fc.weight", sd["fc.weight"])
    w.add_tensor("enc.output_norm.weight", sd["enc_norm.weight"])
    for il in range(c.n_layer):
        src, dst = f"layers.{il}.", f"blk.{il}."
        for a, b in LAYER_MAP:
            w.add_tensor(dst + b + ".weight", sd[src + a + ".weight"])
        w.add_tensor(dst + "attn_q_norm.weight", sd[src + "q_norm.weight"])
        w.add_tensor(dst + "attn_k_norm.weight", sd[src + "k_norm.weight"])
    w.add_tensor("output_norm.weight", sd["out_norm.weight"])
    w.write(path)


def write_mtp(mtp, path, name, steps=0, target_path=TARGET_PATH, extra_kv=()):
    """extra_kv: more (key, type, value) entries (PIPO's pipo.* keys); none by default."""
    c = mtp.c
    w = GGUFWriter()
    a = "specchat-mtp"
    w.add("general.architecture", T_STR, a)
    w.add("general.name", T_STR, name)
    w.add("general.alignment", T_U32, ALIGN)
    w.add("general.file_type", T_U32, 1)
    p = a + "."
    w.add(p + "block_count", T_U32, 1)
    w.add(p + "context_length", T_U32, c.n_ctx)
    w.add(p + "embedding_length", T_U32, c.d_model)
    w.add(p + "feed_forward_length", T_U32, c.d_ff)
    w.add(p + "attention.head_count", T_U32, c.n_head)
    w.add(p + "attention.head_count_kv", T_U32, c.n_head_kv)
    w.add(p + "rope.dimension_count", T_U32, c.head_dim)
    w.add(p + "rope.freq_base", T_F32, c.rope_theta)
    w.add(p + "attention.layer_norm_rms_epsilon", T_F32, c.norm_eps)
    w.add("specchat.training_steps", T_U32, steps)
    bind(w, target_path)
    for k, t, v in extra_kv:
        w.add(k, t, v)
    sd = {k: v.numpy() for k, v in mtp.state_dict().items()}
    w.add_tensor("blk.0.nextn.eh_proj.weight", sd["eh_proj.weight"])
    w.add_tensor("blk.0.nextn.enorm.weight", sd["enorm.weight"])
    w.add_tensor("blk.0.nextn.hnorm.weight", sd["hnorm.weight"])
    for src, dst in LAYER_MAP:
        w.add_tensor(f"blk.0.{dst}.weight", sd[f"block.{src}.weight"])
    w.write(path)


@torch.no_grad()
def target_hidden(tgt, ids):
    """Outputs of every block: [n_layer, T, d]."""
    idx = torch.tensor([ids])
    T = idx.shape[1]
    x = tgt.tok_emb(idx)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    out = []
    for b in tgt.blocks:
        x = b(x, tgt.cos[:T], tgt.sin[:T], mask)
        out.append(x[0])
    return torch.stack(out)


@torch.no_grad()
def dflash_block_logits(dm, tgt, ids, B):
    """Context rows for ids[0..n-2], anchor ids[n-1] at position n-1: logits [B-1, n_vocab]."""
    n = len(ids)
    hid = target_hidden(tgt, ids[:n - 1])
    feats = torch.cat([hid[l] for l in dm.c.taps], dim=-1).unsqueeze(0)  # [1, n-1, m*d]
    pos, mask = dflash_blocks(n - 1, [n - 1], B)
    tok = torch.full((B,), dm.c.mask_id, dtype=torch.long)
    tok[0] = ids[-1]
    h = dm(feats, tgt.tok_emb(tok).unsqueeze(0), pos, mask.unsqueeze(0))[0]
    return tgt.out(h)[1:]


@torch.no_grad()
def mtp_logits(mtp, tgt, ids, extra_tokens):
    """Context rows i = 0..n-2 pair h_i with t_{i+1}; depth 1 = logits of row n-2 (predicts
    t_n). Each extra token x_j appends a row at the next position with h = g of the previous
    row (the recursion) and token x_j. Returns logits [1 + len(extra), n_vocab]."""
    n = len(ids)
    hid = target_hidden(tgt, ids[:n - 1])[-1]  # [n-1, d] last layer
    hs = [hid[i] for i in range(n - 1)]
    nxt = [ids[i + 1] for i in range(n - 1)]
    out = []
    for j in range(len(extra_tokens) + 1):
        h = torch.stack(hs).unsqueeze(0)
        e = tgt.tok_emb(torch.tensor([nxt])).reshape(1, len(nxt), -1)
        g = mtp(h, e)[0]
        out.append(tgt.out(tgt.norm(g[-1])))
        if j < len(extra_tokens):
            hs.append(g[-1])
            nxt.append(extra_tokens[j])
    return torch.stack(out)


def r6(t):
    return [[float(f"{v:.6g}") for v in row] for row in t.tolist()]


def write_refs():
    torch.manual_seed(7)
    tgt, _ = load_gguf_model(TARGET_PATH, TARGET)
    out_dir = os.path.join(TESTDATA, "drafters")
    os.makedirs(out_dir, exist_ok=True)
    import sentencepiece  # noqa: F401  (only to fail early when the recipe's deps are missing)
    # The bundled tokenizer's ids for two prompts, taken from tests/data/reference_logits.json.
    ref = json.load(open(os.path.join(TESTDATA, "reference_logits.json")))
    cases = [c["ids"] for c in ref["cases"][:2]]
    # DFlash: 1 layer, d_ff 64, taps [1, 3, 4], B 8; weights scaled up so the outputs vary.
    dc = DFlashConfig(n_layer=1, d_ff=64, block_size=8)
    dm = DFlash(dc)
    with torch.no_grad():
        for p in dm.parameters():
            if p.ndim > 1:
                p.mul_(4.0)
            else:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    round_f16(dm)
    dm.eval()
    write_dflash(dm, os.path.join(out_dir, "dflash-ref.gguf"), "dflash-ref")
    mc = Config(**{**TARGET.to_dict(), "d_ff": 64})
    mtp = MTP(mc)
    with torch.no_grad():
        for p in mtp.parameters():
            if p.ndim > 1:
                p.mul_(4.0)
            else:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    round_f16(mtp)
    mtp.eval()
    write_mtp(mtp, os.path.join(out_dir, "mtp-ref.gguf"), "mtp-ref")
    res = {"note": ("Written by resources/models/recipe/export_drafters.py --refs: random-weight drafters "
                    "bound to resources/models/specchat-target.gguf, PyTorch f32 on the F16-rounded weights. "
                    "dflash: context rows = target features of ids[0..n-2], anchor ids[n-1] at position n-1, "
                    "logits of block rows 1..B-1 (B = block_size). mtp: depth-1 logits of row n-2 (pairs h_i "
                    "with ids[i+1]), then one row per extra token (h = the previous row's MTP output g)."),
           "tolerance": 1e-3, "block_size": dc.block_size, "taps": dc.taps, "cases": []}
    for ids in cases:
        dl = dflash_block_logits(dm, tgt, ids, dc.block_size)
        extra = [int(dl[0].argmax()), int(dl[1].argmax())]
        ml = mtp_logits(mtp, tgt, ids, extra)
        res["cases"].append({"ids": ids, "dflash_logits": r6(dl), "mtp_extra_tokens": extra, "mtp_logits": r6(ml)})
        print(f"case n={len(ids)}: dflash argmax {dl.argmax(-1).tolist()}, mtp argmax {ml.argmax(-1).tolist()}")
    with open(os.path.join(out_dir, "ref.json"), "w") as f:
        json.dump(res, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", out_dir)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=MODELS)
    ap.add_argument("--refs", action="store_true")
    ap.add_argument("--only", choices=["dflash", "mtp"], default="", help="export one drafter")
    ap.add_argument("--dflash-run", default="dflash", help="checkpoint work/<name>.pt of the DFlash drafter "
                                                           "(train_drafters.py --run)")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    if a.refs:
        write_refs()
        return
    for role, fn, make in (("dflash", write_dflash, lambda ck: DFlash(DFlashConfig(**ck["config"]))),
                           ("mtp", write_mtp, lambda ck: MTP(TARGET))):
        if a.only and role != a.only:
            continue
        ck_path = os.path.join(WORK, f"{a.dflash_run if role == 'dflash' else role}.pt")
        if not os.path.exists(ck_path):
            print(f"skip {role}: no {ck_path}")
            continue
        ck = torch.load(ck_path)
        m = make(ck)
        m.load_state_dict(ck["model"])
        round_f16(m)
        m.eval()
        path = os.path.join(a.out_dir, f"specchat-{role}.gguf")
        fn(m, path, f"specchat-{role}", ck["step"])
        print(f"wrote {path} ({os.path.getsize(path)} bytes, step {ck['step']})")


if __name__ == "__main__":
    main()
