"""Target-generated text for training the feature drafters (DFlash §4: drafters learn the
target's own continuations, not the corpus).

usage: gen_text.py [--n 1600] [--jobs 2] [--cli build/app/specchat-cli] [--max-tokens 200]

Prompts come from the corpus's *training* split only (held-out stories and GSM8K test stay
unseen): story openings continued as raw text, story requests and GSM8K train questions as chat
turns in the bundled template. Half the requests are greedy, half sampled at temperature 0.8
(seeded), so the drafters see both regimes. specchat-cli does the generation (C++ is far
faster than PyTorch here); its --json output carries the exact token ids.

Output: work/gen.npz (tokens: all ids concatenated, offsets: [n + 1] sequence starts) and
work/gen.jsonl (one line per request, resumable: finished requests are skipped).
"""
import argparse
import json
import os
import random
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from common import CORPUS, WORK, REPO_ROOT, ensure_dirs

NAME = re.compile(r"\b(?:named|called) ([A-Z][a-z]+)")


def prompts(n, rng):
    text = open(os.path.join(CORPUS, "tinystories/TinyStories-train_head_cased.txt"), encoding="utf-8").read()
    stories = [s.strip() for s in text.split("<|endoftext|>") if len(s.strip()) > 50]
    gsm = [json.loads(l)["question"] for l in open(os.path.join(CORPUS, "chat/gsm8k_train.jsonl"), encoding="utf-8")]
    rng.shuffle(stories)
    rng.shuffle(gsm)
    # Family v2: a quarter of the requests continue a multi-turn conversation (earlier turns from
    # the training conversations, then a new request), so replies also sit deep in the 1,024-token
    # context as they do in the app.
    from prepare_chat import turns_of
    from prepare_data import read_jsonl
    turns = turns_of([d for d in read_jsonl(os.path.join(WORK, "docs_train.jsonl")) if d.startswith("<|user|>")])
    rng.shuffle(turns)
    out = []
    for i in range(n):
        if i % 4 == 3:
            hist, chars = [], 0
            for _ in range(rng.randint(1, 4)):
                _, u, a = turns[(len(hist) + i * 5) % len(turns)]
                if hist and chars + len(u) + len(a) > 2400:  # ~600 tokens: room for the reply
                    break
                hist += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
                chars += len(u) + len(a)
            last = rng.choice(["Tell me another story.", "Tell me a story.", gsm[(i * 3) % len(gsm)]])
            out.append(("messages", json.dumps(hist + [{"role": "user", "content": last}])))
            continue
        kind = i % 3
        if kind == 0:  # raw continuation of a story's first sentence
            first = re.split(r"(?<=[.!?])\s", stories[i % len(stories)], maxsplit=1)[0]
            out.append(("prompt", first))
        elif kind == 1:  # a story request as a chat turn
            s = stories[(i * 7) % len(stories)]
            m = NAME.search(s)
            req = rng.choice(["Tell me a story.", "Write a short story for a child."] +
                             ([f"Tell me a story about {m.group(1)}."] if m else []))
            out.append(("chat", req))
        else:
            out.append(("chat", gsm[i % len(gsm)]))
    return out


def run_one(cli, idx, kind, text, max_tokens):
    greedy = idx % 2 == 0
    tmp = None
    if kind == "messages":  # the conversation goes through a file (specchat-cli --messages)
        tmp = os.path.join(WORK, f"messages-{idx}.json")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        text = tmp
    cmd = [cli, "generate", f"--{kind}", text, "-n", str(max_tokens), "--json", "--threads", "1",
           "--temp", "0" if greedy else "0.8", "--seed", str(1000 + idx)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    finally:
        if tmp:
            os.remove(tmp)
    if r.returncode != 0:
        if "prompt_too_long" in r.stdout:
            return None  # a long first turn: left out
        raise RuntimeError(f"{cmd}: {r.stderr.strip()} {r.stdout.strip()[:300]}")
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return {"i": idx, "kind": kind, "greedy": greedy, "ids": j["prompt_tokens"] + j["tokens"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1600)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cli", default=os.path.join(REPO_ROOT, "build", "app", "specchat-cli"))
    ap.add_argument("--max-tokens", type=int, default=200)
    a = ap.parse_args()
    ensure_dirs()
    rng = random.Random(4321)
    todo = prompts(a.n, rng)
    path = os.path.join(WORK, "gen.jsonl")
    done = {}
    if os.path.exists(path):
        for l in open(path):
            r = json.loads(l)
            done[r["i"]] = r
    with open(path, "a") as f, ThreadPoolExecutor(a.jobs) as ex:
        futs = [ex.submit(run_one, a.cli, i, k, t, a.max_tokens) for i, (k, t) in enumerate(todo) if i not in done]
        for n, fu in enumerate(futs):
            r = fu.result()
            if r is None:
                continue
            done[r["i"]] = r
            f.write(json.dumps(r) + "\n")
            if n % 100 == 0:
                f.flush()
                print(f"{len(done)}/{a.n}", flush=True)
    seqs = [np.array(done[i]["ids"], dtype=np.uint16) for i in sorted(done)]
    offsets = np.cumsum([0] + [len(s) for s in seqs]).astype(np.int64)
    np.savez(os.path.join(WORK, "gen.npz"), tokens=np.concatenate(seqs), offsets=offsets)
    print(f"wrote {len(seqs)} sequences, {int(offsets[-1])} tokens")


if __name__ == "__main__":
    main()
