#!/bin/sh
# Instructions per event of the tracer's functions (callgrind), as the difference between two runs of one
# program that differ only in length, divided by the events between them: start-up and first sight cancel.
#
#   bench/ir_per_event.sh EVENTS 'CMD SHORT' 'CMD LONG'     # EVENTS: allocations between the two runs
#   e.g. bench/ir_per_event.sh 4100 'python3.12 bench/step_mix.py 20 --loops 1' 'python3.12 bench/step_mix.py 60 --loops 1'
# Runs under LD_PRELOAD=build/liboomtrace.so (LIB= to name another, LIB=none untraced) against the stand-in driver; prints the
# inclusive Ir per allocation event of each function named below. MISSES=1 (bench/misses_per_event.sh):
# cachegrind with its cache simulation instead (D1=, LL= as size,assoc,line), and bench/misses_summary.py
# prints Ir and cache misses per event by part.
set -eu
cd "$(dirname "$0")/.."
N=$1
LIB=${LIB:-$PWD/build/liboomtrace.so}
[ "$LIB" = none ] && LIB=
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=0
MISSES=${MISSES:-0}
tool="--tool=callgrind --callgrind-out-file"
[ "$MISSES" = 1 ] && tool="--tool=cachegrind --cache-sim=yes --I1=${I1:-32768,8,64} --D1=${D1:-49152,12,64} --LL=${LL:-2097152,16,64} --cachegrind-out-file"
for cmd in "$2" "$3"; do
    i=$((i + 1))
    LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1T OOMTRACE_DUMP=none OOMTRACE_FRAMEWORKS=0 OOMTRACE_QUIET=1 \
        valgrind $tool="$out/cg.$i.%p" --trace-children=yes env LD_PRELOAD="$LIB" $cmd \
        >/dev/null 2>"$out/err.$i" || { cat "$out/err.$i" >&2; exit 1; }
    [ "$MISSES" = 1 ] ||
        callgrind_annotate --inclusive=yes --threshold=100 "$(ls -S "$out"/cg.$i.* | head -1)" >"$out/ann.$i"
done
if [ "$MISSES" = 1 ]; then
    python3 bench/misses_summary.py "$out" "$N"
    exit
fi
python3 - "$out/ann.1" "$out/ann.2" "$N" <<'PY'
import re, sys
FUNCS = ["ot_record_alloc", "capture", "ot_backtrace", "ot_native_walk", "ot_python_merge", "merge", "ot_py_walk",
         "ot_py_walk_gather", "ot_py_walk_ids", "mkey_hash", "mkey_same",
         "ot_py_borrow", "merge_into", "ot_py_frame_id", "ot_stack_intern", "ot_ring_append", "ot_record_free",
         "ot_now_ns", "ot_after_alloc"]
def read(p):
    d = {}
    for line in open(p):
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+\S*:(\S+?)(?:\s|\[|$)", line)
        if m:
            name = m.group(2).split("'")[0]
            d[name] = max(d.get(name, 0), int(m.group(1).replace(",", "")))
    return d
a, b, n = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
for f in FUNCS:
    if f in a or f in b:
        print(f"{f:18s} {(b.get(f, 0) - a.get(f, 0)) / n:10.0f} Ir/alloc")
PY
