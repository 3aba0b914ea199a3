#!/bin/sh
# oomtrace.mark's edge cases as the README gives them (walk 7, #4): mark(None) marks "None" (it returned False
# and marked nothing), a label over 255 bytes is cut at a UTF-8 character's boundary (it was cut inside one,
# and the report's label ended in U+FFFD), a label ends at its first NUL.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "mark_labels: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-marks.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp tests/py/drv.py "$work/"
cat >"$work/marks.py" <<'PY'
import oomtrace
from drv import try_alloc, MiB
assert try_alloc(MiB)[0] == 0
print(oomtrace.mark(None), oomtrace.mark("\u00e9" * 300), oomtrace.mark("a\0b"), oomtrace.mark(b"x" * 300))
assert oomtrace.dump("marks")
PY
LD_LIBRARY_PATH="$PWD/build/fake" PYTHONPATH="$PWD/python" OOMTRACE_DIR="$work" \
    LD_PRELOAD="$PWD/build/liboomtrace.so" /usr/bin/python3 "$work/marks.py" >"$work/out" 2>"$work/err" ||
    fail "marks.py: $(cat "$work/out" "$work/err")"
[ "$(cat "$work/out")" = "True True True True" ] || fail "mark's results: $(cat "$work/out")"
set -- "$work"/oomtrace-*-dump.oomt
build/oomtrace-read --format json "$1" | /usr/bin/python3 -c '
import json, sys
labels = [m["label"] for m in json.load(sys.stdin)["markers"]]
want = ["None", "\u00e9" * 127, "a", "x" * 255]
sys.exit(0 if labels == want else "labels %r, want %r" % (labels, want))' || fail "the markers' labels"
echo "mark_labels: ok"
