#!/bin/sh
# Python stacks deeper than the tracer keeps (walk 7, #16): a chain of more than 128 Python frames keeps its
# 96 innermost and 32 outermost frames and is marked cut, in every CPython this machine has. Before, the
# innermost 128 were kept and nothing said so: the program's own outer frames were lost, and two call sites
# with the same deep recursion under them (the loop's and the failed request's, deep.py lines 21 and 22)
# were one stack. deep.py map's middle holds runs of the eval loop begun from C (map): their native frames
# go with the Python frames cut, and the outer frames follow the inner ones.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "python_depth: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-pydepth.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp tests/py/drv.py "$work/"
cat >"$work/deep.py" <<'PY'
import sys
from drv import try_alloc, MiB
sys.setrecursionlimit(5000)
def alloc(n):
    return try_alloc(n)
def rec(d, n):
    if d == 0:
        return alloc(n)
    return rec(d - 1, n)
def mapped(d, n):
    if d == 0:
        return rec(100, n)
    return list(map(lambda k: mapped(k, n), [d - 1]))[0]
def outer(d, n):
    if d == 0:
        return mapped(int(sys.argv[2]), n)
    return outer(d - 1, n)
def start(n):
    return rec(int(sys.argv[2]), n) if sys.argv[1] == "rec" else outer(40, n)
for i in range(3):
    assert start(MiB)[0] == 0
st = start(4 << 30)[0]
assert st == 2, st
PY
# check PY MODE ARG WANT: deep.py MODE ARG's failed request's Python frames (function names, innermost first)
# as WANT (a Python expression over n, ARG), cut or not as WANT says (None: not checked), its outermost
# frame <module> line 22 (not the loop's 21) and its stack not the loop's. DEPTH: OOMTRACE_DEPTH.
check() {
    py=$1 mode=$2 arg=$3 want=$4
    d="$work/$(basename "$py")-$mode-$arg-$DEPTH"
    mkdir "$d"
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$d" OOMTRACE_DEPTH=$DEPTH \
        LD_PRELOAD="$PWD/build/liboomtrace.so" "$py" "$work/deep.py" "$mode" "$arg" >"$d/out" 2>&1 ||
        fail "$py deep.py $mode $arg: $(cat "$d/out")"
    set -- "$d"/oomtrace-*-oom.oomt
    build/oomtrace-read --format json "$1" >"$d/json" || fail "$py deep.py $mode $arg: the reader: $(cat "$d/json")"
    /usr/bin/python3 - "$d/json" "$arg" "$want" <<'PY' || fail "$py deep.py $mode $arg"
import json, sys
j = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
names, cut = eval(sys.argv[3])
f = j["failure"]
py = [x for x in f["stack"] if x["kind"] == "python"]
got = [x["function"].split(".")[-1] for x in py]
err = []
if got != names:
    err.append("Python frames %s, want %s" % (got, names))
if cut is not None and f["stack_truncated"] != cut:
    err.append("stack_truncated %s, want %s" % (f["stack_truncated"], cut))
if py[-1]["line"] != 22:
    err.append("outermost frame %s line %s, want <module> line 22" % (py[-1]["function"], py[-1]["line"]))
loop = [s["stack_id"] for s in j["live"]["sites"]]
if f["stack_id"] in loop:
    err.append("the failed request's stack %d is the loop's (%s)" % (f["stack_id"], loop))
if err:
    sys.exit("; ".join(err))
PY
}
tested=0
. tests/py/cpython.sh
for v in 9 10 11 12 13; do
    py=$(cpython $v)
    [ -n "$py" ] || { echo "python_depth: no CPython 3.$v here; not tested"; continue; }
    tested=$((tested + 1))
    # 50 deep: whole, not cut (room for 3.9's three native frames a Python one). 123: 128 frames exactly,
    # all kept (the native frames are cut there in 3.9 and 3.10). 300 (305 frames): 96 + 32, said cut.
    DEPTH=240
    check "$py" rec 50 '(["try_alloc", "alloc"] + ["rec"] * (n + 1) + ["start", "<module>"], False)'
    DEPTH=64
    check "$py" rec 123 '(["try_alloc", "alloc"] + ["rec"] * (n + 1) + ["start", "<module>"], None)'
    check "$py" rec 300 '(["try_alloc", "alloc"] + ["rec"] * 94 + ["rec"] * 30 + ["start", "<module>"], True)'
    # The cut's middle: rec's last 7 frames, mapped and its lambdas (runs of their own), 10 of outer's.
    for DEPTH in 64 240; do
        check "$py" map 10 '(["try_alloc", "alloc"] + ["rec"] * 94 + ["outer"] * 30 + ["start", "<module>"], True)'
    done
done
[ "$tested" -gt 0 ] || fail "no CPython 3.9 to 3.13 here"
echo "python_depth: ok ($tested CPython versions)"
