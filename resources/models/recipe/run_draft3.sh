#!/usr/bin/env bash
# Family v2.1 (2026-12-05): the v2 draft trained further on the bundled v2 target's own
# replies. The v2 draft had 600 steps of v1 distillation and 200 of v2 (1.6M tokens in all),
# its loss still falling; more CPU time pays (TRAINING-NOTES). The target, the block drafter,
# the MTP head and PIPO are unchanged (the feature drafters bind to the target, not the draft).
#
#   prepare_data.py / prepare_chat.py   the data split and multi-turn windows, as run_v2.sh
#   gen_text.py --n 6000                target-generated requests and replies (specchat-cli)
#   train.py draft3                     from the v2 draft (git, V2_COMMIT), cross-entropy on the
#                                       target's generated tokens (sequence-level distillation)
#   export_gguf.py --draft-only draft3  specchat-draft.gguf and the draft's reference logits
#   reference_hidden.py                 the hidden-state references (the draft's change)
#   specchat-cli calibrate              the pair's acceptance (its timing tables dropped)
#
# usage: run_draft3.sh [CLI] [MINUTES]   (MINUTES: stop train.py after this long, resumably; run
# again to continue.)
set -euo pipefail
source "$(dirname "$0")/prelude.sh" "$@"
CLI=$RECIPE_CLI
MINUTES=${2:-1000000}
[ -f work/tokenizer.model ] || $PY recover_tokenizer.py --gguf ../specchat-target.gguf
$PY prepare_data.py
$PY prepare_chat.py
mkdir -p work/bin && cp "$CLI" work/bin/specchat-cli
[ -f work/gen.npz ] && [ "$($PY -c 'import numpy as n; print(len(n.load("work/gen.npz")["offsets"]) - 1)')" -ge 5900 ] \
  || $PY gen_text.py --n 6000 --jobs 2 --cli work/bin/specchat-cli
# Two rounds as they ran: 2,400 steps on a cosine sized to 2,400 (held-out a[0] 0.855), then the
# same run resumed on a cosine sized to 4,800 (a warm restart: lr 5.5e-4 at step 2,400, down to
# 1e-4 at 4,800; a[0] 0.861).
step() { $PY -c 'import torch, os; p="work/draft3.pt"; print(torch.load(p)["step"] if os.path.exists(p) else 0)'; }
[ "$(step)" -ge 2400 ] || SPECCHAT_DRAFT_STEPS_V3=2400 $PY train.py draft3 --threads 1 --minutes "$MINUTES"
[ "$(step)" -lt 2400 ] || SPECCHAT_DRAFT_STEPS_V3=4800 $PY train.py draft3 --threads 1 --minutes "$MINUTES"
if [ "$(step)" -ge 4800 ]; then
  $PY export_gguf.py --draft-only draft3
  $PY reference_hidden.py
  "$CLI" calibrate --threads 2 --out ../specchat-draft.calibration.json
  # The bundled calibration keeps acceptance only: timings hold on the machine that measured them.
  $PY -c 'import json; p="../specchat-draft.calibration.json"; c=json.load(open(p)); [c.pop(k, None) for k in ("timings", "timings_by_setup", "auto_choice")]; open(p, "w").write(json.dumps(c, indent=2) + "\n")'
  echo "draft v2.1 done"
fi
