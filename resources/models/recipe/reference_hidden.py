"""Reference hidden states of the bundled models, read back from their GGUF files.

usage: reference_hidden.py [--models-dir resources/models] [--out tests/data/reference_hidden.json]

Needs no training checkpoint: a small GGUF v3 reader loads resources/models/specchat-{target,draft}.gguf
(F16 matrices widened exactly to f32, F32 norm vectors) back into model.Llama. For each case of
tests/data/reference_logits.json it records, at that case's positions, the residual stream after
a few blocks (the output of blocks[il]) and the final norm's output (layer -1: the LM head's
input). As a self-check it recomputes the logits out(norm(x)) at those positions and requires
them to match reference_logits.json within 1e-4, which shows the weights read back are exactly
the ones the reference logits were made from.
"""
import argparse
import json
import os
import struct

import numpy as np
import torch

from common import MODELS, TESTDATA
from model import Llama, Config, TARGET, DRAFT

# Layers recorded per model; -1 = final norm output (the LM head's input).
LAYERS = {"target": [1, 4, -1], "draft": [0, 1, -1]}
CONFIGS = {"target": TARGET, "draft": DRAFT}
LOGIT_CHECK = 1e-4
TOLERANCE = 1e-3

# --- GGUF v3 reader -----------------------------------------------------------------------

GGUF_MAGIC = b"GGUF"
# metadata value types -> struct format (scalars); 8 = string, 9 = array
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B",
           10: "<Q", 11: "<q", 12: "<d"}
T_STR, T_ARR = 8, 9
GGML_F32, GGML_F16 = 0, 1
_GGML_DTYPE = {GGML_F32: np.float32, GGML_F16: np.float16}


class _Cursor:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def unpack(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.unpack("<Q")
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def value(self, t):
        if t == T_STR:
            return self.string()
        if t == T_ARR:
            et, n = self.unpack("<I"), self.unpack("<Q")
            return [self.value(et) for _ in range(n)]
        if t in _SCALAR:
            v = self.unpack(_SCALAR[t])
            return bool(v) if t == 7 else v
        raise ValueError(f"unknown GGUF metadata type {t}")


def _read_header(path):
    with open(path, "rb") as f:
        buf = f.read()
    c = _Cursor(buf)
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise ValueError(f"{path}: not a GGUF file")
    c.pos = 4
    version, n_tensors, n_kv = c.unpack("<I"), c.unpack("<Q"), c.unpack("<Q")
    if version != 3:
        raise ValueError(f"{path}: GGUF version {version}, expected 3")
    meta = {}
    for _ in range(n_kv):
        key = c.string()
        meta[key] = c.value(c.unpack("<I"))
    return buf, c, meta, n_tensors


def read_gguf_meta(path):
    """Returns the metadata dict of a GGUF file (tensors are not read)."""
    return _read_header(path)[2]


def read_gguf(path):
    """Returns (metadata dict, {name: np.float32 array in PyTorch row-major shape})."""
    buf, c, meta, n_tensors = _read_header(path)
    infos = []
    for _ in range(n_tensors):
        name = c.string()
        n_dims = c.unpack("<I")
        dims = [c.unpack("<Q") for _ in range(n_dims)]
        typ, offset = c.unpack("<I"), c.unpack("<Q")
        infos.append((name, dims, typ, offset))
    align = meta.get("general.alignment", 32)
    data_start = (c.pos + align - 1) // align * align
    tensors = {}
    for name, dims, typ, offset in infos:
        if typ not in _GGML_DTYPE:
            raise ValueError(f"{path}: tensor {name} has ggml type {typ} (only F32/F16 supported)")
        count = int(np.prod(dims))
        start = data_start + offset
        arr = np.frombuffer(buf, dtype=_GGML_DTYPE[typ], count=count, offset=start)
        # GGUF dims are ne[0]-innermost: the row-major shape is the reverse.
        tensors[name] = arr.reshape(list(reversed(dims))).astype(np.float32)  # f16 -> f32 is exact
    return meta, tensors


# --- GGUF -> model.Llama --------------------------------------------------------------------

_BLOCK_MAP = [("attn_norm.weight", "attn_norm.weight"), ("attn_q.weight", "wq.weight"),
              ("attn_k.weight", "wk.weight"), ("attn_v.weight", "wv.weight"),
              ("attn_output.weight", "wo.weight"), ("ffn_norm.weight", "ffn_norm.weight"),
              ("ffn_gate.weight", "w_gate.weight"), ("ffn_up.weight", "w_up.weight"),
              ("ffn_down.weight", "w_down.weight")]


def config_from_meta(meta):
    g = lambda k: meta[f"llama.{k}"]
    c = Config(n_vocab=g("vocab_size"), d_model=g("embedding_length"), n_layer=g("block_count"),
               n_head=g("attention.head_count"), n_head_kv=g("attention.head_count_kv"),
               d_ff=g("feed_forward_length"), n_ctx=g("context_length"),
               rope_theta=g("rope.freq_base"), norm_eps=g("attention.layer_norm_rms_epsilon"))
    assert meta["general.architecture"] == "llama", meta["general.architecture"]
    assert g("rope.dimension_count") == c.head_dim, (g("rope.dimension_count"), c.head_dim)
    return c


def load_gguf_model(path, expected):
    meta, tensors = read_gguf(path)
    c = config_from_meta(meta)
    # f32 metadata (rope base, eps) went through a float32 round trip: compare at f32 precision.
    for k, v in expected.to_dict().items():
        got = getattr(c, k)
        ok = (np.float32(got) == np.float32(v)) if isinstance(v, float) else got == v
        assert ok, f"{path}: {k} = {got} in GGUF, {v} in model.py"
    c = expected  # identical; use model.py's exact (python float) values
    sd = {"tok_emb.weight": tensors.pop("token_embd.weight")}
    for il in range(c.n_layer):
        for src, dst in _BLOCK_MAP:
            sd[f"blocks.{il}.{dst}"] = tensors.pop(f"blk.{il}.{src}")
    sd["norm.weight"] = tensors.pop("output_norm.weight")
    sd["out.weight"] = tensors.pop("output.weight")
    assert not tensors, f"{path}: unused tensors {sorted(tensors)}"
    m = Llama(c)
    m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()}, strict=True)
    m.eval()
    return m, meta


