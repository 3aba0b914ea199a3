#!/bin/sh
# The stage build's pass-through switch (lib/common/stage.h: OT_STAGE_PASS), which issue 16's in-process bench
# (tests/gpu/bench_inproc.py) rests on: between oomtrace_mark("stage: pass-through") and ("stage: traced") no
# allocation or free is recorded, and each returns what the driver returned; the counts at the marks split the
# tracer's time by block. Also the bench's round arithmetic, and the bench end to end with the C program's rounds.
# The normal build has no such switch; the pass-through build (build/bench/liboomtrace-pass.so) has it and no
# probes, and the bench reads its ratio beside the stage build's.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "stage_pass: FAIL: $*"; exit 1; }
lib=$PWD/build/bench/liboomtrace-stages.so
make -s bench-stages >/dev/null 2>&1 || fail "make bench-stages"
pass=$PWD/build/bench/liboomtrace-pass.so
! nm -D --defined-only build/liboomtrace.so | grep -q ot_stage && ! nm build/liboomtrace.so | grep -q ot_stage_pass ||
    fail "the normal build has the stage build's switch"
work=$(mktemp -d /tmp/oomtrace-stagepass.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp tests/py/drv.py "$work/"
# The pass-through build is the normal build's code and the switch: compiled as the normal build is (the same
# compiler options, but for its own profile's path), with none of the stage build's probes, counters or exit line
producer() { readelf --debug-dump=info "$1" 2>/dev/null | grep -m1 DW_AT_producer | sed -e 's/.*: GNU/GNU/' -e 's|-fprofile-use=[^ ]*||'; }
[ -n "$(producer build/lib/record/record.o)" ] &&
    [ "$(producer build/lib/record/record.o)" = "$(producer build/bench/pass/lib/record/record.o)" ] ||
    fail "the pass-through build is compiled otherwise: [$(producer build/bench/pass/lib/record/record.o)] against the normal build's [$(producer build/lib/record/record.o)]"
nm --defined-only "$pass" | grep -qE " (ot_stage_(me|fine|thread_new|stacks|ring_drop|last_tid)|stage_report|sum_threads)$" &&
    fail "the pass-through build has the stage build's probes"
nm --defined-only "$pass" | grep -q " ot_stage_pass$" || fail "the pass-through build has no switch"
cat >"$work/prog.py" <<'PY'
from drv import try_alloc, free, mark


def pairs(n):
    for _ in range(n):
        status, addr = try_alloc(4096)
        assert status == 0 and addr, (status, addr)
        free(addr)


assert mark(b"stage: traced") == 0
pairs(10)
mark(b"stage: pass-through")
pairs(500)
status, addr = try_alloc(1 << 50)  # refused by the driver: the same status passed through
assert status == 2 and addr == 0, (status, addr)
mark(b"stage: traced")
pairs(20)
mark(b"stage: traced")
PY
LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1G OOMTRACE_DUMP=none OOMTRACE_QUIET=1 LD_PRELOAD=$lib \
    python3 "$work/prog.py" >"$work/out" 2>"$work/err" || fail "the program: $(tail -3 "$work/err")"
python3 - "$work/err" <<'PY' || exit 1
import json, sys
line = next((l for l in open(sys.argv[1]) if "OOMTRACE_STAGES " in l), None)
if line is None:
    sys.exit("stage_pass: FAIL: no OOMTRACE_STAGES line")
st = json.loads(line[line.index("OOMTRACE_STAGES ") + 16:])
m = st["marks"]
ev = [x["events"] for x in m]
ns = [x["tracer_ns"] for x in m]
# each mark is an event of its own; a pair is two
want = [ev[0] + 1 + 20, ev[0] + 1 + 20 + 1, ev[0] + 1 + 20 + 1 + 1 + 40]
if ev[1:] != want:
    sys.exit("stage_pass: FAIL: events at the marks %s, want %s (the passed-through block recorded)" % (ev, [ev[0]] + want))
# A passed-through call never enters the tracer: no wrapper probe counts it (the 30 traced pairs alone), so
# the passed-through block adds no time (a mark's own record moves the count by a few ns)
calls = (st["stages"]["hook"]["calls"], st["stages"]["hook_free"]["calls"])
if calls != (30, 30):
    sys.exit("stage_pass: FAIL: %d allocation and %d free wrappers entered, want 30 and 30 (the traced pairs)" % calls)
if not (ns[1] > ns[0] and abs(ns[2] - ns[1]) < 1000 and ns[3] > ns[2] + 1000):
    sys.exit("stage_pass: FAIL: the tracer's time at the marks %s: the passed-through block counted" % ns)
PY
# The pass-through build: what a passed-through block allocated is not live in its record; the switches are counted
# at exit, and nothing else is printed (no probes)
cat >"$work/keep.py" <<'PY'
from drv import try_alloc, mark, dump, MiB

assert mark(b"stage: traced") == 0
assert try_alloc(1 * MiB)[0] == 0
mark(b"another label")  # a mark, not a switch
mark(b"stage: pass-through")
for _ in range(3):
    assert try_alloc(2 * MiB)[0] == 0
mark(b"stage: traced")
assert dump(b"check") == 0
PY
mkdir -p "$work/snap"
LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DIR="$work/snap" LD_PRELOAD=$pass \
    python3 "$work/keep.py" >"$work/out" 2>"$work/err" || fail "the program under the pass-through build: $(tail -3 "$work/err")"
grep -q "OOMTRACE_STAGES" "$work/err" && fail "the pass-through build printed the stage build's line"
[ "$(grep -c '^OOMTRACE_PASS {"pid": [0-9]*, "switches": 3}$' "$work/err")" = 1 ] ||
    fail "the pass-through build's exit line: $(cat "$work/err")"
echo 'from drv import try_alloc; assert try_alloc(4096)[0] == 0' >"$work/plain.py"
LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DUMP=none LD_PRELOAD=$pass \
    python3 "$work/plain.py" 2>"$work/err.plain" || fail "a program under the pass-through build that never switches"
[ -s "$work/err.plain" ] && fail "a process that never switched printed: $(cat "$work/err.plain")"
build/oomtrace-read --format json "$work"/snap/*.oomt | python3 -c '
import json, sys
d = json.load(sys.stdin)["devices"][0]
sys.exit(0 if d["tracked_bytes"] == 1 << 20 else "tracked %d bytes, want the traced 1 MiB alone" % d["tracked_bytes"])' ||
    fail "the pass-through build recorded a passed-through allocation"
PYTHONPATH=tests/gpu python3 - <<'PY' || fail "bench_inproc's rounds"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("bi", "tests/gpu/bench_inproc.py")
bi = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bi)
r = bi.round_ratios([{"traced": True, "ns": 105}, {"traced": False, "ns": 100},
                     {"traced": False, "ns": 200}, {"traced": True, "ns": 206}])
assert [round(x, 3) for x in r] == [1.05, 1.03], r
# a pass-through process is a measure only when its marks switched as its rounds did
assert bi.pass_error({"pid": 1, "switches": 5}, 4) is None
assert "switched 4 times, want 5" in bi.pass_error({"pid": 1, "switches": 4}, 4)
assert "no OOMTRACE_PASS line" in bi.pass_error(None, 4)
# a failed process's own last line, not the build's exit line after it
assert bi.last_error("Traceback\nRuntimeError: boom\nOOMTRACE_PASS {\"pid\": 1, \"switches\": 2}\n") == "RuntimeError: boom"
PY
# The bench end to end on the stand-in driver: the C program's in-process rounds (tests/gpu/alloc_pair.c inproc)
# through tests/gpu/bench_inproc.py, whose summary needs the process's stage line, its marks and its blocks
cuda_home=${CUDA_HOME:-$(ls -d /usr/local/cuda /usr/local/cuda-* 2>/dev/null | head -1)}
cc -O2 -I"$cuda_home/include" -o "$work/alloc_pair" tests/gpu/alloc_pair.c -Lbuild/fake -lcuda -ldl ||
    fail "tests/gpu/alloc_pair.c does not build against the stand-in driver"
LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1T python3 tests/gpu/bench_inproc.py "$lib" --pass-lib "$pass" \
    --cases c_async --cbin "$work/alloc_pair" --procs 1 --rounds 2 --raw "$work/raw.jsonl" >"$work/inproc" 2>&1 ||
    fail "bench_inproc.py: $(cat "$work/inproc")"
grep -q "^c_async stage SUMMARY 1 processes, 2 rounds: ratio .*counted [0-9.]*%$" "$work/inproc" &&
    grep -q "^c_async pass  SUMMARY 1 processes, 2 rounds: ratio .*counted -$" "$work/inproc" ||
    fail "bench_inproc.py's summaries: $(cat "$work/inproc")"
python3 - "$work/raw.jsonl" <<'PY2' || exit 1
import json, sys
rows = {r["build"]: r for r in map(json.loads, open(sys.argv[1]))}
for build, r in sorted(rows.items()):
    modes = [b["traced"] for b in r["blocks"]]
    if modes != [True, False, False, True] or r["n"] != 20000 or (build == "stage") != (r["counted"] is not None) \
            or build == "stage" and not 0 < r["counted"] < 1:
        sys.exit("stage_pass: FAIL: the C program's rounds (%s): %s" % (build, json.dumps(r)[:300]))
if sorted(rows) != ["pass", "stage"]:
    sys.exit("stage_pass: FAIL: the builds run: %s" % sorted(rows))
PY2
# The normal build takes the marks and switches nothing: the bench refuses it as a pass-through build
LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1T python3 tests/gpu/bench_inproc.py "$lib" \
    --pass-lib build/liboomtrace.so --cases c_async --cbin "$work/alloc_pair" --procs 1 --rounds 2 >"$work/inproc" 2>&1 &&
    fail "bench_inproc.py took the normal build for the pass-through one: $(cat "$work/inproc")"
grep -q "no OOMTRACE_PASS line" "$work/inproc" || fail "bench_inproc.py's refusal: $(cat "$work/inproc")"
# --pass-only: the pass-through build's processes alone
LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1T python3 tests/gpu/bench_inproc.py --pass-lib "$pass" --pass-only \
    --cases c_async --cbin "$work/alloc_pair" --procs 1 --rounds 2 >"$work/inproc" 2>&1 ||
    fail "bench_inproc.py --pass-only: $(cat "$work/inproc")"
[ "$(grep -c SUMMARY "$work/inproc")" = 1 ] && grep -q "^c_async pass  SUMMARY 1 processes, 2 rounds" "$work/inproc" ||
    fail "bench_inproc.py --pass-only's summary: $(cat "$work/inproc")"
LD_LIBRARY_PATH=$PWD/build/fake "$work/alloc_pair" 2 inproc >/dev/null 2>&1 && fail "alloc_pair inproc ran without a tracer"
echo "stage_pass: ok"
