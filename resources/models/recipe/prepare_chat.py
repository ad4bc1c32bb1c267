"""Family v2 data: multi-turn chat windows of up to 1,024 tokens (issue 13, "bundled family v2").

Builds on prepare_data.py's documents (same split, same tokenizer): every single-turn chat
document (a story request with its story, a GSM8K question with its worked answer) becomes a
turn, and turns are joined into conversations of several turns, rendered exactly as the engine
renders a multi-turn chat (engine/chat_template.cpp, "specchat"):

    BOS <|system|>\\n{sys}<|end|>\\n <|user|>\\n{q1}<|end|>\\n<|assistant|>\\n{a1}<|end|>\\n <|user|>...

so the target learns to answer the latest turn with earlier turns in its context. Later turns
sometimes ask for "another" story or problem, as people do. Plain documents (raw stories, book
passages) stay in the stream at a smaller share so nothing the v1 target knew is lost.

Output (work/): train_v2.bin, heldout_multiturn.bin (uint16 ids; held-out conversations are made
from the held-out stories and GSM8K test questions only), and logs/data_v2_stats.json.
"""
import json
import os
import random
import re

import numpy as np

from common import WORK, LOGS, USER_TOK, ASSISTANT_TOK, SYSTEM_TOK, END_TOK, ensure_dirs
from prepare_data import read_jsonl, story_request

CTX_V2 = 1024
TURN = re.compile(re.escape(USER_TOK) + r"\n(.*?)" + re.escape(END_TOK) + r"\n" +
                  re.escape(ASSISTANT_TOK) + r"\n(.*?)" + re.escape(END_TOK) + r"$", re.S)
SYSTEMS = ["You are a helpful assistant.", "You are a friendly storyteller.",
           "You are a patient maths tutor. Show your steps.", "Answer briefly and clearly."]
AGAIN = {"story": ["Tell me another story.", "Another one, please.", "Can you tell me one more story?"],
         "math": ["Here is another problem.", "One more question:", "Now try this one."]}


def turns_of(docs):
    """Single-turn chat documents -> [(kind, user, assistant)]."""
    out = []
    for d in docs:
        m = TURN.match(d)
        if m:
            kind = "math" if "####" in m.group(2) else "story"
            out.append((kind, m.group(1), m.group(2)))
    return out


def render(system, turns):
    s = f"{SYSTEM_TOK}\n{system}{END_TOK}\n" if system else ""
    for u, a in turns:
        s += f"{USER_TOK}\n{u}{END_TOK}\n{ASSISTANT_TOK}\n{a}{END_TOK}\n"
    return s


def conversations(turns, sp, rng, budget=CTX_V2 - 8):
    """Groups turns into conversations of about `budget` tokens (2-8 turns), mostly one kind."""
    rng.shuffle(turns)
    by_kind = {"story": [t for t in turns if t[0] == "story"], "math": [t for t in turns if t[0] == "math"]}
    convs = []
    while by_kind["story"] or by_kind["math"]:
        kinds = [k for k in by_kind if by_kind[k]]
        main = rng.choice(kinds)
        system = rng.choice(SYSTEMS) if rng.random() < 0.3 else None
        n_tok = len(sp.encode(render(system, []))) + 1
        picked = []
        while len(picked) < 8:
            k = main if (rng.random() < 0.8 or len(kinds) == 1) else rng.choice(kinds)
            if not by_kind[k]:
                break
            _, u, a = by_kind[k][-1]
            if picked and rng.random() < 0.35:
                u = rng.choice(AGAIN[k]) + (f" {u}" if k == "math" else "")
            cost = len(sp.encode(render(None, [(u, a)])))
            if picked and n_tok + cost > budget:
                break
            by_kind[k].pop()
            picked.append((u, a))
            n_tok += cost
        convs.append(render(system, picked))
    return convs


def encode(sp, docs, path):
    ids = []
    for d in docs:
        ids.append(1)
        ids.extend(sp.encode(d))
        if not d.rstrip("\n").endswith(END_TOK):
            ids.append(2)
    np.array(ids, dtype=np.uint16).tofile(path)
    return len(ids)


def heldout_turns():
    stories = read_jsonl(os.path.join(WORK, "docs_heldout_stories.jsonl"))
    chats = read_jsonl(os.path.join(WORK, "docs_heldout_chat.jsonl"))
    return ([("story", story_request(s), s) for s in stories[:400]] + turns_of(chats))


def main():
    import sentencepiece as spm
    ensure_dirs()
    sp = spm.SentencePieceProcessor(model_file=os.path.join(WORK, "tokenizer.model"))
    random.seed(2026)
    rng = random.Random(2026)
    train = read_jsonl(os.path.join(WORK, "docs_train.jsonl"))
    chat_docs = [d for d in train if d.startswith(USER_TOK)]
    plain = [d for d in train if not d.startswith(USER_TOK)]
    convs = conversations(turns_of(chat_docs), sp, rng)
    rng.shuffle(plain)
    docs = convs + plain[: len(plain) // 3]   # plain text at a smaller share
    rng.shuffle(docs)
    stats = {"train_v2": {"conversations": len(convs), "plain_docs": len(docs) - len(convs),
                          "tokens": encode(sp, docs, os.path.join(WORK, "train_v2.bin"))}}
    held = conversations(heldout_turns(), sp, random.Random(7))
    stats["heldout_multiturn"] = {"conversations": len(held),
                                  "tokens": encode(sp, held, os.path.join(WORK, "heldout_multiturn.bin"))}
    json.dump(stats, open(os.path.join(LOGS, "data_v2_stats.json"), "w"), indent=1)
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
