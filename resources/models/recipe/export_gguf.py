"""Step 3: export target and draft to GGUF v3 (llama architecture) and write reference vectors.

usage: export_gguf.py [--out-dir resources/models]

Weights are stored as F16 (matrices) and F32 (norm vectors, as llama.cpp does): half the size
of F32, and the engine converts to f32 at load. Reference logits are computed by PyTorch with
the *exported* (F16-rounded) weights, so the C++ forward is checked against the framework on
exactly the numbers it loads (tolerance 1e-3 then covers only summation order).
"""
import argparse
import json
import os
import struct

import numpy as np
import torch

from common import (WORK, MODELS, TESTDATA, CHAT_TEMPLATE, CONTROL_SYMBOLS, chat_text,
                    ensure_dirs)
from model import Llama, Config

GGUF_MAGIC, GGUF_VERSION, ALIGN = b"GGUF", 3, 32
T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1


class GGUFWriter:
    """Minimal GGUF v3 writer (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md)."""

    def __init__(self):
        self.kv, self.tensors = [], []

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _val(self, t, v):
        if t == T_U32:
            return struct.pack("<I", v)
        if t == T_I32:
            return struct.pack("<i", v)
        if t == T_F32:
            return struct.pack("<f", v)
        if t == T_BOOL:
            return struct.pack("<B", 1 if v else 0)
        if t == T_STR:
            return self._str(v)
        raise ValueError(t)

    def add(self, key, t, v):
        self.kv.append(self._str(key) + struct.pack("<I", t) + self._val(t, v))

    def add_array(self, key, t, vals):
        body = b"".join(self._val(t, v) for v in vals)
        self.kv.append(self._str(key) + struct.pack("<I", T_ARR) + struct.pack("<IQ", t, len(vals)) + body)

    def add_tensor(self, name, arr):
        """arr: numpy array in PyTorch (row-major) shape; GGUF dims are reversed (ne[0] innermost)."""
        if arr.ndim == 1:
            data, typ = arr.astype(np.float32), GGML_F32
        else:
            data, typ = arr.astype(np.float16), GGML_F16
        self.tensors.append((name, list(reversed(arr.shape)), typ, data.tobytes()))

    def write(self, path):
        out = bytearray(GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv)))
        for kv in self.kv:
            out += kv
        offset, infos = 0, []
        for name, ne, typ, data in self.tensors:
            infos.append(self._str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
                         + struct.pack("<IQ", typ, offset))
            offset += (len(data) + ALIGN - 1) // ALIGN * ALIGN
        for i in infos:
            out += i
        out += b"\0" * ((-len(out)) % ALIGN)
        for _, _, _, data in self.tensors:
            out += data + b"\0" * ((-len(data)) % ALIGN)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(out)
        os.replace(tmp, path)


def load_model(role):
    ck = torch.load(os.path.join(WORK, f"{role}.pt"))
    m = Llama(Config(**ck["config"]))
    m.load_state_dict(ck["model"])
    m.eval()
    return m, ck["step"]


def round_to_export_precision(m):
    """Rounds every matrix to f16 in place (what the GGUF holds)."""
    with torch.no_grad():
        for p in m.parameters():
            if p.ndim > 1:
                p.copy_(p.half().float())


def write_gguf(m, sp, role, path, step):
    c = m.c
    w = GGUFWriter()
    w.add("general.architecture", T_STR, "llama")
    w.add("general.name", T_STR, f"specchat-{role}")
    w.add("general.alignment", T_U32, ALIGN)
    w.add("general.file_type", T_U32, 1)  # mostly F16
    w.add("llama.context_length", T_U32, c.n_ctx)
    w.add("llama.embedding_length", T_U32, c.d_model)
    w.add("llama.block_count", T_U32, c.n_layer)
    w.add("llama.feed_forward_length", T_U32, c.d_ff)
    w.add("llama.attention.head_count", T_U32, c.n_head)
    w.add("llama.attention.head_count_kv", T_U32, c.n_head_kv)
    w.add("llama.rope.dimension_count", T_U32, c.head_dim)
    w.add("llama.rope.freq_base", T_F32, c.rope_theta)
    w.add("llama.attention.layer_norm_rms_epsilon", T_F32, c.norm_eps)
    w.add("llama.vocab_size", T_U32, c.n_vocab)
    n = sp.get_piece_size()
    w.add("tokenizer.ggml.model", T_STR, "llama")
    w.add_array("tokenizer.ggml.tokens", T_STR, [sp.id_to_piece(i) for i in range(n)])
    w.add_array("tokenizer.ggml.scores", T_F32, [sp.get_score(i) for i in range(n)])
    types = []
    for i in range(n):
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_byte(i):
            types.append(6)
        elif sp.id_to_piece(i) in CONTROL_SYMBOLS:
            types.append(4)  # user-defined: matched atomically in text
        else:
            types.append(1)
    w.add_array("tokenizer.ggml.token_type", T_I32, types)
    w.add("tokenizer.ggml.bos_token_id", T_U32, sp.bos_id())
    w.add("tokenizer.ggml.eos_token_id", T_U32, sp.eos_id())
    w.add("tokenizer.ggml.unknown_token_id", T_U32, sp.unk_id())
    w.add("tokenizer.ggml.eot_token_id", T_U32, sp.piece_to_id("<|end|>"))
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, True)
    w.add("tokenizer.ggml.add_eos_token", T_BOOL, False)
    w.add("tokenizer.ggml.add_space_prefix", T_BOOL, True)
    w.add("tokenizer.chat_template", T_STR, CHAT_TEMPLATE)
    w.add("specchat.training_steps", T_U32, step)
    w.add("specchat.family", T_U32, 2 if c.n_ctx > 256 else 1)
    sd = {k: v.numpy() for k, v in m.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["tok_emb.weight"])
    for il in range(c.n_layer):
        p = f"blocks.{il}."
        g = f"blk.{il}."
        for src, dst in [("attn_norm.weight", "attn_norm.weight"), ("wq.weight", "attn_q.weight"),
                         ("wk.weight", "attn_k.weight"), ("wv.weight", "attn_v.weight"),
                         ("wo.weight", "attn_output.weight"), ("ffn_norm.weight", "ffn_norm.weight"),
                         ("w_gate.weight", "ffn_gate.weight"), ("w_up.weight", "ffn_up.weight"),
                         ("w_down.weight", "ffn_down.weight")]:
            w.add_tensor(g + dst, sd[p + src])
    w.add_tensor("output_norm.weight", sd["norm.weight"])
    w.add_tensor("output.weight", sd["out.weight"])
    w.write(path)


