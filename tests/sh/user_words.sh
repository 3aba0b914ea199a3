#!/bin/sh
# Reports and --help speak the user's words, never the file format's: no section name (taken from
# include/oomtrace_format.h, so a new section is covered too) and no "section" in the text, markdown and HTML
# reports of snapshots that have every section and of ones that lack some (an exit snapshot, a flush, a ring
# with dropped chunks), nor in oomtrace-read --help; no JSON value that is a section name ("source": "PEAK");
# and the public docs (docs/JSON.md, docs/FORMATS.md, the man pages) describe each number in the user's words,
# not by the section it is read from (docs/FORMAT.md alone names them).
set -u
cd "$(dirname "$0")/../.."
fail() { echo "user_words: FAIL: $*"; exit 1; }
READER=${READER:-build/oomtrace-read}
SNAPGEN=${SNAPGEN:-build/snapgen}
# The names from OT_SECTION_LIST's entries, X(id, NAME, "NAME", doc) (the enum is made from them).
names=$(sed -n '/^#define OT_SECTION_LIST/,/^enum ot_section/s/^ *X([0-9][0-9]*, *\([A-Z_][A-Z_]*\),.*/\1/p' include/oomtrace_format.h | sort -u | tr '\n' '|')
[ "$(echo "$names" | tr -cd '|' | wc -c)" -ge 20 ] || fail "the section names were not found in include/oomtrace_format.h: $names"
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
sh tools/oomtrace --help >"$work/launcher-help.txt" 2>&1 || fail "oomtrace --help"
check "oomtrace --help" "$work/launcher-help.txt"
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
    "$READER" --format json "$work/s$n.oomt" >"$work/s$n.json" 2>/dev/null || fail "json of snapgen $opts"
    python3 - "$work/s$n.json" "$names" <<'PY' || fail "the json report of snapgen $opts has a section name as a value"
import json, sys
names = set(sys.argv[2].strip("|").split("|"))
def walk(v, path):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(x, path + "." + k)
    elif isinstance(v, list):
        for x in v:
            walk(x, path + "[]")
    elif isinstance(v, str) and v in names:
        sys.exit(print("user_words: %s is %r" % (path, v)) or 1)
walk(json.load(open(sys.argv[1])), "")
PY
done
for d in docs/JSON.md docs/FORMATS.md docs/man/oomtrace.1 docs/man/oomtrace-read.1; do
    hit=$(grep -nE "\\b(${names%|})\\b" "$d" | head -3)
    [ -z "$hit" ] || fail "$d describes numbers by the format's section names: $hit"
done
# The docs cite nothing outside the repository (a fresh clone has no ../shared/notes; walk 6, #25).
hit=$(grep -rn "shared/notes" README.md docs | head -3)
[ -z "$hit" ] || fail "the docs cite notes outside the repository: $hit"
echo "user_words: ok ($n snapshots, text, markdown, html and json, --help and the public docs)"
