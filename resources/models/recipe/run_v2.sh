#!/usr/bin/env bash
# Family v2 (issue 13): the bundled family with a 1,024-token context, fine-tuned from v1 on
# multi-turn chat windows, then everything downstream of the target redone. Resumable: each
# training step resumes from its checkpoint in work/; finished steps are skipped.
#
#   prepare_data.py      v1's documents (same split; the tokenizer is recovered from the GGUF
#                        by recover_tokenizer.py so the vocabulary stays the same)
#   prepare_chat.py      multi-turn conversations, train_v2.bin / heldout_multiturn.bin
#   train.py target2     the target, from v1's GGUF (work/v1/), ctx 1024
#   train.py draft2      the draft, from v1's, distilled from target2
#   export_gguf.py       specchat-target.gguf / specchat-draft.gguf + reference vectors
#   reference_hidden.py  hidden-state references
#   gen_text.py          target-generated replies (specchat-cli; a quarter continue multi-turn chats)
#   train_drafters.py    DFlash block drafter and MTP head, warm-started from v1's
#   export_drafters.py   specchat-dflash.gguf / specchat-mtp.gguf and the reference drafters
#   (block drafter round 2: more generated text, 3,000 more steps with blocks of 4, 8 and 16)
#   evaluate.py          held-out perplexity (logs/heldout_eval.json)
#
# usage: run_v2.sh [CLI]   (CLI: a specchat-cli binary; default build/app/specchat-cli, copied
# first so a rebuild cannot replace it mid-run)
set -euo pipefail
source "$(dirname "$0")/prelude.sh" "$@"
CLI=$RECIPE_CLI
[ -f work/tokenizer.model ] || $PY recover_tokenizer.py --gguf "$( [ -f work/v1/specchat-target.gguf ] && echo work/v1/specchat-target.gguf || echo ../specchat-target.gguf)"
$PY prepare_data.py
$PY prepare_chat.py
$PY train.py target2
$PY train.py draft2
$PY export_gguf.py --family v2
$PY reference_hidden.py
mkdir -p work/bin && cp "$CLI" work/bin/specchat-cli
$PY gen_text.py --n 1000 --jobs 2 --cli work/bin/specchat-cli
rm -f work/feats.f16 work/feats.f16.done   # features of the v2 target
[ -f work/v1/specchat-dflash.gguf ] && DINIT="--init-gguf work/v1/specchat-dflash.gguf" || DINIT=""
[ -f work/v1/specchat-mtp.gguf ] && MINIT="--init-gguf work/v1/specchat-mtp.gguf" || MINIT=""
# The features are computed once (first run), then the two drafters train side by side.
$PY train_drafters.py dflash --threads 2 --steps 800 --lr 1e-3 $DINIT --minutes 0.01 || true
$PY train_drafters.py dflash --threads 1 --steps 800 --lr 1e-3 $DINIT > work/dflash.out 2>&1 &
$PY train_drafters.py mtp --threads 1 --steps 400 --lr 1e-3 $MINIT > work/mtp.out 2>&1 &
wait
$PY export_drafters.py
$PY export_drafters.py --refs
# The block drafter, second round (2026-12-02): twice the target-generated text (gen_text.py
# appends requests 1000-1999; the held-out sequences stay the first 49), 3,000 more steps from
# the first round's export, blocks of 4, 8 and 16 (short chains draft narrow blocks).
[ -f work/dflash-v2-round1.gguf ] || cp ../specchat-dflash.gguf work/dflash-v2-round1.gguf
$PY gen_text.py --n 2000 --jobs 2 --cli work/bin/specchat-cli
$PY train_drafters.py dflash --run dflash3 --threads 1 --steps 3000 --lr 1e-3 --blocks 4,8,16 \
    --init-gguf work/dflash-v2-round1.gguf > work/dflash3.out 2>&1
$PY export_drafters.py --only dflash --dflash-run dflash3
$PY evaluate.py
echo "family v2 done"
