"""Exports a PIPO release unit (docs/design/pipo.md "The release unit") and its reference file.

usage: export_pipo.py --out DIR --release ID [--ckpt work/pipo2.pt | --init] [--ref]
                      [--threshold 0.85] [--quality logs/pipo_heldout.json]
       export_pipo.py --ref-only DIR         (tests/data/pipo/reference.json from an exported unit)

The unit is a folder: pipo.json (manifest) + backbone.gguf (llama, the fine-tuned copy of the
plain target, with the target's llama.* and tokenizer.* keys copied verbatim) + mtp.gguf
(specchat-mtp, bound to the backbone: specchat.target.sha256 = sha256 of backbone.gguf) +
io.gguf (specchat-pipo-io: compressor, PAD embedding, confidence head). Matrices F16; norm
vectors, biases and the PAD embedding F32. Every part carries pipo.release, pipo.role and
pipo.target.sha256 (the plain target's sha256). --init exports the untrained model (backbone =
target, MTP = specchat-mtp, compressor = e(a) + e(b)).

--ref writes tests/data/pipo/reference.json, computed by PyTorch on the unit read back from its
GGUF files (the F16-rounded weights the engine loads).
"""
import argparse
import hashlib
import json
import os
import struct

import numpy as np
import torch

from common import WORK, MODELS, TESTDATA
from export_gguf import GGUFWriter, ALIGN, T_U32, T_F32, T_STR
from export_drafters import write_mtp
from model import TARGET
from pipo import Pipo, PipoConfig, init_from_gguf, load_unit, pair_align, pairs_of, PAD, LAYER_MAP, IO_MAP

TARGET_PATH = os.path.join(MODELS, "specchat-target.gguf")
MTP_PATH = os.path.join(MODELS, "specchat-mtp.gguf")
FORMAT, VERSION = "specchat-pipo", 1


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def raw_kvs(path):
    """[(key, raw bytes of the whole key/value entry)] of a GGUF file, in file order: lets the
    backbone carry the target's keys byte for byte (types included)."""
    from reference_hidden import _Cursor
    buf = open(path, "rb").read()
    c = _Cursor(buf)
    c.pos = 4
    _, _, n_kv = c.unpack("<I"), c.unpack("<Q"), c.unpack("<Q")
    out = []
    for _ in range(n_kv):
        start = c.pos
        key = c.string()
        c.value(c.unpack("<I"))
        out.append((key, bytes(buf[start:c.pos])))
    return out


def pipo_keys(w, release, role, target_sha):
    w.add("pipo.release", T_STR, release)
    w.add("pipo.role", T_STR, role)
    w.add("pipo.target.sha256", T_STR, target_sha)


def round_f16(m):
    with torch.no_grad():
        for p in m.parameters():
            if p.ndim > 1:
                p.copy_(p.half().float())


def write_backbone(m, path, release, target_sha, steps):
    w = GGUFWriter()
    w.add("general.architecture", T_STR, "llama")
    w.add("general.name", T_STR, "specchat-pipo-backbone")
    w.add("general.alignment", T_U32, ALIGN)
    w.add("general.file_type", T_U32, 1)
    for key, raw in raw_kvs(TARGET_PATH):
        if key.startswith("llama.") or key.startswith("tokenizer.") or key == "specchat.family":
            w.kv.append(raw)
    w.add("specchat.training_steps", T_U32, steps)
    pipo_keys(w, release, "backbone", target_sha)
    sd = {k: v.numpy() for k, v in m.backbone.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["tok_emb.weight"])
    for il in range(m.bc.n_layer):
        for a, b in LAYER_MAP:
            w.add_tensor(f"blk.{il}.{b}.weight", sd[f"blocks.{il}.{a}.weight"])
    w.add_tensor("output_norm.weight", sd["norm.weight"])
    w.add_tensor("output.weight", sd["out.weight"])
    w.write(path)


