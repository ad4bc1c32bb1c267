"""Held-out evaluation of a PIPO release unit against the plain target (docs/design/pipo.md).

usage: eval_pipo.py [--unit resources/models/pipo] [--out logs/pipo_heldout.json]
                    [--windows 8] [--prompts 30] [--seeds 2] [--update-manifest]

Everything runs on the unit read back from its GGUF files (what the engine loads) and on the
plain target's GGUF.

1. Teacher-forced, on held-out multi-turn conversations (heldout_multiturn.bin, never trained
   on): windows of 256 pairs, paired two ways: "full" (every pair (t, t_next): the threshold-0
   shape) and "mixed" (per window a PAD rate of 0.3). For each row: KL(plain || PIPO) of token 1
   (the plain target's distribution from the raw prefix before it) and of token 2 (the MTP head
   fed the true token 1), the confidence c, whether the MTP argmax equals the plain target's
   argmax, and the exact acceptance a speculative-sampling check would have, sum_x min(p_t, p_s)
   = E_{x~p_s} min(1, p_t(x)/p_s(x)). Per threshold: token-2 acceptance (c >= threshold; none
   at 1.0, where the head never runs), tokens per step (1 + acceptance), agreement of the kept
   token 2 with the plain argmax; calibration bins of c.
2. Generation: held-out chat prompts (half GSM8K test questions from tests/data/heldout_prompts.json,
   half story requests made from held-out stories), 64 raw tokens at temperature 0.8 with fixed
   seeds, by the plain target and by PIPO at each threshold (a full-recompute loop); the
   perplexity of each output set under the plain target (lower is "more like the target"; the
   plain target's own samples, two seed sets, give the reference and its noise), the share of
   repeated 4-grams, tokens per step and pairs per raw token (KV bytes per raw token).
3. recommended_threshold: the lowest threshold whose perplexity is within 5 % of the plain
   target's own samples (ratio <= 1.05).
"""
import argparse
import json
import math
import os
import random
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn.functional as F

from common import WORK, LOGS, MODELS, TESTDATA, chat_text
from model import TARGET
from pipo import load_unit, PAD, EOS_ID, EOT_ID, sample
from reference_hidden import load_gguf_model
from train_pipo import make_pairs

THRESHOLDS = [0.0, 0.5, 0.7, 0.85, 0.95, 1.0]
BINS = 10


@torch.no_grad()
def teacher_forced(m, tgt, windows, rate, M=256, seed=5):
    data = np.memmap(os.path.join(WORK, "heldout_multiturn.bin"), dtype=np.uint16, mode="r")
    gen = torch.Generator().manual_seed(seed)
    R = 2 * M + 4
    rows = {k: [] for k in ("kl1", "kl2", "c", "agree2", "soft2", "agree1")}
    for w in range(windows):
        start = (len(data) - R - 1) * w // windows   # evenly spread windows
        raw = data[start:start + R].astype(np.int64).tolist()
        pairs, ks = make_pairs(raw, rate, M, gen)
        P = torch.tensor(pairs[:M]).unsqueeze(0)
        k1 = torch.tensor(ks[1:])
        t1 = torch.tensor([raw[k] for k in ks[1:]]).unsqueeze(0)
        h = m.hidden(P)
        ls1 = F.log_softmax(m.head(h)[0], -1)
        g = m.mtp_g(h, t1)
        ls2 = F.log_softmax(m.head(g)[0], -1)
        c = m.conf(h, g)[0]
        lt = F.log_softmax(tgt(torch.tensor([raw]))[0], -1)
        lt1, lt2 = lt[k1 - 1], lt[k1]
        ok = k1 + 1 < R
        rows["kl1"].append((lt1.exp() * (lt1 - ls1)).sum(-1))
        rows["agree1"].append((lt1.argmax(-1) == ls1.argmax(-1)).float())
        rows["kl2"].append((lt2.exp() * (lt2 - ls2)).sum(-1)[ok])
        rows["c"].append(c[ok])
        rows["agree2"].append((lt2.argmax(-1) == ls2.argmax(-1)).float()[ok])
        rows["soft2"].append(torch.minimum(lt2.exp(), ls2.exp()).sum(-1)[ok])
    r = {k: torch.cat(v) for k, v in rows.items()}
    out = {"windows": windows, "pairs_per_window": M, "pad_rate": rate, "rows": len(r["c"]),
           "kl_token1": round(r["kl1"].mean().item(), 4), "kl_token2": round(r["kl2"].mean().item(), 4),
           "top1_agreement_token1": round(r["agree1"].mean().item(), 4),
           "top1_agreement_token2_all_rows": round(r["agree2"].mean().item(), 4),
           "spec_acceptance_token2_all_rows": round(r["soft2"].mean().item(), 4),
           "mean_confidence": round(r["c"].mean().item(), 4), "per_threshold": {}, "calibration": []}
    for thr in THRESHOLDS:
        keep = torch.zeros_like(r["c"], dtype=torch.bool) if thr >= 1.0 else r["c"] >= thr
        acc = keep.float().mean().item()
        out["per_threshold"][str(thr)] = {
            "acceptance": round(acc, 4), "tokens_per_step": round(1 + acc, 4),
            "kept_agreement": round(r["agree2"][keep].mean().item(), 4) if keep.any() else None,
            "kept_spec_acceptance": round(r["soft2"][keep].mean().item(), 4) if keep.any() else None}
    for b in range(BINS):
        lo, hi = b / BINS, (b + 1) / BINS
        sel = (r["c"] >= lo) & ((r["c"] < hi) if b < BINS - 1 else (r["c"] <= hi))
        n = int(sel.sum())
        out["calibration"].append({"bin": [lo, hi], "rows": n,
                                   "mean_confidence": round(r["c"][sel].mean().item(), 4) if n else None,
                                   "agreement": round(r["agree2"][sel].mean().item(), 4) if n else None,
                                   "spec_acceptance": round(r["soft2"][sel].mean().item(), 4) if n else None})
    return out