@torch.no_grad()
def hidden_states(m, ids):
    """Model.forward, step by step: returns ([x after blocks[il] for each il], norm(x), logits)."""
    idx = torch.tensor([ids])
    T = idx.shape[1]
    x = m.tok_emb(idx)
    cos, sin = m.cos[:T], m.sin[:T]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    per_layer = []
    for b in m.blocks:
        x = b(x, cos, sin, mask)
        per_layer.append(x[0])
    h = m.norm(x)
    return per_layer, h[0], m.out(h)[0]


def r6(v):
    return float(f"{v:.6g}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=MODELS)
    ap.add_argument("--out", default=os.path.join(TESTDATA, "reference_hidden.json"))
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    ref = json.load(open(os.path.join(TESTDATA, "reference_logits.json")))
    models = {}
    for role in ("target", "draft"):
        path = os.path.join(a.models_dir, f"specchat-{role}.gguf")
        models[role], meta = load_gguf_model(path, CONFIGS[role])
        print(f"loaded {path}: {meta['general.name']}, {models[role].n_params()} params, "
              f"config {models[role].c}")
    out = {"tolerance": TOLERANCE,
           "note": ("Written by resources/models/recipe/reference_hidden.py from the bundled GGUF files "
                    "(F16 weights widened exactly to f32, PyTorch f32 forward on CPU). For each case of "
                    "reference_logits.json, at its positions: hidden[l][p] is the residual stream after "
                    "block layers[l] (x after blocks[il], il 0-based), and layer -1 is the final RMSNorm's "
                    "output (the LM head's input). Values rounded to 6 significant digits. Self-check: "
                    "out(norm(x)) at the positions matches reference_logits.json within 1e-4."),
           "cases": []}
    worst = {}
    for case in ref["cases"]:
        ids, positions = case["ids"], case["positions"]
        entry = {"text": case["text"], "ids": ids, "positions": positions}
        for role, m in models.items():
            per_layer, normed, logits = hidden_states(m, ids)
            full = m(torch.tensor([ids]))[0]  # model.forward must agree with the step-by-step pass
            assert torch.equal(full, logits), role
            got = logits[positions]
            want = torch.tensor(case[role], dtype=torch.float32)
            d = (got - want).abs().max().item()
            worst[role] = max(worst.get(role, 0.0), d)
            print(f"{role:6s} case {ref['cases'].index(case)}: max |logits - reference| = {d:.3g}")
            assert d <= LOGIT_CHECK, f"{role}: logits differ from reference_logits.json by {d}"
            hidden = []
            for il in LAYERS[role]:
                t = normed if il == -1 else per_layer[il]
                hidden.append([[r6(v) for v in t[p].tolist()] for p in positions])
            entry[role] = {"layers": LAYERS[role], "hidden": hidden}
            mags = {il: t[positions].abs().max().item()
                    for il, t in zip(LAYERS[role], [normed if il == -1 else per_layer[il] for il in LAYERS[role]])}
            print(f"        max |hidden| per layer: " + ", ".join(f"{k}: {v:.3g}" for k, v in mags.items()))
        out["cases"].append(entry)
    with open(a.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("self-check (max |logits - reference_logits.json| over all cases): "
          + ", ".join(f"{r} {v:.3g}" for r, v in worst.items()) + f" (limit {LOGIT_CHECK})")
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes)")


if __name__ == "__main__":
    main()