def write_io(m, path, release, target_sha, steps):
    pc = m.pc
    w = GGUFWriter()
    a = "specchat-pipo-io"
    w.add("general.architecture", T_STR, a)
    w.add("general.name", T_STR, "specchat-pipo-io")
    w.add("general.alignment", T_U32, ALIGN)
    w.add("general.file_type", T_U32, 1)
    w.add(a + ".embedding_length", T_U32, pc.d_model)
    w.add(a + ".confidence_length", T_U32, pc.conf_dim)
    w.add(a + ".pair_size", T_U32, pc.pair_size)
    w.add(a + ".attention.layer_norm_rms_epsilon", T_F32, pc.norm_eps)
    w.add("specchat.training_steps", T_U32, steps)
    pipo_keys(w, release, "io", target_sha)
    sd = {k: v.numpy() for k, v in m.state_dict().items()}
    for k, g in IO_MAP:
        w.add_tensor(g, sd[k])   # 1-D (biases, norm, pad_embd) F32; matrices F16
    w.write(path)


def export_unit(m, out, release, steps, threshold, quality=None):
    os.makedirs(out, exist_ok=True)
    m = m.eval()
    round_f16(m)
    target_sha = sha256(TARGET_PATH)
    bpath, mpath, ipath = (os.path.join(out, f) for f in ("backbone.gguf", "mtp.gguf", "io.gguf"))
    write_backbone(m, bpath, release, target_sha, steps)
    extra = [("pipo.release", T_STR, release), ("pipo.role", T_STR, "mtp"),
             ("pipo.target.sha256", T_STR, target_sha)]
    write_mtp(m.mtp, mpath, "specchat-pipo-mtp", steps, target_path=bpath, extra_kv=extra)
    write_io(m, ipath, release, target_sha, steps)
    man = {"format": FORMAT, "version": VERSION, "release": release,
           "pair_size": 2, "extra_draft_tokens": 1, "recommended_threshold": threshold,
           "target": {"file": os.path.relpath(TARGET_PATH, out), "sha256": target_sha},
           "parts": {r: {"file": os.path.basename(p), "sha256": sha256(p)}
                     for r, p in (("backbone", bpath), ("mtp", mpath), ("io", ipath))},
           "training_steps": steps,
           "quality": quality or {"note": "not evaluated yet (recipe/eval_pipo.py fills this)"}}
    with open(os.path.join(out, "pipo.json"), "w") as f:
        json.dump(man, f, indent=1)
        f.write("\n")
    for p in (bpath, mpath, ipath):
        print(f"wrote {p} ({os.path.getsize(p)} bytes)")
    return man


# --- reference file ---------------------------------------------------------------------------

def ref_cases():
    """Three prompts of real held-out text (held-out multi-turn conversations): an odd one
    (pair-aligned with a trailing PAD), one continued after an odd first part (a PAD in the
    middle), an even one."""
    data = np.fromfile(os.path.join(WORK, "heldout_multiturn.bin"), dtype=np.uint16).astype(int).tolist()
    starts = [i for i, t in enumerate(data) if t == 1]
    a = data[starts[0]:starts[0] + 21]                   # odd: BOS + 20
    b1, b2 = data[starts[1]:starts[1] + 11], data[starts[1] + 11:starts[1] + 25]
    c = data[starts[3] + 40:starts[3] + 64]              # even, mid-conversation
    return [("odd prompt (21 ids), one PAD appended", pair_align(a)),
            ("odd first part (11 ids, PAD appended), then 14 more ids: a PAD in the middle",
             pair_align(b1) + pair_align(b2)),
            ("even prompt (24 ids)", pair_align(c))]


def r6(t):
    return [round(float(v), 6) for v in t.tolist()]


