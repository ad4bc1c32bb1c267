"""Step 4: held-out loss and perplexity of the exported GGUF files (exactly what the engine
loads), on non-overlapping windows of the held-out stories (TinyStories valid), GSM8K test chats
(256-token windows, comparable across families) and, for family v2, held-out multi-turn
conversations (prepare_chat.py) at the model's whole context.

usage: evaluate.py [--models-dir resources/models] [--out logs/heldout_eval.json] [--v1]
  --v1: the files are family v1 (ctx 256): multi-turn windows are cut to 256 tokens.
"""
import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from common import WORK, LOGS, MODELS
from model import TARGET, DRAFT, TARGET_V1, DRAFT_V1
from reference_hidden import load_gguf_model

WINDOWS = 48  # 48 x 256 = 12,288 tokens per set


@torch.no_grad()
def heldout_loss(model, data, ctx=256, windows=WINDOWS):
    n = min(windows, (len(data) - 1) // ctx)
    total, count = 0.0, 0
    for i in range(n):
        x = torch.from_numpy(data[i * ctx:(i + 1) * ctx].astype(np.int64))[None]
        y = torch.from_numpy(data[i * ctx + 1:(i + 1) * ctx + 1].astype(np.int64))[None]
        total += F.cross_entropy(model(x)[0], y[0], reduction="sum").item()
        count += ctx
    return total / count, count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=MODELS)
    ap.add_argument("--out", default=os.path.join(LOGS, "heldout_eval.json"))
    ap.add_argument("--v1", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(2)
    configs = {"target": TARGET_V1 if a.v1 else TARGET, "draft": DRAFT_V1 if a.v1 else DRAFT}
    out = {}
    for role, cfg in configs.items():
        m, meta = load_gguf_model(os.path.join(a.models_dir, f"specchat-{role}.gguf"), cfg)
        out[role] = {"step": meta.get("specchat.training_steps"), "params": m.n_params(),
                     "params_non_embedding": m.n_params(True), "n_ctx": cfg.n_ctx}
        for k in ("stories", "chat", "multiturn"):
            path = os.path.join(WORK, f"heldout_{k}.bin")
            data = np.memmap(path, dtype=np.uint16, mode="r")
            # Multi-turn: whole-context windows (12 of them: 12,288 tokens at ctx 1024).
            ctx = cfg.n_ctx if k == "multiturn" else 256
            loss, n = heldout_loss(m, data, ctx, WINDOWS * 256 // ctx)
            out[role][k if k != "multiturn" else f"multiturn_ctx{ctx}"] = {
                "loss": round(loss, 4), "ppl": round(math.exp(loss), 2), "tokens": n}
        print(role, json.dumps(out[role]))
    json.dump(out, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
