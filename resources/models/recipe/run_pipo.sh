#!/usr/bin/env bash
# PIPO dual-end mode (issue 16; contract docs/design/pipo.md): a fine-tuned copy of the bundled
# target over token pairs, with a compressor, the MTP head and a confidence head, released as one
# unit (resources/models/pipo/). Resumable: each training stage resumes from its checkpoint in
# work/; a finished stage is skipped. Does not retrain the target or the other drafters.
#
#   recover_tokenizer.py / prepare_data.py / prepare_chat.py   work/train_v2.bin and the held-out
#                        arrays (as run_v2.sh; skipped when present)
#   export_pipo.py --init   the untrained unit, work/pipo-init/ (for the engine's loader tests)
#   train_pipo.py stage1    supervised on random PAD splits of train_v2.bin windows (~30 min, 1 thread)
#   train_pipo.py stage2    distilled from the frozen plain target (~30 min, 1 thread)
#   export_pipo.py          resources/models/pipo/ + tests/data/pipo/reference.json
#   eval_pipo.py            logs/pipo_heldout.json; fills the manifest's quality section and
#                           recommended_threshold
#
# usage: run_pipo.sh [RELEASE]   (default specchat-pipo-2026-12-03.1)
set -euo pipefail
cd "$(dirname "$0")"
PY=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1
RELEASE=${1:-specchat-pipo-2026-12-03.1}
[ -f work/tokenizer.model ] || $PY recover_tokenizer.py --gguf ../specchat-target.gguf
[ -f work/train_v2.bin ] && [ -f work/heldout_multiturn.bin ] || { $PY prepare_data.py; $PY prepare_chat.py; }
[ -f work/pipo-init/pipo.json ] || $PY export_pipo.py --init --out work/pipo-init --release specchat-pipo-init
# Step budgets sized to ~30 minutes each on one shared core (measured 1,355 raw tokens/s in
# stage 1, 569 in stage 2, which also runs the plain target); --minutes stops a stage resumably.
$PY train_pipo.py stage1 --threads 1 --steps 1400 --minutes 35
$PY train_pipo.py stage2 --threads 1 --steps 700 --minutes 35
$PY export_pipo.py --ckpt work/pipo2.pt --out ../pipo --release "$RELEASE"
$PY eval_pipo.py --unit ../pipo --update-manifest
$PY export_pipo.py --ref-only ../pipo
echo "PIPO done: ../pipo ($RELEASE)"
