#!/bin/sh
# "What held the memory" names each call site once across its two moments (walk 8, #32): oldpeak.py allocates
# through one helper; its weights (kept) and a workspace (freed before the failure) share it at the peak, and
# the weights alone are live at the failure. The weights are one row, "oldpeak.py:9 in <module>", with their
# bytes at the failure and at the peak, not the helper's line at the failure beside the caller's at the peak.
# Its "export" after the steps is a phase of another kind, not a step given a larger input, and its peak (the
# workspace) came long before the failure, which the peak's statements say. With native stacks only, the rows
# are named by the sites' headlines (walk 11, #8).
set -u
cd "$(dirname "$0")/../.."
NAME=held_labels
. tests/sh/lib/drv_programs.sh
cat >"$T/oldpeak.py" <<'PY'
from drv import MiB, free, mark, try_alloc


def alloc(mib):
    rc, a = try_alloc(mib * MiB)
    return a if rc == 0 else None


weights = alloc(300)
mark(b"warmup")
workspace = alloc(650)
free(workspace)
for step in range(20):
    mark(b"step %d" % step)
    free(alloc(200))
mark(b"export")
assert alloc(800) is None
PY
mkdir "$T/op"
env LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1G FAKECUDA_OTHER_USED=0 OOMTRACE_DIR="$T/op" OOMTRACE_QUIET=1 \
    LD_PRELOAD="$LIB" python3 "$T/oldpeak.py" >"$T/programs.log" 2>&1
"$READER" "$T"/op/*.oomt >"$T/r.txt" 2>&1 || { echo "held_labels: FAIL: exit $? reading the snapshot"; cat "$T/programs.log"; exit 1; }
sed -n '/^What held the memory/,/^$/p' "$T/r.txt" >"$T/held.txt"
grep -Eq '^      oldpeak\.py:9 in <module> +300 MiB +100\.0% +300 MiB +31\.6%$' "$T/held.txt" ||
    { echo "held_labels: FAIL: the weights are not one row at both moments:"; cat "$T/held.txt"; failed=1; }
grep -Eq '^      oldpeak\.py:11 in <module> +650 MiB +68\.4%$' "$T/held.txt" ||
    { echo "held_labels: FAIL: the workspace's row at the peak:"; cat "$T/held.txt"; failed=1; }
! grep -q 'in try_alloc' "$T/held.txt" || { echo "held_labels: FAIL: the helper's line names a row:"; cat "$T/held.txt"; failed=1; }
"$READER" --format json "$T"/op/*.oomt | python3 -c '
import json, sys
b = json.load(sys.stdin)["breakdown"]
parts = {m: {p["label"]: p["bytes"] for r in b[m]["rows"] for p in r["parts"]} for m in ("now", "peak")}
MiB = 1 << 20
assert parts["now"] == {"oldpeak.py:9 in <module>": 300 * MiB}, parts
assert parts["peak"] == {"oldpeak.py:9 in <module>": 300 * MiB, "oldpeak.py:11 in <module>": 650 * MiB}, parts
' || { echo "held_labels: FAIL: JSON breakdown parts"; failed=1; }
# Its "export" after 20 steps asked for 4x a step: a phase of its own, not a step given a larger input.
grep -Fq 'The phase under way at the failure asked for 4.0x the interval of another kind before it: after marker "export"' "$T/r.txt" ||
    { echo "held_labels: FAIL: the export phase compared as a step: $(grep -F 'under way at the failure' "$T/r.txt")"; failed=1; }
grep -Fq 'a phase of another kind, which fit: this phase is no larger step but work of its own. Give it less at once (a smaller batch for it, or its work in pieces), or free (or move to the host) what was live when it began (300 MiB) before it starts.' "$T/r.txt" ||
    { echo "held_labels: FAIL: the export phase's remedy: $(grep -F 'What ran after' "$T/r.txt")"; failed=1; }
! grep -Fq 'that step was given more' "$T/r.txt" || { echo "held_labels: FAIL: the export read as a step given a larger input"; failed=1; }
# Its peak (the workspace, freed 20 steps before the failure) is said as the peak's, not as the failure's cause.
grep -Eq 'Most of the peak came from one call site: 650 MiB of the 950 MiB peak .*in <module> \(stack [0-9]+\); that peak \(seq [0-9]+\) came before the failure, which found 300 MiB live on the device, 0 B of it at this site \(freed since\)\.' "$T/r.txt" ||
    { echo "held_labels: FAIL: the peak's site read as the failure's: $(grep -F 'Most of the peak came' "$T/r.txt")"; failed=1; }
grep -Fq 'up to the peak (seq 3); that peak came before the failure, which found only 300 MiB live on the device.' "$T/r.txt" ||
    { echo "held_labels: FAIL: the peak's phase read as the failure's: $(grep -F 'Most of the peak was' "$T/r.txt")"; failed=1; }
# Walk 11, #8: stacks native only (OOMTRACE_PYTHON=0, or a Python whose frames the tracer cannot read): the row is
# named as the site table names the site, by its headline (ctypes' ffi_call), not "(unknown stack)".
mkdir "$T/np"
env LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1G FAKECUDA_OTHER_USED=0 OOMTRACE_DIR="$T/np" OOMTRACE_QUIET=1 \
    OOMTRACE_PYTHON=0 LD_PRELOAD="$LIB" python3 "$T/oldpeak.py" >"$T/programs.log" 2>&1
"$READER" "$T"/np/*.oomt >"$T/np.txt" 2>&1 || { echo "held_labels: FAIL: exit $? reading the native-only snapshot"; exit 1; }
head=$(sed -n 's/^   1\. .* of peak: \(.*\) (stack [0-9]*)$/\1/p' "$T/np.txt" | head -1)
sed -n '/^What held the memory/,/^$/p' "$T/np.txt" >"$T/held.txt"
[ -n "$head" ] && grep -Fq "      $head " "$T/held.txt" && ! grep -q "unknown stack" "$T/held.txt" ||
    { echo "held_labels: FAIL: native-only stacks: no row named '$head':"; cat "$T/held.txt"; failed=1; }
[ "$failed" -eq 0 ] && echo "held_labels: ok"
exit "$failed"
