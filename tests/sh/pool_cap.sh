#!/bin/sh
# A request refused by a pool's maximum size gets a Why and a remedy (walk 7, #31): hostile poolcap makes a pool
# with maxSize 256 MiB, takes 200 MiB from it, then asks 100 MiB, refused with 824 MiB free on the device. The
# report said only "not larger than the free memory" and had nothing to try. A plain allocation within the free
# memory (not from a pool) does not get the statement.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "pool_cap: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-poolcap.XXXXXX)
trap 'rm -rf "$work"' EXIT
LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$work" LD_PRELOAD="$PWD/build/liboomtrace.so" \
    build/tests/hostile poolcap 2>"$work/err" || fail "hostile poolcap: $(cat "$work/err")"
set -- "$work"/oomtrace-*-oom.oomt
build/oomtrace-read "$1" >"$work/report" || fail "the reader: $(cat "$work/report")"
grep -q "^  - The request of 100 MiB was made from a memory pool (cuMemAllocFromPoolAsync) while device 0 had 824 MiB free: a pool created with a maximum size (cuMemPoolCreate's maxSize) refuses .*; the 1 pool the program created on it reserved 200 MiB and used 200 MiB" "$work/report" ||
    fail "no Why for the pool's cap: $(sed -n '/^Why/,/^$/p' "$work/report")"
sed -n '/^What to try/,/^$/p' "$work/report" | grep -q 'raise maxSize when the pool is created .* 200 MiB + 100 MiB, or make this allocation from another pool' ||
    fail "no remedy for the pool's cap: $(sed -n '/^What to try/,/^$/p' "$work/report")"
build/oomtrace-read --format json "$1" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
w = [x for x in j["why"] if x["kind"] == "pool_cap"]
r = [x for x in j["what_to_try"] if x["kind"] == "pool_cap"]
ok = w and w[0]["numbers"]["used_bytes"] == 200 << 20 and r and r[0]["numbers"]["needed_bytes"] == 300 << 20
sys.exit(0 if ok else "JSON: %r %r" % (w, r))' || fail "JSON pool_cap"
# Not for a plain allocation within the free memory.
for f in tests/h200/*.oomt; do
    build/oomtrace-read --format json "$f" 2>/dev/null | grep -q '"kind": *"pool_cap"' && fail "$f: a pool_cap statement"
done
echo "pool_cap: ok"
