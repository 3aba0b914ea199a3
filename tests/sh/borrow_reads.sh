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
# A borrow that checks the lender reads its thread state and innermost frame in one vectored call (the only
# reads with more than one buffer); the first borrow's walk and the frames' first interning read one
# buffer each. The checks: at each wait's start and every 32nd borrow, about 6 for 128 borrows.
total=$(grep -c process_vm_readv "$out/trace" || true)
checks=$(grep -c 'process_vm_readv([0-9]*, \[{[^]]*}, {' "$out/trace" || true)
if [ "$checks" -ge 16 ]; then
    echo "borrow_reads: FAIL: $checks reads of the lender's innermost frame for 128 borrowed allocations (want < 16; $total process_vm_readv calls in all)"
    exit 1
fi
echo "borrow_reads: ok ($checks checks of the lender for 128 borrowed allocations, $total process_vm_readv calls in all)"
