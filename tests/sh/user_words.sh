#!/bin/sh
# Reports and --help speak the user's words, never the file format's: no section name (taken from
# include/oomtrace_format.h, so a new section is covered too) and no "section" in the text, markdown and HTML
# reports of snapshots that have every section and of ones that lack some (an exit snapshot, a flush, a ring
# with dropped chunks), nor in oomtrace-read --help.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "user_words: FAIL: $*"; exit 1; }
READER=${READER:-build/oomtrace-read}
SNAPGEN=${SNAPGEN:-build/snapgen}
names=$(grep -oE 'OT_SEC_[A-Z_]+' include/oomtrace_format.h | sed 's/^OT_SEC_//' | sort -u | tr '\n' '|')
[ -n "$names" ] || fail "no section names in include/oomtrace_format.h"
pattern="\\b(${names%|})\\b|[Ss]ection\\b"
work=$(mktemp -d /tmp/oomtrace-words.XXXXXX)
trap 'rm -rf "$work"' EXIT
check() { # check WHAT FILE: FILE (HTML tags and <style>/<script> blocks removed) has no internal name
    python3 - "$2" <<'PY' >"$2.words" || fail "$1: cannot strip markup"
import re, sys
t = open(sys.argv[1], encoding="utf-8", errors="replace").read()
t = re.sub(r"(?s)<(style|script)\b.*?</\1>", "", t)
print(re.sub(r"<[^>]*>", " ", t))
PY
    hit=$(grep -nE "$pattern" "$2.words" | head -3)
    [ -z "$hit" ] || fail "$1 shows the format's names: $hit"
}
"$READER" --help >"$work/help.txt" || fail "--help"
check "--help" "$work/help.txt"
n=0
for opts in "--trigger oom" "--trigger exit --markers-every 0" "--trigger flush --incomplete" \
    "--trigger oom --drop-chunks 1 --chunk 1000" "--trigger exit --seq-order --devices 2"; do
    n=$((n + 1))
    # shellcheck disable=SC2086 # opts holds separate words
    "$SNAPGEN" $opts --events 3000 -o "$work/s$n.oomt" || fail "snapgen $opts"
    for fmt in text markdown html; do
        "$READER" --format "$fmt" "$work/s$n.oomt" >"$work/s$n.$fmt" 2>"$work/s$n.$fmt.err" || fail "$fmt of snapgen $opts"
        cat "$work/s$n.$fmt.err" >>"$work/s$n.$fmt"
        check "the $fmt report of snapgen $opts" "$work/s$n.$fmt"
    done
done
echo "user_words: ok ($n snapshots, text, markdown and html, and --help)"
