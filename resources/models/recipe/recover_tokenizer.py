"""Rebuilds work/tokenizer.model (SentencePiece BPE) from the bundled target's GGUF vocabulary.

The tokenizer was trained once (prepare_data.py) and lives on in the GGUF files; work/ is not
committed. Family v2 keeps the same vocabulary, so the recipe recovers the model instead of
retraining it: pieces, scores and types from tokenizer.ggml.*, trainer/normalizer settings as
prepare_data.train_tokenizer used them. Checked against tests/data/tokenizer_cases.json.

usage: recover_tokenizer.py [--gguf resources/models/specchat-target.gguf]
"""
import argparse
import json
import os
import sys

from common import WORK, MODELS, TESTDATA, VOCAB_SIZE, ensure_dirs
from reference_hidden import read_gguf_meta


def build(meta):
    from sentencepiece import sentencepiece_model_pb2 as pb
    m = pb.ModelProto()
    toks = meta["tokenizer.ggml.tokens"]
    scores = meta["tokenizer.ggml.scores"]
    types = meta["tokenizer.ggml.token_type"]
    if len(toks) != VOCAB_SIZE:
        raise SystemExit(f"vocabulary has {len(toks)} pieces, expected {VOCAB_SIZE}")
    for t, s, ty in zip(toks, scores, types):
        p = m.pieces.add()
        p.piece, p.score, p.type = t, float(s), int(ty)
    ts = m.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.vocab_size = len(toks)
    ts.byte_fallback = True
    ts.split_digits = True
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ts.max_sentence_length = 8192
    ns = m.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = True
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    return m


def check(path):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=path)
    cases = json.load(open(os.path.join(TESTDATA, "tokenizer_cases.json")))["cases"]
    bad = 0
    for c in cases:
        got = sp.encode(c["text"])
        if got != c["ids"]:
            bad += 1
            print("mismatch:", repr(c["text"][:60]), got[:12], c["ids"][:12], file=sys.stderr)
    print(f"{len(cases) - bad}/{len(cases)} tokenizer cases match")
    return bad == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(MODELS, "specchat-target.gguf"))
    a = ap.parse_args()
    ensure_dirs()
    out = os.path.join(WORK, "tokenizer.model")
    m = build(read_gguf_meta(a.gguf))
    with open(out + ".tmp", "wb") as f:
        f.write(m.SerializeToString())
    if not check(out + ".tmp"):
        raise SystemExit("recovered tokenizer disagrees with tests/data/tokenizer_cases.json")
    os.replace(out + ".tmp", out)
    print("wrote", out)


if __name__ == "__main__":
    main()
