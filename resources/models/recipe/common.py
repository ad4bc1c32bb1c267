"""Shared constants and helpers for the SpecChat model recipe.

The recipe trains the bundled family (tokenizer, target, draft) on a 2-core CPU from
../shared/corpus. Every path here is relative to the repository root, which the scripts
find from their own location.
"""
import os
import re

RECIPE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(RECIPE_DIR, "..", "..", ".."))
CORPUS = os.environ.get("SPECCHAT_CORPUS", os.path.join(REPO_ROOT, "..", "shared", "corpus"))
WORK = os.path.join(RECIPE_DIR, "work")          # checkpoints and token arrays (git-ignored)
LOGS = os.path.join(RECIPE_DIR, "logs")          # training logs (committed)
MODELS = os.path.join(REPO_ROOT, "resources", "models")
TESTDATA = os.path.join(REPO_ROOT, "tests", "data")

# Chat control tokens: user-defined pieces in the SentencePiece model so the encoder matches
# them atomically inside text. Template name "specchat" (see engine/chat_template.cpp).
USER_TOK, ASSISTANT_TOK, SYSTEM_TOK, END_TOK = "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"
CONTROL_SYMBOLS = [USER_TOK, ASSISTANT_TOK, SYSTEM_TOK, END_TOK]
CHAT_TEMPLATE = "specchat"

VOCAB_SIZE = 4096
CTX = 256


def chat_text(user, assistant=None, system=None):
    """Renders one turn in the bundled template: the exact string the engine renders."""
    s = ""
    if system:
        s += f"{SYSTEM_TOK}\n{system}{END_TOK}\n"
    s += f"{USER_TOK}\n{user}{END_TOK}\n{ASSISTANT_TOK}\n"
    if assistant is not None:
        s += f"{assistant}{END_TOK}"
    return s


CALC = re.compile(r"<<[^>]*>>")


def gsm8k_answer(ans):
    """Removes GSM8K's <<calc>> annotations; keeps the worked steps and the '#### N' line."""
    return CALC.sub("", ans).strip()


def ensure_dirs():
    for d in (WORK, LOGS, TESTDATA):
        os.makedirs(d, exist_ok=True)
