#!/bin/sh
# A registered native thread's borrows (autograd's threads: a Python thread state, no frame) read the
# waiting thread's frames at most once per BORROW_QUICK_MAX borrows, not once per allocation: 128
# allocations in two waits at one place, process_vm_readv counted with strace. Before the borrower's own
# walks stopped counting as the lender's (lib/capture/pywalk.c, ot_py_stamp), each of the 128 read.
set -eu
cd "$(dirname "$0")/../.."
command -v strace >/dev/null || { echo "borrow_reads: SKIP (no strace)"; exit 0; }
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
ROOT=$PWD
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -n "${KEEP:-}" ] && trap 'cp "$out/trace" "$KEEP"; rm -rf "$out"' EXIT
LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1T OOMTRACE_DUMP=none OOMTRACE_QUIET=1 OOMTRACE_FRAMEWORKS=0 \
    strace -f -qq -e trace=process_vm_readv -o "$out/trace" \
    env LD_PRELOAD="$ROOT/build/liboomtrace.so" "$PY" tests/py/borrow_registered.py "$ROOT/build/tests/libnative_thread.so"
# The borrowing thread's reads: its first borrow's walk and the frames' first interning (~40 calls of one
# buffer), then a check of the lender at each wait's start and every 32nd borrow, about 6 for 128 borrows
# (one call each: of one buffer on 3.11-3.13, tests/sh/borrow_buffers.sh). A read at each borrow would make
# 128 more. strace -f writes the thread's id first: the main thread's is the first line's.
total=$(grep -c process_vm_readv "$out/trace" || true)
main=$(awk 'NR == 1 {print $1}' "$out/trace")
reads=$(awk -v main="$main" '$1 != main && /process_vm_readv/ {n++} END {print n + 0}' "$out/trace")
if [ "$reads" -ge 100 ]; then
    echo "borrow_reads: FAIL: the borrowing thread read $reads times for 128 borrowed allocations (want < 100: its walk and ~6 checks; $total process_vm_readv calls in all)"
    exit 1
fi
echo "borrow_reads: ok (the borrowing thread read $reads times for 128 borrowed allocations, its walk included; $total process_vm_readv calls in all)"
