#!/usr/bin/env bash
# The .deb as a user gets it (issue 12, packaging): CPack builds it from this build tree, it is
# unpacked into a scratch root (dpkg -x, no root needed), and the *installed* specchat-cli
# generates with the *installed* models from a folder outside the source tree, with
# $SPECCHAT_MODELS unset. Also checks the package's declared dependencies, the menu entry and
# its icon, and that `bench` finds its prompt suites in the installed tree.
# usage: test_deb.sh BUILD_DIR GUI(ON|OFF)
set -euo pipefail
build=$1
gui=${2:-ON}
command -v cpack >/dev/null || { echo "SKIP: cpack not found"; exit 77; }
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb not found"; exit 77; }
command -v dpkg-shlibdeps >/dev/null || { echo "SKIP: dpkg-shlibdeps not found (apt-get install dpkg-dev)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(ls "$tmp"/pkg/specchat_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { cat "$tmp/cpack.log"; fail "no specchat_*.deb in $tmp/pkg"; }
echo "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# Declared dependencies (dpkg-shlibdeps): the libraries the binaries link.
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libc6 libstdc++6 libsentencepiece0 libsqlite3-0; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib"
done
if [ "$gui" = ON ]; then
  grep -q "libqt6widgets6" <<<"$depends" || fail "Depends lacks libqt6widgets6"
fi

root=$tmp/root
dpkg -x "$deb" "$root"
for f in usr/bin/specchat-cli usr/bin/specchat-quantize \
         usr/share/specchat/models/specchat-target.gguf usr/share/specchat/models/specchat-draft.gguf \
         usr/share/specchat/models/specchat-dflash.gguf usr/share/specchat/models/specchat-mtp.gguf \
         usr/share/specchat/models/specchat-draft.calibration.json \
         usr/share/specchat/bench/heldout_prompts.json usr/share/specchat/bench/qualitative.json \
         usr/share/specchat/bench/throughput.json; do
  [ -e "$root/$f" ] || fail "the package lacks /$f"
done
if [ "$gui" = ON ]; then
  [ -x "$root/usr/bin/specchat" ] || fail "the package lacks /usr/bin/specchat"
  desktop=$root/usr/share/applications/specchat.desktop
  [ -f "$desktop" ] || fail "no menu entry"
  grep -q '^Exec=specchat$' "$desktop" || fail "the menu entry does not start specchat"
  grep -q '^Icon=specchat$' "$desktop" || fail "the menu entry names no icon"
  [ -f "$root/usr/share/icons/hicolor/scalable/apps/specchat.svg" ] || fail "no icon"
  if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$desktop"; fi
fi

# The installed CLI, run from a folder with no source tree and no $SPECCHAT_MODELS.
cd "$tmp"
out=$(env -u SPECCHAT_MODELS "$root/usr/bin/specchat-cli" generate -p "Once upon a time" -n 12 --json 2>"$tmp/err") \
  || { cat "$tmp/err"; fail "the installed specchat-cli generate failed"; }
python3 - "$root" "$out" <<'PY'
import json, sys
root, out = sys.argv[1], sys.argv[2]
j = json.loads(out.strip().splitlines()[-1])
want = root + "/usr/share/specchat/models/"
assert j["target_path"].startswith(want), f"target from {j['target_path']}, not the installed {want}"
assert (j["draft_choice"]["path"] or "").startswith(want), f"draft from {j['draft_choice']['path']}"
assert j["n_generated"] == 12, j["n_generated"]
print("installed generate:", j["n_generated"], "tokens with", j["target_path"])
PY
# bench finds the installed held-out prompts (one prompt, a few tokens).
env -u SPECCHAT_MODELS "$root/usr/bin/specchat-cli" bench --max-prompts 1 -n 4 >"$tmp/bench.log" 2>&1 \
  || { cat "$tmp/bench.log"; fail "the installed specchat-cli bench failed"; }
echo "installed bench: ok"
echo "PASS"
