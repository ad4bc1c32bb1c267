#!/usr/bin/env bash
# scripts/gpu-stash on a scratch clone of this checkout: out / back restore every file, a second
# `out` is refused, `back` with nothing stashed is refused, and a file that came back (git
# checkout) is never overwritten. Regression (a break-it pass, 2026-12-04): the stash was one
# shared /tmp folder, so two clones (or out, checkout, out) mixed and overwrote files.
# Exit 77 (skipped) when the source is not a git checkout.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! git -C "$SRC" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  echo "SKIPPED: $SRC is not a git checkout"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
git clone -q --local --no-hardlinks "$SRC" "$T/a" 2>/dev/null || git clone -q "$SRC" "$T/a" || fail "clone"
cp "$SRC/scripts/gpu-stash" "$T/a/scripts/gpu-stash"  # the version under test (may be uncommitted)
cd "$T/a" || fail "cd"
git update-index --assume-unchanged scripts/gpu-stash
before=$(git status --porcelain)
scripts/gpu-stash back > /dev/null 2>&1 && fail "back with nothing stashed succeeded"
scripts/gpu-stash out > /dev/null || fail "out"
[ -e tests/data/reference_logits.json ] && fail "out left tests/data/reference_logits.json"
scripts/gpu-stash out > /dev/null 2>&1 && fail "a second out succeeded"
git checkout -q -- tests/data/reference_logits.json || fail "checkout"
echo edited >> tests/data/reference_logits.json
msg=$(scripts/gpu-stash back 2>&1) && fail "back over a file that came back reported success"
# It says what is left and how to finish (a later `out` refuses while the stash holds files).
grep -q "rm -rf" <<<"$msg" || fail "back over a file that came back did not say how to finish: $msg"
grep -q "gpu-stash: restored;" <<<"$msg" && fail "back over a file that came back said 'restored': $msg"
tail -c 7 tests/data/reference_logits.json | grep -q edited || fail "back overwrote an edited file"
git checkout -q -- tests/data/reference_logits.json
rm -rf "$(git rev-parse --absolute-git-dir)/gpu-stash"  # only the conflicting copy was left there
[ "$(git status --porcelain)" = "$before" ] || { git status --short; fail "back did not restore the other files"; }
# A clean cycle.
scripts/gpu-stash out > /dev/null || fail "out (second cycle)"
scripts/gpu-stash back > /dev/null || fail "back (second cycle)"
[ "$(git status --porcelain)" = "$before" ] || { git status --short; fail "files missing or changed after back"; }
echo "gpu-stash: ok"