def prompts(n):
    """n held-out chat prompts: half GSM8K test questions, half story requests made from held-out
    stories (never trained on), rendered in the bundled template."""
    import sentencepiece as spm
    from prepare_data import story_request, read_jsonl
    sp = spm.SentencePieceProcessor(model_file=os.path.join(WORK, "tokenizer.model"))
    hp = [p["text"] for p in json.load(open(os.path.join(TESTDATA, "heldout_prompts.json")))["prompts"]
          if p["kind"] == "chat"][:n - n // 2]
    random.seed(31)
    stories = read_jsonl(os.path.join(WORK, "docs_heldout_stories.jsonl"))
    req = [story_request(s) for s in random.Random(31).sample(stories, n // 2)]
    return [[1] + sp.encode(chat_text(q)) for q in hp + req]


@torch.no_grad()
def plain_sample(tgt, ids, n, temp, gen):
    ids = list(ids)
    out = []
    for _ in range(n):
        t = sample(tgt(torch.tensor([ids]))[0, -1], temp, gen)
        out.append(t)
        ids.append(t)
        if t in (EOS_ID, EOT_ID):
            break
    return out


@torch.no_grad()
def nll_under(tgt, prompt, cont):
    ids = torch.tensor([prompt + cont])
    lp = F.log_softmax(tgt(ids)[0], -1)
    pos = torch.arange(len(prompt) - 1, len(prompt) + len(cont) - 1)
    return -lp[pos, torch.tensor(cont)].sum().item(), len(cont)


def rep4(seqs):
    tot = rep = 0
    for s in seqs:
        grams = [tuple(s[i:i + 4]) for i in range(len(s) - 3)]
        tot += len(grams)
        rep += len(grams) - len(set(grams))
    return rep / max(1, tot)


def gen_quality(m, tgt, n_prompts, seeds, n_tok=64, temp=0.8):
    ps = prompts(n_prompts)
    res = {"prompts": len(ps), "seeds": seeds, "raw_tokens": n_tok, "temperature": temp, "configs": {}}

    def score(name, conts, extra=None):
        nll = cnt = 0
        for p, c in conts:
            a, b = nll_under(tgt, p, c)
            nll += a
            cnt += b
        d = {"tokens": cnt, "ppl_under_plain": round(math.exp(nll / cnt), 3),
             "repeated_4gram_share": round(rep4([c for _, c in conts]), 4)}
        d.update(extra or {})
        res["configs"][name] = d
        print(name, json.dumps(d), flush=True)

    t0 = time.time()
    for sset in range(2):   # two seed sets of the plain target: its own sampling noise
        conts = []
        for i, p in enumerate(ps):
            for s in range(seeds):
                g = torch.Generator().manual_seed(100000 * (sset + 1) + 1000 * i + s)
                conts.append((p, plain_sample(tgt, p, n_tok, temp, g)))
        score(f"plain_seedset{sset}", conts, {"seconds": round(time.time() - t0, 1)})
        t0 = time.time()
    for thr in THRESHOLDS:
        conts, steps, pairs_total, raw_total, kept, ran = [], 0, 0, 0, 0, 0
        for i, p in enumerate(ps):
            for s in range(seeds):
                g = torch.Generator().manual_seed(100000 + 1000 * i + s)
                z = p + [PAD] if len(p) % 2 else list(p)
                confs = []
                pairs = m.generate(z, n_tok, thr, temp, g, max_raw=n_tok, confs=confs)
                cont = [t for pr in pairs for t in pr if t != PAD]
                # a kept token 2 that ends the turn ends the sample there (it is never followed)
                conts.append((p, cont))
                steps += len(pairs)
                kept += sum(pr[1] != PAD for pr in pairs)
                ran += sum(c is not None for c in confs)
                pairs_total += len(z) // 2 + len(pairs)
                raw_total += len(p) + len(cont)
        score(f"pipo_t{thr}", conts, {"threshold": thr, "tokens_per_step": round(sum(len(c) for _, c in conts) / steps, 4),
                                      "acceptance_of_head_steps": round(kept / ran, 4) if ran else None,
                                      "pairs_per_raw_token_incl_prompt": round(pairs_total / raw_total, 4),
                                      "seconds": round(time.time() - t0, 1)})
        t0 = time.time()
    return res


def summarize(res):
    """Summary table, recommended threshold and the manifest's quality section from the raw results."""
    cfg = res["generation"]["configs"]
    ref = cfg["plain_seedset0"]["ppl_under_plain"]
    noise = abs(cfg["plain_seedset1"]["ppl_under_plain"] / ref - 1)
    rec, table = None, {}
    for thr in THRESHOLDS:
        c = cfg[f"pipo_t{thr}"]
        ratio = c["ppl_under_plain"] / ref
        tf = res["teacher_forced"]["full_pairs"]["per_threshold"][str(thr)]
        table[str(thr)] = {"ppl_ratio_vs_plain": round(ratio, 4), "ppl": c["ppl_under_plain"],
                           "tokens_per_step_generation": c["tokens_per_step"],
                           "token2_acceptance_generation": c["acceptance_of_head_steps"],
                           "token2_acceptance_teacher_forced": tf["acceptance"],
                           "kept_token2_agreement_teacher_forced": tf["kept_agreement"],
                           "pairs_per_raw_token": c["pairs_per_raw_token_incl_prompt"]}
        if rec is None and ratio <= 1.05:
            rec = thr
    passed = rec is not None
    if rec is None:
        rec = 1.0
    # KV bytes (engine caches are f32): backbone 6 layers x K,V x 4 KV heads x 40 = 7,680 B per
    # pair; the MTP head keeps one row per pair too (1 layer: 1,280 B). Plain target: 7,680 B per token.
    kv_pair, kv_mtp = TARGET.n_layer * 2 * TARGET.n_head_kv * TARGET.head_dim * 4, 2 * TARGET.n_head_kv * TARGET.head_dim * 4
    for thr, row in table.items():
        row["kv_bytes_per_raw_token"] = round(row["pairs_per_raw_token"] * (kv_pair + kv_mtp), 1)
    res["summary"] = {"ppl_plain_own_samples": ref, "plain_seed_noise": round(noise, 4), "per_threshold": table,
                      "kv_bytes_per_raw_token_plain": kv_pair,
                      "kv_note": f"f32 caches: backbone {kv_pair} B per pair, MTP head {kv_mtp} B per pair"}
    res["recommended_threshold"] = rec
    rule = ("the lowest threshold whose samples' perplexity under the plain target is within 5 % of the "
            "plain target's own samples (ratio <= 1.05; same prompts, temperature 0.8, 64 raw tokens); "
            f"the plain target's two seed sets differ by {noise * 100:.1f} %, the noise of this measure. ")
    if passed:
        rule += f"Threshold {rec} is the lowest that passes."
    else:
        r1 = table["1.0"]["ppl_ratio_vs_plain"]
        worst = max(table[t]["ppl_ratio_vs_plain"] for t in table) / r1 - 1
        rule += ("No threshold passes (ratios " + ", ".join(f"{t}: {table[t]['ppl_ratio_vs_plain']:.3f}" for t in table)
                 + "), so the release falls back to 1.0: the MTP head never runs and each step is the backbone's "
                 "own one-token decoding (the prompt is still read as pairs). Even at 1.0 the fine-tuned backbone "
                 f"is not within 5 % ({(r1 - 1) * 100:.1f} %): most of the gap is token 1's fidelity (teacher-forced "
                 f"KL(plain || PIPO) of token 1 {res['teacher_forced']['full_pairs']['kl_token1']} nats), i.e. too little "
                 f"training of the backbone on pairs; keeping token 2 adds at most {worst * 100:.1f} % on top of that. "
                 "A lower threshold is a speed/fidelity choice for the user (see per_threshold).")
    res["recommended_threshold_rule"] = rule
    res["gate_passed"] = passed
    res["manifest_quality"] = {
        "evaluated_by": "resources/models/recipe/eval_pipo.py (logs/pipo_heldout.json)",
        "heldout": "held-out multi-turn conversations (teacher-forced); held-out GSM8K test / story prompts (generation)",
        "kl_token1_full_pairs": res["teacher_forced"]["full_pairs"]["kl_token1"],
        "kl_token2_full_pairs": res["teacher_forced"]["full_pairs"]["kl_token2"],
        "kl_token1_mixed_pairs": res["teacher_forced"]["mixed_pairs_pad0.3"]["kl_token1"],
        "ppl_plain_own_samples": ref, "plain_seed_noise": round(noise, 4),
        "per_threshold": {t: {k: v for k, v in row.items() if k in (
            "ppl_ratio_vs_plain", "tokens_per_step_generation", "token2_acceptance_generation",
            "kept_token2_agreement_teacher_forced", "kv_bytes_per_raw_token")} for t, row in table.items()},
        "gate_passed": passed, "recommended_threshold_rule": res["recommended_threshold_rule"]}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--unit", default=os.path.join(MODELS, "pipo"))
    ap.add_argument("--out", default=os.path.join(LOGS, "pipo_heldout.json"))
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--update-manifest", action="store_true", help="fill the unit's quality and recommended_threshold")
    ap.add_argument("--summarize-only", action="store_true", help="recompute the summary of an existing --out file")
    a = ap.parse_args()
    if a.summarize_only:
        res = summarize(json.load(open(a.out)))
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
        print(res["recommended_threshold_rule"])
        if a.update_manifest:
            update_manifest(a.unit, res)
        return
    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    m, man = load_unit(a.unit)
    tgt, _ = load_gguf_model(os.path.join(MODELS, "specchat-target.gguf"), TARGET)
    t0 = time.time()
    res = {"unit": os.path.relpath(a.unit, MODELS), "release": man["release"],
           "training_steps": man.get("training_steps")}
    res["teacher_forced"] = {"full_pairs": teacher_forced(m, tgt, a.windows, 0.0),
                             "mixed_pairs_pad0.3": teacher_forced(m, tgt, a.windows, 0.3)}
    print(json.dumps(res["teacher_forced"]["full_pairs"]["per_threshold"]), flush=True)
    res["generation"] = gen_quality(m, tgt, a.prompts, a.seeds)
    summarize(res)
    res["seconds"] = round(time.time() - t0, 1)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res["summary"], indent=1))
    print("recommended threshold", res["recommended_threshold"])
    if a.update_manifest:
        update_manifest(a.unit, res)


def update_manifest(unit, res):
    """Fills the unit's quality section and recommended_threshold (the parts' files do not change)."""
    mp = os.path.join(unit, "pipo.json")
    man = json.load(open(mp))
    man["recommended_threshold"] = res["recommended_threshold"]
    man["quality"] = res["manifest_quality"]
    with open(mp, "w") as f:
        json.dump(man, f, indent=1)
        f.write("\n")
    print("updated", mp)


if __name__ == "__main__":
    main()
