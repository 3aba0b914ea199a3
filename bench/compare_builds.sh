#!/bin/sh
# bench/compare_builds.sh OLD NEW [ROUNDS]: the tracer and the reader of two builds (OLD/build, NEW/build:
# trees built with `make all`) measured in one run, alternating OLD and NEW round by round (the order flips
# every round), the least of ROUNDS (default 7) quoted per figure, with the ratio NEW/OLD. One harness for
# both: NEW's build/bench/alloc_cost and NEW's stand-in driver with each tree's liboomtrace.so; each tree's
# oomtrace-read on one snapshot OLD's snapgen wrote (a format both read). For "within noise of before".
set -eu
OLD=$1 NEW=$2 ROUNDS=${3:-7}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH=$NEW/build/fake FAKECUDA_CAPACITY=1T OOMTRACE_QUIET=1 OOMTRACE_DIR=$T
"$OLD/build/snapgen" --seed 1 --trigger api --events 2000000 --live 100000 --stacks 10000 -o "$T/in.oomt" >/dev/null
one() { # tree tag
    for d in 8 32; do
        LD_PRELOAD=$1/build/liboomtrace.so "$NEW/build/bench/alloc_cost" --calls 32768 --depths $d --threads 1 |
            sed -n "s/^result kind=\(alloc\|free\) .* ns=\([0-9.]*\) .*/$2 \1_d$d \2/p"
    done
    # The reader: CPU time (user + system, its threads together) and wall time; on a loaded machine the
    # wall time mostly measures the wait for a core.
    for fmt in json text; do
        /usr/bin/time -f "%U %S %e" -o "$T/time" "$1/build/oomtrace-read" --format $fmt "$T/in.oomt" >/dev/null
        read -r u s e <"$T/time"
        echo "$2 reader_${fmt}_cpu_ms $(echo "$u $s" | awk '{print ($1 + $2) * 1000}')"
        echo "$2 reader_${fmt}_wall_ms $(echo "$e" | awk '{print $1 * 1000}')"
    done
}
r=0
while [ $r -lt "$ROUNDS" ]; do
    if [ $((r % 2)) -eq 0 ]; then one "$OLD" old; one "$NEW" new; else one "$NEW" new; one "$OLD" old; fi
    r=$((r + 1))
done >"$T/raw"
python3 - "$T/raw" "$ROUNDS" <<'PY'
import sys, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tag, k, x = line.split()
    v[(tag, k)].append(float(x))
keys = sorted({k for _, k in v})
print(f"least of {sys.argv[2]} rounds, alternating; ns per call (alloc_cost, traced, one thread); ms per reader run (2 M events, --format json or text)")
print(f"{'figure':18} {'old':>10} {'new':>10} {'new/old':>8}   (old: min-max; new: min-max)")
for k in keys:
    o, n = v[('old', k)], v[('new', k)]
    print(f"{k:18} {min(o):10.1f} {min(n):10.1f} {min(n) / min(o):8.2f}   ({min(o):.1f}-{max(o):.1f}; {min(n):.1f}-{max(n):.1f})")
PY
