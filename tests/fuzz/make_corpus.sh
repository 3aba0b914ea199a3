#!/bin/sh
# Regenerates the fuzz seed corpus, tests/fuzz/corpus/ (run after `make test-build build/fuzz/snapgen`;
# an argument writes elsewhere). The committed files are what CI uses; rerunning this
# rewrites the snapgen and ring seeds byte for byte, but the tracer-written ones (real-*) carry pids,
# times and ASLR addresses, so they change: commit them only when the format changes.
#
# Seeds stay small (a few KiB): libFuzzer's default -max_len is the largest seed, and every
# mutation of a big seed costs a full parse and report.
set -eu
cd "$(dirname "$0")/../.."
SNAPGEN=${SNAPGEN:-build/fuzz/snapgen}
OUT=${1:-tests/fuzz/corpus}
mkdir -p "$OUT"
small="--events 300 --live 12 --stacks 8 --chunk 60 --markers-every 40"

# Valid variants. Mostly uncompressed: mutations inside a zstd frame rarely survive decompression,
# while plain sections let the fuzzer reach every field.
g() { name=$1; shift; "$SNAPGEN" --seed 3 "$@" -o "$OUT/$name.oomt"; }
g valid-plain $small --no-compress
g valid-zstd $small
g valid-exit $small --no-compress --trigger exit --markers-every 0
g valid-signal $small --no-compress --trigger signal --devices 3
g valid-api $small --no-compress --trigger api --devices 2 --live 30
g valid-flush $small --no-compress --trigger flush --incomplete
g valid-dropped --events 600 --chunk 50 --drop-chunks 4 --live 8 --stacks 6 --no-compress
g valid-future $small --no-compress --future
g valid-hostile $small --no-compress --hostile-strings
g valid-tiny --events 0 --live 0 --stacks 1 --markers-every 0 --no-compress
g valid-onechunk --events 1 --live 1 --chunk 1 --stacks 1 --no-compress
g valid-devices16 --events 40 --live 20 --stacks 4 --devices 16 --chunk 20 --no-compress
g valid-seqorder $small --no-compress --seq-order --devices 2
g valid-seqorder-zstd $small --seq-order
g valid-fw-torch $small --no-compress --framework torch --trigger framework-oom
g valid-fw-driver $small --no-compress --framework torch,cupy
g valid-fw-fraction $small --no-compress --framework torch --fraction 40 --trigger framework-oom
g valid-fw-nomodel $small --no-compress --framework torch --no-model --trigger framework-oom
g valid-fw-earlier $small --no-compress --fw-earlier
g valid-fw-earlier-jax $small --no-compress --fw-earlier --framework jax
g valid-fw-jax $small --no-compress --framework jax --trigger framework-oom
g valid-borrowed $small --no-compress --borrowed
g valid-ctx-ends $small --no-compress --ctx-ends

# Every way snapgen can damage a file (the list is snapgen's own, from its --help).
for mode in $("$SNAPGEN" --help | sed -n 's/^ *\(truncated,.*\)$/\1/p' | tr -d ','); do
    "$SNAPGEN" --seed 5 $small --corrupt "$mode" -o "$OUT/corrupt-$mode.oomt"
done

# Snapshots written by the tracer itself against the stand-in driver: real modules, symbols, stacks,
# Python frames, pools, VMM mappings.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
traced() {
    name=$1
    shift
    rm -rf "$tmp/d" && mkdir "$tmp/d"
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$tmp/d" OOMTRACE_QUIET=1 \
        OOMTRACE_RING=4096 LD_PRELOAD="$PWD/build/liboomtrace.so" "$@" >/dev/null || true
    i=0
    for f in "$tmp"/d/*.oomt; do
        [ -f "$f" ] || continue
        i=$((i + 1))
        cp "$f" "$OUT/real-$name-$i.oomt"
    done
}
traced door-linked build/tests/door_linked
OOMTRACE_DUMP=oom,exit traced door-dlsym build/tests/door_dlsym
traced python python3 tests/py/alloc_ctypes.py
traced python-borrowed python3 tests/py/borrow_native.py build/tests/libnative_thread.so
[ -x build/tests/contexts ] && traced contexts-reset build/tests/contexts reset
for fam in async vmm host; do
    [ -x build/tests/families ] && traced "families-$fam" build/tests/families "$fam"
done
# Only the smaller files of a family with many dumps: they repeat one another.
ls -S "$OUT"/real-families-vmm-*.oomt 2>/dev/null | head -n -3 | xargs -r rm -f

# Ring chunks for the target's RING mode: "RING", u16 event count, the chunk's raw bytes.
python3 - "$OUT" <<'EOF'
import struct, sys
out = sys.argv[1]

def uv(v):
    v &= (1 << 64) - 1
    b = bytearray()
    while True:
        c = v & 0x7f
        v >>= 7
        if v:
            b.append(c | 0x80)
        else:
            b.append(c)
            return bytes(b)

def sv(v):
    return uv((v << 1) ^ (v >> 63))

def ev(kind, api, cat, dev, dt, tid, addr_delta, size, stack, label=None):
    b = uv(kind) + uv(api) + uv(cat) + sv(dev) + uv(dt) + uv(tid) + sv(addr_delta) + uv(size) + uv(stack)
    if kind == 4:
        b += uv(len(label)) + label
    return b

def seed(name, events, tail=b""):
    raw = b"".join(events) + tail
    with open(f"{out}/ring-{name}", "wb") as f:
        f.write(b"RING" + struct.pack("<H", len(events)) + raw)

MiB = 1 << 20
seed("basic", [
    ev(1, 1, 1, 0, 10, 100, 0x7f0000000000, 256 * MiB, 1),
    ev(1, 1, 1, 0, 20, 100, 0x10000000, 128 * MiB, 2),
    ev(4, 0, 0, -1, 5, 100, 0, 0, 0, b"step 1"),
    ev(2, 2, 1, 0, 30, 100, -0x10000000, 128 * MiB, 3),
    ev(3, 1, 1, 0, 40, 101, 0, 700 * MiB, 4),
    ev(5, 14, 3, 0, 1, 102, 0x1000, 2 * MiB, 5),
    ev(6, 15, 3, 0, 1, 102, 0, 2 * MiB, 5),
])
# Extremes: 10-byte varints, negative devices and deltas, unknown kinds, empty and hostile labels.
big = (1 << 64) - 1
seed("extremes", [
    ev(1, big, big, -(1 << 63), big, big, -(1 << 63), big, big),
    ev(9, 0, 0, 1 << 40, 0, 0, (1 << 63) - 1, 0, 0),
    ev(4, 0, 0, 0, 0, 0, 0, 0, 0, b""),
    ev(4, 0, 0, 0, 0, 0, 0, 0, 0, b"\x1b[2J\xff\xfe\"\\\n\xc2\x85 label"),
    ev(2, 0, 7, -1, 1, 1, 1, 1, 1),
])
# Many one-byte events, then bytes after the last one (ignored, as appended fields would be).
seed("many", [ev(1 + i % 2, 1, 1, 0, 1, 1, 64 if i % 2 == 0 else -64, 64, i % 8) for i in range(400)],
     tail=b"\x80\x80\x01trailing")
EOF
ls -l "$OUT" | awk 'NR > 1 { n++; s += $5 } END { printf "%d seeds, %d bytes\n", n, s }'
