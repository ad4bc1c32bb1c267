#!/usr/bin/env bash
# The whole recipe, resumable: data + tokenizer, target, distilled draft, GGUF export.
# Run from anywhere; uses Debian's python3 (python3-torch). Logs: logs/*.log.
set -euo pipefail
cd "$(dirname "$0")"
PY=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1   # one thread pool: PyTorch's (TRAINING-NOTES, "thread pools fight")
$PY prepare_data.py
$PY train.py target
$PY train.py draft
$PY export_gguf.py
$PY reference_hidden.py   # hidden-state references, read back from the GGUF files
$PY evaluate.py
