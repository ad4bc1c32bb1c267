#!/usr/bin/env bash
# specchat-gpu-bench's drafter table (section spec, --backend cpu: no device needed) on bad input:
# each case must give its exit code and message, never an empty table that "passes".
# usage: test_spec_inputs.sh SPECCHAT_GPU_BENCH (run from the repository root)
set -u
B=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
# expect <rc> <text in the output> <args...>
expect() {
  local want_rc=$1 want_text=$2
  shift 2
  local out rc
  out=$("$B" --only spec --backend cpu "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qF -- "$want_text" <<<"$out"; then
    echo "FAIL: $* -> exit $rc (want $want_rc), output lacks '$want_text':"
    echo "$out" | tail -5
    fail=1
  else
    echo "ok: $* -> exit $rc, '$want_text'"
  fi
}
# No prompt leaves room for -n tokens: an error, not an empty table that passes.
expect 3 "no prompt of" -n 4096 --max-prompts 2
# Prompts too long are left out and counted.
expect 0 "1 of the 2 prompts left out" -n 900 --max-prompts 2
# An id that overflows, a trailing sign, a missing kind word: named with file and line.
printf 'text 1 99999999999999999999\n' > "$T/overflow.txt"
expect 3 "overflow.txt:1: '99999999999999999999' is not a token id" --prompts "$T/overflow.txt"
printf 'chat 1 2 -\n' > "$T/sign.txt"
expect 3 "sign.txt:1: '-' is not a token id" --prompts "$T/sign.txt"
printf '# ids\n1 2 3 4\n' > "$T/nokind.txt"
expect 3 "nokind.txt:2: a line starts with text or chat" --prompts "$T/nokind.txt"
# A --json path that cannot be written fails before the run.
expect 2 "cannot write --json" --json "$T/missing/r.json"
exit $fail
