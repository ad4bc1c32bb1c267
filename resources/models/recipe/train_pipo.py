"""Trains PIPO (docs/design/pipo.md) from the bundled target and MTP head. Resumable.

usage: train_pipo.py stage1|stage2 [--minutes M] [--threads 1] [--steps S] [--batch B] [--pairs P]

stage1 (supervised): raw windows of train_v2.bin (the family-v2 multi-turn chat windows) become
  pair sequences of P pairs with random PAD splits: per sequence a PAD rate r (U[0, 0.5] for three
  sequences in four, U[0.5, 1] for the fourth, so long runs of (t, PAD) pairs, as decoding at a
  high threshold produces, are seen too); at each pair, with probability r the pair is (t, PAD)
  and the window advances one raw token, else (t, t_next) and it advances two. Row j (pair j) is
  trained to predict pair j + 1: CE of the backbone logits vs its first token (raw index k), CE
  of the MTP logits (fed the true first token) vs the raw token k + 1, and the confidence head
  (on detached h, g) with BCE toward 1[argmax MTP == raw token k + 1]. The MTP/confidence label
  is the raw next token even where the sampled pair j + 1 is (t, PAD): at decode time the head
  predicts that same token, and only the confidence decides whether it is kept; rows whose
  raw token k + 1 is past the window are masked.
stage2 (distillation, from stage1's result): the frozen plain target runs once over the raw
  window; KL(p_target || p_student) for token 1 (target distribution at raw position k - 1) and
  token 2 (at raw position k); confidence label min(1, p_target(x) / p_student(x)) with x drawn
  from the student's MTP distribution (on-policy), BCE; plus 0.1 x the stage-1 CE.

Initialisation: stage1 starts from ../specchat-target.gguf (backbone) and ../specchat-mtp.gguf
(MTP head), compressor fc2 and PAD embedding zero (pipo.init_from_gguf). Checkpoints: work/pipo1.pt,
work/pipo2.pt (model, optimiser, step, RNG, plan) every 3 minutes and at the end; a restart
resumes on the same cosine curve (sized to the plan's step budget, fixed at the first start).
Logs: logs/pipo1.log, logs/pipo2.log (loss parts, raw tokens/s, pairs/s).
"""
import argparse
import json
import math
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn.functional as F

from common import WORK, LOGS, MODELS, ensure_dirs
from model import TARGET
from pipo import Pipo, PipoConfig, PAD, init_from_gguf

PLANS = {
    "stage1": dict(batch=3, pairs=256, steps=600, lr=3e-4, lr_new=1.5e-3, warmup=30, wd=0.0),
    "stage2": dict(batch=3, pairs=256, steps=400, lr=1.5e-4, lr_new=5e-4, warmup=20, wd=0.0, ce=0.1),
}
CKPT = {"stage1": "pipo1", "stage2": "pipo2"}
NEW = ("comp.", "conf.")   # modules that start untrained get the higher learning rate


def log(name, msg):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    with open(os.path.join(LOGS, f"{name}.log"), "a") as f:
        f.write(line + "\n")


def lr_scale(plan, step):
    if step < plan["warmup"]:
        return (step + 1) / plan["warmup"]
    t = (step - plan["warmup"]) / max(1, plan["steps"] - plan["warmup"])
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


def pad_rate(gen):
    u = torch.rand(2, generator=gen).tolist()
    return 0.5 * u[1] if u[0] < 0.75 else 0.5 + 0.5 * u[1]


def make_pairs(raw, rate, M, gen):
    """raw: [R] ids (R >= 2M + 4). Returns (pairs [M + 1, 2], k [M + 1] raw index of each pair's
    first token). Pair j + 1 holds the targets of row j."""
    coins = (torch.rand(M + 1, generator=gen) < rate).tolist()
    pairs, ks, k = [], [], 0
    for j in range(M + 1):
        ks.append(k)
        if coins[j]:
            pairs.append((raw[k], PAD))
            k += 1
        else:
            pairs.append((raw[k], raw[k + 1]))
            k += 2
    return pairs, ks


def batch(data, plan, gen):
    """Returns dict of tensors: pairs [B, M, 2] (inputs), t1 [B, M], t2 [B, M] (-100 = masked),
    full [B, M] (pair j + 1 was a full pair), k1 [B, M] raw index of t1, raw [B, R], rates."""
    B, M = plan["batch"], plan["pairs"]
    R = 2 * M + 4
    out = {k: [] for k in ("pairs", "t1", "t2", "full", "k1", "raw", "rate")}
    for _ in range(B):
        i = int(torch.randint(len(data) - R - 1, (1,), generator=gen))
        raw = data[i:i + R].astype(np.int64).tolist()
        rate = pad_rate(gen)
        pairs, ks = make_pairs(raw, rate, M, gen)
        out["pairs"].append(pairs[:M])
        out["t1"].append([raw[k] for k in ks[1:]])
        out["t2"].append([raw[k + 1] if k + 1 < R else -100 for k in ks[1:]])
        out["full"].append([p[1] != PAD for p in pairs[1:]])
        out["k1"].append(ks[1:])
        out["raw"].append(raw)
        out["rate"].append(rate)
    return {k: torch.tensor(v) for k, v in out.items()}


