"""Trains the feature drafters (DFlash block drafter, MTP head) on the frozen bundled target.

usage: train_drafters.py dflash|mtp [--minutes M] [--threads N] [--steps S] [--lr LR]
                         [--init-gguf F] [--blocks 4,8,16] [--run NAME]

Data: target-generated text from gen_text.py (work/gen.npz: token ids of prompt + reply, one
sequence per request), split 95/5 into training and held-out sequences. The target's hidden
states at the taps are computed once with the PyTorch target read back from the GGUF file and
cached in work/feats.f16 ([tokens, 4 layers, d_model]: target layers 1, 3, 4, 5 = the DFlash
taps and the MTP input).

Resumable like train.py: work/<role>.pt (or work/<run>.pt) holds model, optimiser, step and RNG state; the cosine
schedule is sized to the role's step budget, so an interrupted run resumes on the same curve.
Logs: logs/<role>.log.
"""
import argparse
import json
import math
import os
import time

# One thread pool: PyTorch's (TRAINING-NOTES, "thread pools fight": OpenBLAS's own threads made
# the feature pass 6x slower).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn.functional as F

from common import WORK, LOGS, MODELS, ensure_dirs
from model import TARGET
from reference_hidden import load_gguf_model
from feature_drafters import DFlash, DFlashConfig, MTP, dflash_blocks

FEAT_LAYERS = [1, 3, 4, 5]   # cached target layers (outputs of blocks[il])
PLAN = {
    # DFlash: per step `batch` sequences, `rows` block rows per sequence (anchors = rows / B),
    # B drawn from `blocks` per step. Loss weight exp(-(k-1)/gamma) (DFlash §3), gamma by B.
    "dflash": dict(batch=6, rows=96, blocks=[8, 16], gamma={4: 3.0, 8: 4.0, 16: 7.0},
                   steps=1200, lr=2e-3, warmup=60, wd=0.05),
    "mtp": dict(batch=8, steps=900, lr=2e-3, warmup=50, wd=0.05),
}


def log(role, msg):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    with open(os.path.join(LOGS, f"{role}.log"), "a") as f:
        f.write(line + "\n")


def load_target():
    m, _ = load_gguf_model(os.path.join(MODELS, "specchat-target.gguf"), TARGET)
    for p in m.parameters():
        p.requires_grad_(False)
    return m


@torch.no_grad()
def target_layers(m, ids):
    """Outputs of blocks[il] for il in FEAT_LAYERS: [T, len, d]."""
    idx = torch.tensor([ids])
    T = idx.shape[1]
    x = m.tok_emb(idx)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    out = []
    for il, b in enumerate(m.blocks):
        x = b(x, m.cos[:T], m.sin[:T], mask)
        if il in FEAT_LAYERS:
            out.append(x[0])
    return torch.stack(out, dim=1)


def load_data(m):
    z = np.load(os.path.join(WORK, "gen.npz"))
    toks, offs = z["tokens"], z["offsets"]
    # A reply that filled the target's context ends with one token never fed back: cut to n_ctx.
    seqs = [toks[offs[i]:offs[i + 1]][:m.c.n_ctx] for i in range(len(offs) - 1)]
    offs = np.cumsum([0] + [len(s) for s in seqs]).astype(np.int64)
    path = os.path.join(WORK, "feats.f16")
    shape = (int(offs[-1]), len(FEAT_LAYERS), m.c.d_model)
    done_path = path + ".done"
    if os.path.exists(done_path) and np.load(path, mmap_mode="r").shape != shape:
        os.remove(done_path)  # gen.npz grew (gen_text.py --n more): the cache is stale
    if not os.path.exists(done_path):
        feats = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=shape)
        t0 = time.time()
        for i, s in enumerate(seqs):
            feats[offs[i]:offs[i + 1]] = target_layers(m, s.tolist()).numpy().astype(np.float16)
            if i % 200 == 0:
                print(f"features {i}/{len(seqs)} ({time.time() - t0:.0f} s)", flush=True)
        feats.flush()
        del feats
        open(done_path, "w").write("ok\n")
    feats = np.load(path, mmap_mode="r")
    # Held out: the first 5 % of family v2's 999 sequences (49), kept fixed when gen_text.py
    # appends more requests (it keeps the earlier ones first, in order).
    n_held = max(8, min(len(seqs), 999) // 20)
    idx = list(range(len(seqs)))
    return seqs, offs, feats, idx[n_held:], idx[:n_held]


def seq_feats(feats, offs, i, layers):
    f = torch.from_numpy(np.asarray(feats[offs[i]:offs[i + 1]], dtype=np.float32))
    return f[:, [FEAT_LAYERS.index(l) for l in layers], :]


def dflash_loss(dm, tgt, seq, f, B, gamma, n_anchors, gen, weights_only=False):
    """Loss over n_anchors blocks of one sequence. seq: [L] ids; f: [L, m, d] tap features.
    Returns (weighted CE, per-position correct [n_anchors, B-1] (-1 = past the end))."""
    L = len(seq)
    if L < 3:
        return None, None
    anchors = torch.randint(1, L - 1, (n_anchors,), generator=gen).tolist()
    T = max(anchors)  # context rows 0..T-1 suffice
    feats = f[:T].reshape(1, T, -1)
    pos, mask = dflash_blocks(T, anchors, B)
    ids = torch.full((len(anchors) * B,), dflash_mask_id(dm), dtype=torch.long)
    seq_t = torch.from_numpy(seq.astype(np.int64))
    labels = torch.full((len(anchors), B), -100, dtype=torch.long)
    for j, a in enumerate(anchors):
        ids[j * B] = seq_t[a]
        end = min(a + B, L)
        labels[j, :end - a] = seq_t[a:end]
    emb = tgt.tok_emb(ids).unsqueeze(0)
    h = dm(feats, emb, pos, mask.unsqueeze(0))[0]  # [K*B, d]
    logits = tgt.out(h).view(len(anchors), B, -1)[:, 1:]
    lab = labels[:, 1:]
    w = torch.tensor([math.exp(-(k - 1) / gamma) for k in range(1, B)])
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1), reduction="none",
                         ignore_index=-100).view(len(anchors), B - 1)
    valid = (lab != -100).float()
    loss = (ce * w * valid).sum() / (w * valid).sum().clamp_min(1e-6)
    correct = torch.where(lab == -100, torch.full_like(lab, -1), (logits.argmax(-1) == lab).long())
    return loss, correct