REF_PROMPTS = [
    "Once upon a time, there was a little girl named Lily.",
    chat_text("Tom has 3 apples and buys 5 more. How many apples does he have?"),
    "The quick brown fox jumps over the lazy dog. 12345 😀",
]


@torch.no_grad()
def reference_vectors(models, sp):
    """For each prompt: ids (BOS first) and, per model, logits at a few positions."""
    out = {"tolerance": 1e-3, "cases": []}
    for text in REF_PROMPTS:
        ids = [sp.bos_id()] + sp.encode(text)
        positions = sorted({0, len(ids) // 2, len(ids) - 1})
        case = {"text": text, "ids": ids, "positions": positions}
        for role, m in models.items():
            logits = m(torch.tensor([ids]))[0]
            case[role] = [logits[p].tolist() for p in positions]
        out["cases"].append(case)
    return out


TOKENIZER_STRINGS = [
    "Hello world", " Hello world", "   Hello", "Hello  world\tand\nnew line", "12345 + 678 = 13023",
    "日本語のテキスト", "emoji 😀🎉 done", "<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n",
    "Tom said, \"Don't go!\"", "", " ", "\n\n", "naïve café", "a\u00a0b",
]


def heldout_prompts(n_each=60):
    """Prompts from the held-out data (never trained on): story openings as raw text, GSM8K
    test questions as chat turns. Used by the greedy-identity tests and benchmarks."""
    import random
    rnd = random.Random(99)
    stories = [json.loads(l) for l in open(os.path.join(WORK, "docs_heldout_stories.jsonl"))]
    chats = [json.loads(l) for l in open(os.path.join(WORK, "docs_heldout_chat.jsonl"))]
    out = []
    for s in rnd.sample(stories, n_each):
        words = s.split()
        out.append({"kind": "text", "text": " ".join(words[:rnd.randint(4, 16)])})
    for c in rnd.sample(chats, n_each):
        q = c.split("<|user|>\n", 1)[1].split("<|end|>", 1)[0]
        out.append({"kind": "chat", "text": q})
    return {"prompts": out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=MODELS)
    ap.add_argument("--family", choices=["v1", "v2"], default="v2",
                    help="v2: the ctx-1024 checkpoints target2.pt / draft2.pt (train.py target2|draft2)")
    ap.add_argument("--draft-only", metavar="CKPT",
                    help="write only specchat-draft.gguf from work/CKPT.pt (e.g. draft3) and replace the "
                         "draft's entries of reference_logits.json (only when --out-dir is resources/models); the "
                         "target and the test data stay")
    a = ap.parse_args()
    ensure_dirs()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(WORK, "tokenizer.model"))
    if a.draft_only:
        m, step = load_model(a.draft_only)
        round_to_export_precision(m)
        path = os.path.join(a.out_dir, "specchat-draft.gguf")
        write_gguf(m, sp, "draft", path, step)
        print(f"wrote {path} ({os.path.getsize(path)} bytes, step {step})")
        if os.path.abspath(a.out_dir) != os.path.abspath(MODELS):
            return  # a trial export (e.g. to measure a checkpoint with specchat-cli calibrate)
        ref_path = os.path.join(TESTDATA, "reference_logits.json")
        refs = json.load(open(ref_path))
        new = reference_vectors({"draft": m}, sp)
        for case, fresh in zip(refs["cases"], new["cases"]):
            assert case["ids"] == fresh["ids"] and case["positions"] == fresh["positions"]
            case["draft"] = fresh["draft"]
        json.dump(refs, open(ref_path, "w"))
        print(f"replaced the draft's entries of {ref_path}")
        return
    models = {}
    for role in ("target", "draft"):
        ckpt = role + ("2" if a.family == "v2" else "")
        if not os.path.exists(os.path.join(WORK, f"{ckpt}.pt")):
            print(f"no {ckpt} checkpoint; skipped")
            continue
        m, step = load_model(ckpt)
        round_to_export_precision(m)
        path = os.path.join(a.out_dir, f"specchat-{role}.gguf")
        write_gguf(m, sp, role, path, step)
        models[role] = m
        print(f"wrote {path} ({os.path.getsize(path)} bytes, step {step})")
    json.dump(reference_vectors(models, sp), open(os.path.join(TESTDATA, "reference_logits.json"), "w"))
    cases = [{"text": s, "ids": sp.encode(s)} for s in TOKENIZER_STRINGS]
    json.dump({"cases": cases}, open(os.path.join(TESTDATA, "tokenizer_cases.json"), "w"), indent=0,
              ensure_ascii=False)
    json.dump(heldout_prompts(), open(os.path.join(TESTDATA, "heldout_prompts.json"), "w"), indent=0,
              ensure_ascii=False)
    print("wrote reference_logits.json, tokenizer_cases.json and heldout_prompts.json")


if __name__ == "__main__":
    main()