def forward(m, b):
    h = m.hidden(b["pairs"])                       # [B, M, d]
    logits1 = m.head(h)
    g = m.mtp_g(h, b["t1"])
    logits2 = m.head(g)
    clog = m.conf.logit(h.detach(), g.detach())    # the confidence head does not steer h or g
    return logits1, logits2, clog


def stage1_loss(m, b):
    logits1, logits2, clog = forward(m, b)
    V = logits1.shape[-1]
    ce1 = F.cross_entropy(logits1.reshape(-1, V), b["t1"].reshape(-1))
    ce2 = F.cross_entropy(logits2.reshape(-1, V), b["t2"].reshape(-1), ignore_index=-100)
    valid = b["t2"] != -100
    hit = (logits2.argmax(-1) == b["t2"]).float()
    bce = F.binary_cross_entropy_with_logits(clog[valid], hit[valid])
    stats = {"ce1": ce1.item(), "ce2": ce2.item(), "bce": bce.item(),
             "acc1": (logits1.argmax(-1) == b["t1"]).float().mean().item(),
             "acc2": hit[valid].mean().item(), "conf": torch.sigmoid(clog[valid]).mean().item()}
    return ce1 + ce2 + bce, stats


def stage2_loss(m, teacher, b, plan, gen):
    logits1, logits2, clog = forward(m, b)
    V = logits1.shape[-1]
    with torch.no_grad():
        tlog = F.log_softmax(teacher(b["raw"]), -1)              # [B, R, V]
    valid = b["t2"] != -100
    k1 = b["k1"]
    bidx = torch.arange(k1.shape[0]).unsqueeze(1).expand_as(k1)
    lt1 = tlog[bidx, k1 - 1]                                     # target's view of token 1
    lt2 = tlog[bidx, (k1).clamp_max(tlog.shape[1] - 1)]          # target's view of token 2
    ls1, ls2 = F.log_softmax(logits1, -1), F.log_softmax(logits2, -1)
    kl1 = (lt1.exp() * (lt1 - ls1)).sum(-1).mean()
    kl2 = ((lt2.exp() * (lt2 - ls2)).sum(-1))[valid].mean()
    ce1 = F.cross_entropy(logits1.reshape(-1, V), b["t1"].reshape(-1))
    ce2 = F.cross_entropy(logits2.reshape(-1, V), b["t2"].reshape(-1), ignore_index=-100)
    with torch.no_grad():
        ps = ls2.exp()
        x = torch.multinomial(ps.reshape(-1, V), 1, generator=gen).view(ps.shape[:-1])
        ratio = (lt2.gather(-1, x.unsqueeze(-1)) - ls2.gather(-1, x.unsqueeze(-1))).squeeze(-1).exp()
        label = ratio.clamp_max(1.0)
        soft = (torch.minimum(lt2.exp(), ps)).sum(-1)            # E_x[min(1, pt/ps)] = 1 - TV
    bce = F.binary_cross_entropy_with_logits(clog[valid], label[valid])
    loss = (1 - plan["ce"]) * (kl1 + kl2) + plan["ce"] * (ce1 + ce2) + bce
    stats = {"kl1": kl1.item(), "kl2": kl2.item(), "ce1": ce1.item(), "ce2": ce2.item(),
             "bce": bce.item(), "acc2": (logits2.argmax(-1) == lt2.argmax(-1))[valid].float().mean().item(),
             "accept": soft[valid].mean().item(), "conf": torch.sigmoid(clog[valid]).mean().item()}
    return loss, stats


