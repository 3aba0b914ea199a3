#!/usr/bin/env bash
# bench/reader_ab.sh: the text report of a 1M-allocation snapshot by this tree's reader against the reader
# of a base commit, in one run: the two alternate round by round (the order flips every round) and each
# side's figure is its minimum over the rounds (the least-disturbed run on a shared machine). Issue 12's
# cost target: this tree's report takes no more than 1.10 x the base's. Nothing is asserted.
#
#   bench/reader_ab.sh [--rounds N] [--base COMMIT]
#
# COMMIT defaults to 662b3af, the last commit before issue 12's reader work (bc3174a, the user's line
# first, came next). Its reader is built from `git archive` into build/bench/base-COMMIT/ (kept between
# runs). The snapshot is snapgen's (tests/snapgen): 1,000,000 live allocations over 100,000 stacks and
# 1,000,000 events in the ring, an OOM with its failure; base readers of format 1.2 read it (they skip
# what a later minor version appends). Prints wall and CPU (user + system) seconds per side and the ratios;
# writes build/bench/reader_ab.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=7
BASE=662b3af
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    *) echo "usage: bench/reader_ab.sh [--rounds N] [--base COMMIT]" >&2; exit 2 ;;
    esac
done
OUT=build/bench
BD=$OUT/base-$BASE
mkdir -p "$OUT"
if [ ! -x "$BD/build/oomtrace-read" ]; then
    rm -rf "$BD" && mkdir -p "$BD"
    git archive "$BASE" | tar -x -C "$BD"
    ${MAKE:-make} -s -C "$BD" -j2 build/oomtrace-read >/dev/null
fi
${MAKE:-make} -s build/oomtrace-read build/snapgen >/dev/null
# Copies: a rebuild of build/ while this runs cannot change them half-way.
mkdir -p "$OUT/ab"
cp "$BD/build/oomtrace-read" "$OUT/ab/base-read"
cp build/oomtrace-read "$OUT/ab/this-read"
SNAP=$OUT/ab/1m.oomt
build/snapgen --seed 1 --trigger oom --events 1000000 --live 1000000 --stacks 100000 -o "$SNAP"
# One run: "WALL USER SYS" seconds on stdout.
one() { /usr/bin/time -f "%e %U %S" -o "$OUT/ab/t" "$1" "$SNAP" >/dev/null && cat "$OUT/ab/t"; }
: >"$OUT/ab/runs.txt"
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="base this"; else order="this base"; fi
    for side in $order; do
        echo "$side $(one "$OUT/ab/$side-read")" >>"$OUT/ab/runs.txt"
    done
done
python3 - "$OUT/ab/runs.txt" "$BASE" "$ROUNDS" "$(git rev-parse --short HEAD)" <<'PY' | tee "$OUT/reader_ab.txt"
import sys
runs, base, rounds, head = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
t = {"base": [], "this": []}
for line in open(runs):
    side, wall, user, sysc = line.split()
    t[side].append((float(wall), float(user) + float(sysc)))
bw = min(w for w, _ in t["base"]); tw = min(w for w, _ in t["this"])
bc = min(c for _, c in t["base"]); tc = min(c for _, c in t["this"])
print(f"text report, snapgen 1M live / 100k stacks / 1M events, min of {rounds} alternating rounds")
print(f"  base {base}: wall {bw:.2f} s, cpu {bc:.2f} s")
print(f"  this {head}: wall {tw:.2f} s, cpu {tc:.2f} s")
print(f"  ratio this/base: wall {tw / bw:.3f}, cpu {tc / bc:.3f} (target <= 1.10)")
PY
rm -f "$SNAP"
