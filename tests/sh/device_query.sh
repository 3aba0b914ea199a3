#!/bin/sh
# The device a stream-ordered allocation is on (lib/driver/driver.h: ot_drv_current_device). A process that sees
# one device is not asked which: every allocation is on device 0, as the driver would say. One that sees several
# is asked each time, so an allocation made while device 1's context is current is device 1's. Both against the
# stand-in driver: FAKECUDA_DEVICES=1 and 2.
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
alloc_async(3 * MiB)
if sys.argv[1] == "2":
    use(1)
    alloc_async(5 * MiB)
    use(0)
    alloc_async(7 * MiB)
assert dump(b"check") == 0
PY
# run N: the program with N devices; prints each device's tracked bytes in MiB, as "device:MiB" words
run() {
    mkdir -p "$T/$1"
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_DEVICES=$1 FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$T/$1" OOMTRACE_QUIET=1 \
        LD_PRELOAD="$PWD/build/liboomtrace.so" python3 "$T/prog.py" "$1" >"$T/$1.out" 2>&1 ||
        fail "$1 devices: the program: $(tail -3 "$T/$1.out")"
    build/oomtrace-read --format json "$T/$1"/*.oomt | python3 -c '
import json, sys
print(" ".join("%d:%d" % (d["ordinal"], d["tracked_bytes"] >> 20) for d in json.load(sys.stdin)["devices"]))'
}
got=$(run 1) && [ "$got" = "0:3" ] || fail "one device: tracked [$got], want 0:3"
got=$(run 2) && [ "$got" = "0:10 1:5" ] || fail "two devices: tracked [$got], want 0:10 1:5 (device 1's allocation as device 1's)"
echo "device_query: ok"
