"""Step 1: documents from the corpus, the SentencePiece tokenizer, and token arrays.

Output (work/): docs_train.txt / docs_heldout_*.txt (one JSON document per line),
tokenizer.model, train.bin / heldout_*.bin (uint16 token ids, BOS before each document).
Idempotent: a step whose output exists is skipped.
"""
import glob
import json
import os
import random
import re
import sys

import numpy as np

from common import (CORPUS, WORK, RECIPE_DIR, VOCAB_SIZE, CONTROL_SYMBOLS, chat_text,
                    gsm8k_answer, ensure_dirs)

random.seed(1234)
BOOK_BYTES = 1_500_000   # books are a small share: they teach a tiny model little (TRAINING-NOTES)


def read_stories(path, sep="<|endoftext|>"):
    text = open(path, encoding="utf-8").read()
    return [s.strip() for s in text.split(sep) if len(s.strip()) > 50]


def valid_stories(path):
    # The valid file separates stories and paragraphs alike with blank lines: keep blocks.
    blocks = [b.strip() for b in open(path, encoding="utf-8").read().split("\n\n")]
    return [b for b in blocks if len(b) > 200]


NAME = re.compile(r"\b(?:named|called) ([A-Z][a-z]+)")


def story_request(story):
    """A short request made from the story, so the model learns stories as chat replies."""
    first = re.split(r"(?<=[.!?])\s", story, maxsplit=1)[0]
    m = NAME.search(story)
    choices = ["Tell me a story.", "Write a short story for a child.",
               f"Write a story that begins with: {first}"]
    if m:
        choices += [f"Tell me a story about {m.group(1)}.",
                    f"Can you write a short story about a character named {m.group(1)}?"]
    return random.choice(choices)


def strip_gutenberg(text):
    start = re.search(r"\*\*\* ?START OF.*?\*\*\*", text)
    end = re.search(r"\*\*\* ?END OF.*?\*\*\*", text)
    body = text[start.end() if start else 0: end.start() if end else len(text)]
    body = body.replace("\r\n", "\n").replace("\ufeff", "")
    paras = [re.sub(r"\s*\n\s*", " ", p).strip() for p in body.split("\n\n")]
    return [p for p in paras if len(p) > 80]


def build_docs():
    train, held_stories, held_chat = [], [], []
    cased = read_stories(os.path.join(CORPUS, "tinystories/TinyStories-train_head_cased.txt"))
    lower = read_stories(os.path.join(CORPUS, "tinystories/TinyStories-train_part2_lowercase.txt"))
    for s in cased:
        if random.random() < 0.5:
            train.append(chat_text(story_request(s), s))
        else:
            train.append(s)
    train += lower
    held_stories = valid_stories(os.path.join(CORPUS, "tinystories/TinyStories-valid_head.txt"))
    for line in open(os.path.join(CORPUS, "chat/gsm8k_train.jsonl"), encoding="utf-8"):
        r = json.loads(line)
        train.append(chat_text(r["question"].strip(), gsm8k_answer(r["answer"])))
    for line in open(os.path.join(CORPUS, "chat/gsm8k_test.jsonl"), encoding="utf-8"):
        r = json.loads(line)
        held_chat.append(chat_text(r["question"].strip(), gsm8k_answer(r["answer"])))
    books = sorted(glob.glob(os.path.join(CORPUS, "gutenberg/*.txt")))
    random.shuffle(books)
    taken = 0
    for b in books:
        paras = strip_gutenberg(open(b, encoding="utf-8", errors="replace").read())
        chunk, n = [], 0
        for p in paras[len(paras) // 4:]:  # skip front matter and tables of contents
            chunk.append(p)
            n += len(p)
            if n > 60_000:
                break
        train.append("\n".join(chunk))
        taken += n
        if taken > BOOK_BYTES:
            break
    random.shuffle(train)
    return train, held_stories, held_chat


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")


def read_jsonl(path):
    return [json.loads(l) for l in open(path, encoding="utf-8")]


def train_tokenizer(docs):
    import sentencepiece as spm
    # SentencePiece reads one sentence per line: split documents into lines.
    lines_path = os.path.join(WORK, "spm_input.txt")
    with open(lines_path, "w", encoding="utf-8") as f:
        for d in docs:
            for line in d.split("\n"):
                for sym in CONTROL_SYMBOLS:
                    line = line.replace(sym, " ")
                if line.strip():
                    f.write(line.strip() + "\n")
    spm.SentencePieceTrainer.train(
        input=lines_path, model_prefix=os.path.join(WORK, "tokenizer"), model_type="bpe",
        vocab_size=VOCAB_SIZE, byte_fallback=True, split_digits=True,
        user_defined_symbols=CONTROL_SYMBOLS, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, character_coverage=0.9995,
        input_sentence_size=400_000, shuffle_input_sentence=True, num_threads=2,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, max_sentence_length=8192)


def encode_docs(sp, docs, path):
    ids = []
    for d in docs:
        ids.append(1)  # BOS before every document, as the engine does for a prompt
        ids.extend(sp.encode(d))
        if not d.endswith("<|end|>"):
            ids.append(2)  # EOS ends plain documents; chat replies end with <|end|>
    arr = np.array(ids, dtype=np.uint16)
    arr.tofile(path)
    return len(arr)


def main():
    ensure_dirs()
    paths = {k: os.path.join(WORK, f"docs_{k}.jsonl") for k in ("train", "heldout_stories", "heldout_chat")}
    if not all(os.path.exists(p) for p in paths.values()):
        train, hs, hc = build_docs()
        write_jsonl(paths["train"], train)
        write_jsonl(paths["heldout_stories"], hs)
        write_jsonl(paths["heldout_chat"], hc)
    docs = {k: read_jsonl(p) for k, p in paths.items()}
    if not os.path.exists(os.path.join(WORK, "tokenizer.model")):
        train_tokenizer(docs["train"])
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(WORK, "tokenizer.model"))
    stats = {}
    for k, d in docs.items():
        out = os.path.join(WORK, f"{k}.bin")
        n_bytes = sum(len(x.encode("utf-8")) for x in d)
        if not os.path.exists(out):
            n = encode_docs(sp, d, out)
        else:
            n = os.path.getsize(out) // 2
        stats[k] = {"docs": len(d), "bytes": n_bytes, "tokens": n}
    json.dump(stats, open(os.path.join(RECIPE_DIR, "logs", "data_stats.json"), "w"), indent=1)
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    sys.exit(main())
