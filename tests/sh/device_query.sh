#!/bin/sh
# The device a stream-ordered allocation is on (lib/driver/driver.h: ot_drv_current_device). A process that sees
# one device is not asked which: every allocation is on device 0, as the driver would say, and the driver is asked
# its device count once. One that sees several is asked each time, so an allocation made while device 1's context
# is current is device 1's. A driver that will not give the count (before cuInit) is asked each time too, and
# answers as before. Against the stand-in driver, which counts the questions (FAKECUDA_CALLS).
set -u
cd "$(dirname "$0")/../.."
command -v python3 >/dev/null 2>&1 || { echo "device_query: skipped, no python3"; exit 0; }
T=$(mktemp -d /tmp/oomtrace-devquery-XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
fail() { echo "device_query: FAIL: $*"; exit 1; }
cp tests/py/drv.py "$T/"
cat >"$T/prog.py" <<'PY'
import sys
from drv import cuda, ctypes, MiB, dump

cuda.cuMemAllocAsync.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_void_p]
assert cuda.cuInit(0) == 0


def use(n):
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuDeviceGet(ctypes.byref(dev), n) == 0 and cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0


def alloc_async(nbytes):
    p = ctypes.c_uint64()
    assert cuda.cuMemAllocAsync(ctypes.byref(p), nbytes, None) == 0


use(0)
for _ in range(int(sys.argv[2])):
    alloc_async(1 * MiB)
if sys.argv[1] == "2":
    use(1)
    alloc_async(5 * MiB)
    use(0)
    alloc_async(7 * MiB)
assert dump(b"check") == 0
PY
# run N ALLOCS [ENV...]: the program with N devices and ALLOCS allocations of 1 MiB on device 0; prints each
# device's tracked MiB as "device:MiB" words, then the driver's count of each question
run() {
    n=$1 k=$2
    shift 2
    d="$T/$n-$k-$#"
    mkdir -p "$d"
    env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_DEVICES=$n FAKECUDA_CAPACITY=1G FAKECUDA_CALLS="$d.calls" \
        OOMTRACE_DIR="$d" OOMTRACE_QUIET=1 "$@" LD_PRELOAD="$PWD/build/liboomtrace.so" python3 "$T/prog.py" "$n" "$k" \
        >"$d.out" 2>&1 || fail "$n devices: the program: $(tail -3 "$d.out")"
    tracked=$(build/oomtrace-read --format json "$d"/*.oomt | python3 -c '
import json, sys
print(" ".join("%d:%d" % (d["ordinal"], d["tracked_bytes"] >> 20) for d in json.load(sys.stdin)["devices"]))')
    echo "$tracked $(tr '\n' ' ' <"$d.calls")"
}
# calls RUN1 RUN2 NAME: how many more times RUN2 asked NAME than RUN1 (their ALLOCS differ by 40)
more() { echo $(($(echo "$2" | sed "s/.*$3 \([0-9]*\).*/\1/") - $(echo "$1" | sed "s/.*$3 \([0-9]*\).*/\1/"))); }
a=$(run 1 10) && b=$(run 1 50) || exit 1
case "$a" in "0:10 "*) ;; *) fail "one device: [$a], want device 0 with 10 MiB" ;; esac
case "$b" in "0:50 "*) ;; *) fail "one device: [$b], want device 0 with 50 MiB" ;; esac
[ "$(more "$a" "$b" cuCtxGetDevice)" = 0 ] && [ "$(more "$a" "$b" cuDeviceGetCount)" = 0 ] ||
    fail "one device: 40 more allocations asked the driver more: [$a] then [$b]"
case "$a" in *"cuDeviceGetCount 0 "*) fail "one device: the device count was never asked: [$a]" ;; esac
a=$(run 2 10) && b=$(run 2 50) || exit 1
case "$a" in "0:17 1:5 "*) ;; *) fail "two devices: [$a], want 0:17 1:5 (device 1's allocation as device 1's)" ;; esac
[ "$(more "$a" "$b" cuCtxGetDevice)" = 40 ] ||
    fail "two devices: 40 more allocations did not each ask their device: [$a] then [$b]"
a=$(run 1 10 FAKECUDA_COUNT_REFUSED=1) && b=$(run 1 50 FAKECUDA_COUNT_REFUSED=1) || exit 1
case "$b" in "0:50 "*) ;; *) fail "no device count: [$b], want device 0 with 50 MiB" ;; esac
[ "$(more "$a" "$b" cuCtxGetDevice)" = 40 ] && [ "$(more "$a" "$b" cuDeviceGetCount)" = 40 ] ||
    fail "no device count: each allocation should ask both: [$a] then [$b]"
# A forked child asks the count again (its CUDA is its own): its counts are the parent's at the fork and its own
cat >"$T/fork.py" <<'PY'
import os
import sys
from drv import cuda, ctypes, MiB

cuda.cuMemAllocAsync.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_void_p]


def alloc_async(nbytes):
    p = ctypes.c_uint64()
    assert cuda.cuMemAllocAsync(ctypes.byref(p), nbytes, None) == 0


assert cuda.cuInit(0) == 0
alloc_async(MiB)
pid = os.fork()
if pid == 0:
    os.environ["FAKECUDA_CALLS"] = sys.argv[1]  # the child's counts in a file of its own, written at its exit
    alloc_async(MiB)
    alloc_async(MiB)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
PY
LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CALLS="$T/fork.parent" OOMTRACE_DUMP=none OOMTRACE_QUIET=1 \
    LD_PRELOAD="$PWD/build/liboomtrace.so" python3 "$T/fork.py" "$T/fork.child" >"$T/fork.out" 2>&1 ||
    fail "the forked program: $(tail -3 "$T/fork.out")"
child=$(tr '\n' ' ' <"$T/fork.child")
[ "$child" = "cuDeviceGetCount 2 cuCtxGetDevice 0 " ] ||
    fail "a forked child: [$child], want the count asked once by the parent and once by the child, and no device query"
echo "device_query: ok"