def dflash_mask_id(dm):
    return dm.c.mask_id


def tau_from_correct(correct, k):
    """Greedy chain of k drafted tokens: accepted = leading run of correct; τ = 1 + mean accepted.
    Blocks whose first k positions run past the sequence end are left out."""
    c = correct[:, :k]
    ok = (c >= 0).all(dim=1)
    c = c[ok].clamp_min(0)
    if len(c) == 0:
        return float("nan")
    return 1.0 + c.cumprod(dim=1).sum(dim=1).float().mean().item()


def mtp_loss(mtp, tgt, seq, f):
    """seq: [L]; f: [L, 1, d] last-layer features. Row i (0..L-3) predicts t_{i+2}."""
    L = len(seq)
    if L < 3:
        return None, None
    s = torch.from_numpy(seq.astype(np.int64))
    h = f[:L - 2, 0].unsqueeze(0)
    nxt = tgt.tok_emb(s[1:L - 1]).unsqueeze(0)
    g = mtp(h, nxt)[0]
    logits = tgt.out(tgt.norm(g))
    lab = s[2:L]
    return F.cross_entropy(logits, lab), (logits.argmax(-1) == lab).float().mean().item()


def make(role, c_override=None):
    if role == "dflash":
        return DFlash(DFlashConfig(**({"n_ctx": TARGET.n_ctx} | (c_override or {}))))
    return MTP(TARGET)


DFLASH_LAYER_MAP = [("attn_norm", "attn_norm"), ("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"),
                    ("wo", "attn_output"), ("ffn_norm", "ffn_norm"), ("w_gate", "ffn_gate"),
                    ("w_up", "ffn_up"), ("w_down", "ffn_down")]


def warm_start(role, dm, path):
    """Loads the weights of an exported drafter GGUF (export_drafters.py's layout) into dm: family
    v2's drafters start from v1's, whose target v2 was fine-tuned from."""
    from reference_hidden import read_gguf
    meta, t = read_gguf(path)
    sd = {}
    if role == "dflash":
        assert [l - 1 for l in meta["dflash.target_layers"]] == list(dm.c.taps), "taps differ"
        sd["fc.weight"] = t["fc.weight"]
        sd["enc_norm.weight"] = t["enc.output_norm.weight"]
        sd["out_norm.weight"] = t["output_norm.weight"]
        for il in range(dm.c.n_layer):
            for a, b in DFLASH_LAYER_MAP:
                sd[f"layers.{il}.{a}.weight"] = t[f"blk.{il}.{b}.weight"]
            sd[f"layers.{il}.q_norm.weight"] = t[f"blk.{il}.attn_q_norm.weight"]
            sd[f"layers.{il}.k_norm.weight"] = t[f"blk.{il}.attn_k_norm.weight"]
    else:
        for n in ("eh_proj", "enorm", "hnorm"):
            sd[f"{n}.weight"] = t[f"blk.0.nextn.{n}.weight"]
        for a, b in DFLASH_LAYER_MAP:
            sd[f"block.{a}.weight"] = t[f"blk.0.{b}.weight"]
    dm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()}, strict=True)


