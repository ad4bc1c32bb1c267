# Sourced by the recipe's run_*.sh scripts before they cd into this folder, with the script's
# arguments ("$@"): makes a CLI path (the first argument) and SPECCHAT_CORPUS absolute, so paths
# given relative to where the script was started from still work after the cd; cds into the
# recipe folder; and stops with a clear message when the training corpus is missing.
# Sets RECIPE_CLI (the CLI, default build/app/specchat-cli), PY and OPENBLAS_NUM_THREADS.
RECIPE_CLI=$(realpath -m "${1:-$(dirname "${BASH_SOURCE[0]}")/../../../build/app/specchat-cli}")
[ -z "${SPECCHAT_CORPUS:-}" ] || export SPECCHAT_CORPUS="$(realpath -m "$SPECCHAT_CORPUS")"
cd "$(dirname "${BASH_SOURCE[0]}")"
if [ ! -d "${SPECCHAT_CORPUS:-../../../../shared/corpus}" ]; then
  echo "$(basename "$0"): the training corpus is not at $(realpath -m "${SPECCHAT_CORPUS:-../../../../shared/corpus}")" \
       "(the repository's ../shared/corpus); set SPECCHAT_CORPUS to its folder" >&2
  exit 1
fi
PY=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1
