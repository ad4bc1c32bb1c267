"""Step 2: train the target on data, or distil the draft from the target. Resumable.

usage: train.py target|draft|target2|draft2|draft3 [--minutes M] [--threads N]

target/draft train family v1 from scratch (ctx 256, train.bin). target2/draft2 are family v2:
they start from the bundled v1 GGUF weights and fine-tune at a 1,024-token context on the
multi-turn windows of prepare_chat.py (train_v2.bin); draft2 distils from target2. draft3
(family v2.1, run_draft3.sh) trains the v2 draft further on the bundled v2 target's generated
replies (gen_text.py), cross-entropy on the target's tokens.

Checkpoints go to work/<role>.pt every few minutes (model, optimiser, step, RNG state); a
restart continues from the last one. The learning-rate schedule is a cosine sized to the
role's step budget, so an interrupted run resumes on the same curve. Logs: logs/<role>.log.
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from common import WORK, LOGS, ensure_dirs
from model import Llama, TARGET, DRAFT, TARGET_V1, DRAFT_V1
from common import MODELS

STEPS_V2 = int(os.environ.get("SPECCHAT_STEPS_V2", "400"))
DRAFT_STEPS_V2 = int(os.environ.get("SPECCHAT_DRAFT_STEPS_V2", "200"))
DRAFT_STEPS_V3 = int(os.environ.get("SPECCHAT_DRAFT_STEPS_V3", "2400"))
V2_COMMIT = "e09c243"  # the last commit whose bundled draft is the v2 draft (draft2.pt)
PLANS = {
    # tokens per step = batch * ctx; steps sized to the CPU budget in TRAINING-NOTES
    "target": dict(batch=8, ctx=256, steps=1000, lr=1.5e-3, warmup=50, wd=0.1),
    "draft": dict(batch=8, ctx=256, steps=600, lr=3e-3, warmup=40, wd=0.05, alpha=0.8),
    # v2: fine-tunes from the v1 GGUF files at ctx 1024 (2 x 1024 tokens per step)
    "target2": dict(batch=2, ctx=1024, steps=STEPS_V2, lr=6e-4, warmup=30, wd=0.1,
                    init="specchat-target.gguf", data="train_v2.bin"),
    "draft2": dict(batch=2, ctx=1024, steps=DRAFT_STEPS_V2, lr=1.5e-3, warmup=20, wd=0.05, alpha=0.8,
                   init="specchat-draft.gguf", data="train_v2.bin"),
    # v2.1 (run_draft3.sh): the v2 draft trained further on target-generated text only
    # (gen_text.py: 6,000 requests, half greedy, half sampled at T 0.8), cross-entropy on the
    # target's own tokens: sequence-level distillation (Kim & Rush 2016) with no teacher forward
    # in the loop. Token-level KL with the target's forward ran at 390 tokens/s on one core; this
    # runs several times faster, and the data is what the draft must predict at run time. The v2
    # draft had only 600 + 200 steps (1.6M tokens); TRAINING-NOTES: more CPU time pays.
    # run_draft3.sh runs it to 2,400 steps, then resumes it on a cosine sized to 4,800.
    "draft3": dict(batch=4, ctx=512, steps=DRAFT_STEPS_V3, lr=1e-3, warmup=20, wd=0.05,
                   init_commit=V2_COMMIT, data="gen.bin"),
}
# The shape of the GGUF file each role starts from (v1 files for target2/draft2, the v2 draft for draft3).
INIT_CONFIG = {"target2": TARGET_V1, "draft2": DRAFT_V1, "draft3": DRAFT}


def log(role, msg):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    with open(os.path.join(LOGS, f"{role}.log"), "a") as f:
        f.write(line + "\n")


def lr_at(plan, step):
    if step < plan["warmup"]:
        return plan["lr"] * (step + 1) / plan["warmup"]
    t = (step - plan["warmup"]) / max(1, plan["steps"] - plan["warmup"])
    return plan["lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def batches(data, batch, ctx, gen):
    while True:
        ix = torch.randint(len(data) - ctx - 1, (batch,), generator=gen)
        x = torch.stack([torch.from_numpy(data[i:i + ctx].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + ctx].astype(np.int64)) for i in ix])
        yield x, y


@torch.no_grad()
def evaluate(model, data, ctx=256, n=24):
    model.eval()
    gen = torch.Generator().manual_seed(7)
    losses = []
    it = batches(data, 8, ctx, gen)
    for _ in range(n // 8):
        x, y = next(it)
        losses.append(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item())
    model.train()
    return sum(losses) / len(losses)


V1_COMMIT = "ab7a8bc"  # the commit that bundled family v1 (ctx 256)


def v1_file(name):
    """work/v1/<name>: the v1 GGUF that family v2 starts from. Copied from resources/models while
    that still holds v1; afterwards recovered from git history."""
    path = os.path.join(WORK, "v1", name)
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        from reference_hidden import read_gguf_meta
        bundled = os.path.join(MODELS, name)
        if read_gguf_meta(bundled).get("llama.context_length") == 256:
            import shutil
            shutil.copyfile(bundled, path)
        else:
            import subprocess
            blob = subprocess.run(["git", "-C", MODELS, "show", f"{V1_COMMIT}:resources/models/{name}"],
                                  check=True, capture_output=True).stdout
            open(path, "wb").write(blob)
    return path


def v2_file(name):
    """work/v2/<name>: the bundled v2 file as of V2_COMMIT (from git history), which draft3 starts from."""
    path = os.path.join(WORK, "v2", name)
    if not os.path.exists(path):
        import subprocess
        os.makedirs(os.path.dirname(path), exist_ok=True)
        blob = subprocess.run(["git", "-C", MODELS, "show", f"{V2_COMMIT}:resources/models/{name}"],
                              check=True, capture_output=True).stdout
        open(path + ".tmp", "wb").write(blob)
        os.replace(path + ".tmp", path)
    return path


def gen_bin():
    """work/gen.bin: the token ids of gen_text.py's requests and replies (work/gen.npz), concatenated."""
    path, src = os.path.join(WORK, "gen.bin"), os.path.join(WORK, "gen.npz")
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(src):  # gen.npz grew
        z = np.load(src)
        z["tokens"].astype(np.uint16).tofile(path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


def load_target(role="target"):
    t = Llama(TARGET if role == "target2" else TARGET_V1)
    t.load_state_dict(torch.load(os.path.join(WORK, f"{role}.pt"))["model"])
    t.eval()
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=list(PLANS))
    ap.add_argument("--minutes", type=float, default=1e9, help="stop (resumably) after this long")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ensure_dirs()
    plan = PLANS[a.role]
    model = Llama(TARGET if a.role.startswith("target") else DRAFT)
    if a.role in ("target", "draft"):
        model = Llama(TARGET_V1 if a.role == "target" else DRAFT_V1)
    opt = torch.optim.AdamW(model.parameters(), lr=plan["lr"], betas=(0.9, 0.95),
                            weight_decay=plan["wd"])
    ckpt_path = os.path.join(WORK, f"{a.role}.pt")
    step, gen = 0, torch.Generator().manual_seed(42 if a.role == "target" else 43)
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        if "opt" in ck:
            opt.load_state_dict(ck["opt"])
        step = ck["step"]
        gen.set_state(ck["gen"])
        log(a.role, f"resumed at step {step}")
    elif "init" in plan:
        from reference_hidden import load_gguf_model
        v1, _ = load_gguf_model(v1_file(plan["init"]), INIT_CONFIG[a.role])
        model.load_state_dict(v1.state_dict())  # RoPE tables are not parameters: ctx grows freely
        log(a.role, f"initialised from {plan['init']} (v1, ctx {INIT_CONFIG[a.role].n_ctx})")
    elif "init_commit" in plan:
        from reference_hidden import load_gguf_model
        v2, _ = load_gguf_model(v2_file("specchat-draft.gguf"), INIT_CONFIG[a.role])
        model.load_state_dict(v2.state_dict())
        log(a.role, f"initialised from specchat-draft.gguf as of {plan['init_commit']}")
    if step >= plan["steps"]:
        log(a.role, "already done")
        return
    teacher = {"draft": lambda: load_target("target"), "draft2": lambda: load_target("target2")}.get(
        a.role, lambda: None)()
    names = plan.get("data", "train.bin")
    names = names if isinstance(names, list) else [names]
    sources = [np.memmap(gen_bin() if n == "gen.bin" else os.path.join(WORK, n), dtype=np.uint16, mode="r")
               for n in names]
    held = {k: np.memmap(os.path.join(WORK, f"heldout_{k}.bin"), dtype=np.uint16, mode="r")
            for k in ("stories", "chat")}
    log(a.role, f"params {model.n_params()} (non-embedding {model.n_params(True)}), "
        f"train tokens {' + '.join(str(len(d)) for d in sources)}, plan {json.dumps(plan)}")
    its = [batches(d, plan["batch"], plan["ctx"], gen) for d in sources]
    t0, last_save, tokens = time.time(), time.time(), 0

    def save():
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "gen": gen.get_state(), "config": model.c.to_dict()}, ckpt_path + ".tmp")
        os.replace(ckpt_path + ".tmp", ckpt_path)

    while step < plan["steps"]:
        for g in opt.param_groups:
            g["lr"] = lr_at(plan, step)
        x, y = next(its[step % len(its)])  # sources take turns, step by step
        logits = model(x)
        ce = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        if teacher is not None:
            with torch.no_grad():
                tp = F.softmax(teacher(x), -1)
            kl = F.kl_div(F.log_softmax(logits, -1), tp, reduction="batchmean") / x.shape[1]
            loss = plan["alpha"] * kl + (1 - plan["alpha"]) * ce
        else:
            loss = ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.numel()
        if step % 20 == 0:
            el = time.time() - t0
            log(a.role, f"step {step}/{plan['steps']} loss {loss.item():.4f} ce {ce.item():.4f} "
                f"lr {lr_at(plan, step):.2e} {tokens / el:.0f} tok/s")
        if time.time() - last_save > 180 or step == plan["steps"]:
            save()
            last_save = time.time()
        if time.time() - t0 > a.minutes * 60:
            save()
            log(a.role, f"stopping at step {step} (time budget)")
            return
    ev = {k: evaluate(model, d) for k, d in held.items()}
    if plan["ctx"] > 256:  # v2: whole multi-turn conversations at the full context
        mt = np.memmap(os.path.join(WORK, "heldout_multiturn.bin"), dtype=np.uint16, mode="r")
        ev["multiturn_1024"] = evaluate(model, mt, ctx=plan["ctx"], n=24)
    log(a.role, "heldout " + json.dumps({k: {"loss": round(v, 4), "ppl": round(math.exp(v), 2)}
                                         for k, v in ev.items()}))
    json.dump(ev, open(os.path.join(LOGS, f"{a.role}_heldout.json"), "w"))
    save()


if __name__ == "__main__":
    main()