@torch.no_grad()
def evaluate(role, dm, tgt, seqs, offs, feats, held):
    gen = torch.Generator().manual_seed(1234)
    dm.eval()
    if role == "dflash":
        res = {}
        for B in (4, 8, 16):
            losses, corrects = [], []
            for i in held:
                loss, corr = dflash_loss(dm, tgt, seqs[i], seq_feats(feats, offs, i, dm.c.taps), B,
                                         PLAN["dflash"]["gamma"][B], 16, gen)
                if loss is not None:
                    losses.append(loss.item())
                    corrects.append(corr)
            corr = torch.cat(corrects)
            res[f"B{B}"] = {"loss": round(float(np.mean(losses)), 4),
                            "tau_chain": {k: round(tau_from_correct(corr, k), 3) for k in (3, 7, 15) if k < B},
                            "top1_by_pos": [round(x, 3) for x in
                                            ((corr.clamp_min(0).float().sum(0)) / (corr >= 0).float().sum(0).clamp_min(1)).tolist()]}
    else:
        losses, accs = [], []
        for i in held:
            loss, acc = mtp_loss(dm, tgt, seqs[i], seq_feats(feats, offs, i, [5]))
            if loss is not None:
                losses.append(loss.item())
                accs.append(acc)
        res = {"loss": round(float(np.mean(losses)), 4), "top1": round(float(np.mean(accs)), 4)}
    dm.train()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["dflash", "mtp"])
    ap.add_argument("--minutes", type=float, default=1e9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=0, help="override the plan's step budget")
    ap.add_argument("--init-gguf", default="", help="warm start from an exported drafter (family v1's)")
    ap.add_argument("--lr", type=float, default=0, help="override the plan's peak learning rate")
    ap.add_argument("--blocks", default="", help="block sizes drawn per step, e.g. 4,8,16 (DFlash; default the plan's 8,16)")
    ap.add_argument("--run", default="", help="checkpoint name under work/ (default: the role), for a second run beside the first")
    a = ap.parse_args()
    ensure_dirs()
    torch.set_num_threads(a.threads)
    plan = dict(PLAN[a.role])
    if a.steps:
        plan["steps"] = a.steps
    if a.lr:
        plan["lr"] = a.lr
    if a.blocks:
        plan["blocks"] = [int(b) for b in a.blocks.split(",")]
        assert all(b in plan["gamma"] for b in plan["blocks"]), f"no loss weight for blocks {plan['blocks']}"
    tgt = load_target()
    seqs, offs, feats, train_idx, held = load_data(tgt)
    torch.manual_seed(0)
    dm = make(a.role)
    opt = torch.optim.AdamW(dm.parameters(), lr=plan["lr"], weight_decay=plan["wd"], betas=(0.9, 0.95))
    ck_path = os.path.join(WORK, f"{a.run or a.role}.pt")
    step = 0
    gen = torch.Generator().manual_seed(42)
    if os.path.exists(ck_path):
        ck = torch.load(ck_path)
        dm.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step = ck["step"]
        gen.set_state(ck["gen"])
        log(a.role, f"resumed at step {step}")
    else:
        if a.init_gguf:
            warm_start(a.role, dm, a.init_gguf)
            log(a.role, f"warm start from {a.init_gguf}")
        n = sum(p.numel() for p in dm.parameters())
        log(a.role, f"start: {n} parameters, {len(train_idx)} training / {len(held)} held-out sequences, "
                    f"{int(offs[-1])} tokens, plan {json.dumps({k: v for k, v in plan.items() if k != 'gamma'})}")

    def lr_at(s):
        if s < plan["warmup"]:
            return plan["lr"] * (s + 1) / plan["warmup"]
        p = (s - plan["warmup"]) / max(1, plan["steps"] - plan["warmup"])
        return plan["lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    def save():
        torch.save({"model": dm.state_dict(), "opt": opt.state_dict(), "step": step, "gen": gen.get_state(),
                    "config": dm.c.to_dict()}, ck_path + ".tmp")
        os.replace(ck_path + ".tmp", ck_path)

    t0 = time.time()
    last_save = time.time()
    tok_count = 0
    while step < plan["steps"]:
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.zero_grad()
        picks = torch.randint(len(train_idx), (plan["batch"],), generator=gen).tolist()
        total = 0.0
        if a.role == "dflash":
            B = plan["blocks"][torch.randint(len(plan["blocks"]), (1,), generator=gen).item()]
            for p in picks:
                i = train_idx[p]
                loss, _ = dflash_loss(dm, tgt, seqs[i], seq_feats(feats, offs, i, dm.c.taps), B,
                                      plan["gamma"][B], plan["rows"] // B, gen)
                if loss is None:
                    continue
                (loss / plan["batch"]).backward()
                total += loss.item() / plan["batch"]
                tok_count += plan["rows"]
        else:
            for p in picks:
                i = train_idx[p]
                loss, _ = mtp_loss(dm, tgt, seqs[i], seq_feats(feats, offs, i, [5]))
                if loss is None:
                    continue
                (loss / plan["batch"]).backward()
                total += loss.item() / plan["batch"]
                tok_count += len(seqs[i])
        torch.nn.utils.clip_grad_norm_(dm.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 20 == 0:
            log(a.role, f"step {step}/{plan['steps']} loss {total:.4f} lr {lr_at(step):.2e} "
                        f"{tok_count / (time.time() - t0):.0f} rows/s")
        if time.time() - last_save > 180:
            save()
            last_save = time.time()
        if time.time() - t0 > a.minutes * 60:
            save()
            log(a.role, f"stopping at step {step} (time budget)")
            return
    save()
    res = evaluate(a.role, dm, tgt, seqs, offs, feats, held)
    log(a.role, "heldout " + json.dumps(res))
    with open(os.path.join(LOGS, f"{a.role}_heldout.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
