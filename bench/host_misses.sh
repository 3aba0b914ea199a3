#!/bin/sh
# What the tracer costs the program's own code: the program's cache misses per event traced against
# untraced (bench/misses_per_event.sh both ways, same cache model). The tracer's lines take the places of
# the program's in the caches, and the program fetches them again after each event: on the H200 the
# torch step's whole cost within one process was above what the tracer spends inside its wrappers
# (docs/PERFORMANCE.md, issue 16's seventeenth pass), and this is the part outside them.
#
#   bench/host_misses.sh EVENTS 'CMD SHORT' 'CMD LONG'
#   e.g. bench/host_misses.sh 4100 'python3.12 bench/step_mix.py 20 --loops 1' 'python3.12 bench/step_mix.py 60 --loops 1'
# LIB= the traced build (default build/liboomtrace.so); I1=, D1=, LL= as misses_per_event.sh.
set -eu
here=$(dirname "$0")
echo "== untraced"
bare=$(LIB=none "$here/misses_per_event.sh" "$@")
echo "$bare" | grep -E "^per event|^the program"
echo "== traced (${LIB:-build/liboomtrace.so})"
traced=$("$here/misses_per_event.sh" "$@")
echo "$traced"
echo "== the program's own code, traced less untraced (misses the tracer caused outside itself)"
python3 - "$bare" "$traced" <<'PY'
import sys
def row(text):
    for line in text.splitlines():
        if line.startswith("the program"):
            return [float(x) for x in line.split()[-4:]]
    raise SystemExit("host_misses: no program row in misses_summary's output")
b, t = row(sys.argv[1]), row(sys.argv[2])
print(f"{'per event':24s} {'Ir':>8s} {'I1 miss':>8s} {'D1 miss':>8s} {'LL miss':>8s}")
print(f"{'the program, added':24s} {t[0] - b[0]:8.0f} {t[1] - b[1]:8.1f} {t[2] - b[2]:8.1f} {t[3] - b[3]:8.2f}")
PY
