"""Step 4: held-out loss and perplexity of the exported models (F16-rounded weights, exactly
what the engine loads), on non-overlapping 256-token windows of the held-out stories
(TinyStories valid) and GSM8K test chats. Writes logs/heldout_eval.json.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from common import WORK, LOGS
from export_gguf import load_model, round_to_export_precision

WINDOWS = 48  # 48 x 256 = 12,288 tokens per set


@torch.no_grad()
def heldout_loss(model, data, ctx=256):
    n = min(WINDOWS, (len(data) - 1) // ctx)
    total, count = 0.0, 0
    for i in range(n):
        x = torch.from_numpy(data[i * ctx:(i + 1) * ctx].astype(np.int64))[None]
        y = torch.from_numpy(data[i * ctx + 1:(i + 1) * ctx + 1].astype(np.int64))[None]
        total += F.cross_entropy(model(x)[0], y[0], reduction="sum").item()
        count += ctx
    return total / count, count


def main():
    torch.set_num_threads(2)
    out = {}
    for role in ("target", "draft"):
        m, step = load_model(role)
        round_to_export_precision(m)
        out[role] = {"step": step, "params": m.n_params(), "params_non_embedding": m.n_params(True)}
        for k in ("stories", "chat"):
            data = np.memmap(os.path.join(WORK, f"heldout_{k}.bin"), dtype=np.uint16, mode="r")
            loss, n = heldout_loss(m, data)
            out[role][k] = {"loss": round(loss, 4), "ppl": round(math.exp(loss), 2), "tokens": n}
        print(role, json.dumps(out[role]))
    json.dump(out, open(os.path.join(LOGS, "heldout_eval.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