@torch.no_grad()
def write_reference(folder, out_path):
    m, man = load_unit(folder)
    res = {"note": ("Written by resources/models/recipe/export_pipo.py from the release unit named "
                    "here, read back from its GGUF files (F16 weights widened to f32), PyTorch f32. "
                    "pairs: the pair sequence (PAD = -1). latent0: compressor output of pair 0 (d "
                    "floats). logits: backbone logits at the last pair (predict the next pair's first "
                    "token). t1 = argmax(logits); mtp_logits / confidence: the MTP row of the last pair "
                    "with that t1 (rows 0..m-2 take the first token of the next pair) and its "
                    "confidence. continuation: greedy PIPO decode steps (full recompute; a pair is "
                    "[t1, t2] or [t1, -1]; generation stops after a pair with an end token, id 2 or 6, "
                    "in either slot), at acceptance threshold 0.5 and 1.0, with each step's confidence (null: the head did not run). Floats rounded to 6 decimals."),
           "release": man["release"], "manifest": os.path.relpath(os.path.join(folder, "pipo.json"),
                                                                   os.path.dirname(os.path.dirname(TESTDATA))),
           "tolerance": 1e-3, "steps": 8, "cases": []}
    for desc, z in ref_cases():
        pairs = pairs_of(z).unsqueeze(0)
        lat = m.latents(pairs)[0]
        h = m.backbone.hidden_from_embeds(lat.unsqueeze(0))
        logits = m.head(h[0, -1])
        t1 = int(logits.argmax())
        t1_rows = torch.cat((pairs[0, 1:, 0], torch.tensor([t1])))
        g = m.mtp_g(h, t1_rows.unsqueeze(0))
        ml = m.head(g[0, -1])
        conf = m.conf(h[0, -1], g[0, -1]).item()
        case = {"desc": desc, "pairs": z, "latent0": r6(lat[0]), "logits": r6(logits), "t1": t1,
                "mtp_logits": r6(ml), "mtp_argmax": int(ml.argmax()), "confidence": round(conf, 6),
                "continuation": {}}
        case["continuation_confidence"] = {}
        for thr in (0.5, 1.0):
            confs = []
            case["continuation"][str(thr)] = m.generate(z, 8, thr, confs=confs)
            case["continuation_confidence"][str(thr)] = confs
        # margins the C++ check needs (a near-tie in argmax or in confidence vs 0.5 would be flaky)
        top = logits.topk(2).values
        case["margins"] = {"logits_top2_gap": round(float(top[0] - top[1]), 6),
                           "confidence_minus_0.5": round(conf - 0.5, 6)}
        res["cases"].append(case)
        print(f"{desc}: t1 {t1}, mtp argmax {case['mtp_argmax']}, conf {conf:.4f}, "
              f"cont@0.5 {case['continuation']['0.5']}, cont@1.0 {case['continuation']['1.0']}")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(res, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {out_path} ({os.path.getsize(out_path)} bytes)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(MODELS, "pipo"))
    ap.add_argument("--release", default="")
    ap.add_argument("--ckpt", default=os.path.join(WORK, "pipo2.pt"))
    ap.add_argument("--init", action="store_true", help="export the untrained model")
    ap.add_argument("--threshold", type=float, default=0.85, help="recommended_threshold")
    ap.add_argument("--quality", default="", help="json whose 'manifest_quality' fills the quality section")
    ap.add_argument("--ref", action="store_true", help="also write tests/data/pipo/reference.json")
    ap.add_argument("--ref-only", default="", help="only write the reference from this unit folder")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    ref_path = os.path.join(TESTDATA, "pipo", "reference.json")
    if a.ref_only:
        write_reference(a.ref_only, ref_path)
        return
    if a.init:
        m, steps = init_from_gguf(TARGET_PATH, MTP_PATH), 0
    else:
        ck = torch.load(a.ckpt)
        m = Pipo(TARGET, PipoConfig(**ck["pipo_config"]))
        m.load_state_dict(ck["model"])
        steps = ck["total_steps"]
    quality, thr = None, a.threshold
    if a.quality:
        q = json.load(open(a.quality))
        quality, thr = q["manifest_quality"], q["recommended_threshold"]
    export_unit(m, a.out, a.release or ("specchat-pipo-init" if a.init else "specchat-pipo"), steps, thr, quality)
    if a.ref:
        write_reference(a.out, ref_path)


if __name__ == "__main__":
    main()