@torch.no_grad()
def heldout(m, teacher=None, n=6):
    """Teacher-forced held-out figures on fixed windows of held-out multi-turn conversations."""
    data = np.memmap(os.path.join(WORK, "heldout_multiturn.bin"), dtype=np.uint16, mode="r")
    gen = torch.Generator().manual_seed(11)
    plan = dict(batch=2, pairs=256)
    m.eval()
    agg = {}
    for _ in range(n // 2):
        b = batch(data, plan, gen)
        _, st = stage1_loss(m, b)
        for k, v in st.items():
            agg[k] = agg.get(k, 0.0) + v / (n // 2)
    m.train()
    return {k: round(v, 4) for k, v in agg.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stage", choices=list(PLANS))
    ap.add_argument("--minutes", type=float, default=1e9, help="stop (resumably) after this long")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="step budget (fixed at the first start)")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--name", default="", help="checkpoint/log name (default pipo1 / pipo2)")
    ap.add_argument("--seed", type=int, default=0, help="data-order seed (default 101 / 202; give a continuation its own)")
    ap.add_argument("--init", default="pipo1", help="stage2: the stage-1 checkpoint it starts from (work/NAME.pt)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ensure_dirs()
    name = a.name or CKPT[a.stage]
    ck_path = os.path.join(WORK, f"{name}.pt")
    plan = dict(PLANS[a.stage])
    for k in ("steps", "batch", "pairs"):
        if getattr(a, k):
            plan[k] = getattr(a, k)
    gen = torch.Generator().manual_seed(a.seed or (101 if a.stage == "stage1" else 202))
    step, base_steps, ck = 0, 0, None
    if os.path.exists(ck_path):
        ck = torch.load(ck_path)
        plan = ck["plan"]
        m = Pipo(TARGET, PipoConfig(**ck["pipo_config"]))
        m.load_state_dict(ck["model"])
        step, base_steps = ck["step"], ck["base_steps"]
        gen.set_state(ck["gen"])
        torch.set_rng_state(ck["torch_rng"])
        log(name, f"resumed at step {step}")
    elif a.stage == "stage1":
        m = init_from_gguf(os.path.join(MODELS, "specchat-target.gguf"), os.path.join(MODELS, "specchat-mtp.gguf"))
        log(name, "initialised: backbone = specchat-target.gguf, MTP = specchat-mtp.gguf, compressor e(a)+e(b)")
    else:
        p1 = torch.load(os.path.join(WORK, f"{a.init}.pt"))
        m = Pipo(TARGET, PipoConfig(**p1["pipo_config"]))
        m.load_state_dict(p1["model"])
        base_steps = p1["total_steps"]
        log(name, f"initialised from work/{a.init}.pt (stage 1, {base_steps} steps)")
    m.train()
    groups = [{"params": [p for n, p in m.named_parameters() if not n.startswith(NEW)], "lr": plan["lr"], "base": plan["lr"]},
              {"params": [p for n, p in m.named_parameters() if n.startswith(NEW)], "lr": plan["lr_new"], "base": plan["lr_new"]}]
    opt = torch.optim.AdamW(groups, betas=(0.9, 0.95), weight_decay=plan["wd"])
    if ck is not None:
        opt.load_state_dict(ck["opt"])
    if step >= plan["steps"]:
        log(name, "already done")
        return
    teacher = None
    if a.stage == "stage2":
        from reference_hidden import load_gguf_model
        teacher, _ = load_gguf_model(os.path.join(MODELS, "specchat-target.gguf"), TARGET)
        for p in teacher.parameters():
            p.requires_grad_(False)
    data = np.memmap(os.path.join(WORK, "train_v2.bin"), dtype=np.uint16, mode="r")
    if step == 0:
        log(name, f"params {sum(p.numel() for p in m.parameters())}, train tokens {len(data)}, threads {a.threads}, "
                  f"minutes {a.minutes}, plan {json.dumps(plan)}")
        log(name, "heldout at start " + json.dumps(heldout(m)))

    def save():
        torch.save({"model": m.state_dict(), "opt": opt.state_dict(), "step": step, "base_steps": base_steps,
                    "total_steps": base_steps + step, "gen": gen.get_state(), "torch_rng": torch.get_rng_state(),
                    "plan": plan, "pipo_config": m.pc.to_dict()}, ck_path + ".tmp")
        os.replace(ck_path + ".tmp", ck_path)

    t0 = last_save = time.time()
    raw_tokens = pairs_done = 0
    acc = {}
    n_acc = 0
    while step < plan["steps"]:
        s = lr_scale(plan, step)
        for g in opt.param_groups:
            g["lr"] = g["base"] * s
        b = batch(data, plan, gen)
        if a.stage == "stage1":
            loss, st = stage1_loss(m, b)
        else:
            loss, st = stage2_loss(m, teacher, b, plan, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        step += 1
        raw_tokens += int(b["k1"][:, -1].sum())   # raw tokens covered by the input pairs
        pairs_done += b["pairs"].shape[0] * b["pairs"].shape[1]
        st["loss"] = loss.item()
        st["pad_rate"] = float(b["rate"].mean())
        for k, v in st.items():
            acc[k] = acc.get(k, 0.0) + v
        n_acc += 1
        if step % 10 == 0 or step == plan["steps"]:
            el = time.time() - t0
            parts = " ".join(f"{k} {v / n_acc:.4f}" for k, v in acc.items())
            log(name, f"step {step}/{plan['steps']} {parts} lr {plan['lr'] * lr_scale(plan, step):.2e} "
                      f"{raw_tokens / el:.0f} raw tok/s {pairs_done / el:.0f} pairs/s")
            acc, n_acc = {}, 0
        if time.time() - last_save > 180:
            save()
            last_save = time.time()
        if time.time() - t0 > a.minutes * 60 and step < plan["steps"]:
            save()
            log(name, f"stopping at step {step} (time budget)")
            return
    save()
    log(name, "heldout at end " + json.dumps(heldout(m)))
    log(name, f"done: {step} steps in this session's {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
