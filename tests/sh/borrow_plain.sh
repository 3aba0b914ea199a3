#!/bin/sh
# A borrow's check reads the lender's frames with plain loads while no unmap came since it last read them
# through the kernel (Python 3.11-3.13: lib/capture/pyborrow.c, lib/common/unmaps.c). Each process_vm_readv
# cost the H200 ~5-6 us, one or two a training step (docs/PERFORMANCE.md, issue 16's eleventh pass).
#  1. The borrowing thread's process_vm_readv calls do not grow with the steps: bench/borrow_steps.py, 20 and
#     80 steps (a forward of own allocations, then borrowed ones), counted with strace. Before, each step
#     read once or more: 60 steps more made 60 reads more or over.
#  2. Under an arena allocator the program set (tests/py/arena_custom.py: one that may free the frame stacks
#     by any route), no plain loads: the reads grow with the steps again.
#  3. The lender's frame stack unmapped under the borrowing thread: tests/py/borrow_unmap.py, a thread that
#     allocates without pause while the main thread waits at the bottom of recursions of changing depth,
#     whose chunks CPython unmaps as they empty. The process must end as it would untraced.
set -u
cd "$(dirname "$0")/../.."
. tests/py/cpython.sh
ROOT=$PWD
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run_env() {
    LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1T OOMTRACE_DUMP=none OOMTRACE_QUIET=1 OOMTRACE_FRAMEWORKS=0 "$@"
}
reads() { # the borrowing threads' calls in a strace -f file (the main thread's id is the first line's)
    awk 'NR == 1 {main = $1} $1 != main && /process_vm_readv/ {n++} END {print n + 0}' "$1"
}
counted() { # SCRIPT: the borrowing threads' reads in 20 steps and in 80, under $py
    for steps in 20 80; do
        run_env strace -f -qq -e trace=process_vm_readv -o "$out/trace$steps" \
            env LD_PRELOAD="$ROOT/build/liboomtrace.so" "$py" "$1" "$ROOT/build/tests/libnative_thread.so" \
            "$steps" 0.002 >/dev/null || echo "python3.$v $1 $steps exited $?" >>"$out/exits"
    done
    echo "$(reads "$out/trace20") $(reads "$out/trace80")"
}
passed=0
failed=0
fail() {
    echo "borrow_plain: FAIL: $*"
    failed=$((failed + 1))
}
exits() { # a process counted() ran that did not end well
    [ -s "$out/exits" ] && fail "$(cat "$out/exits")"
    rm -f "$out/exits"
}
for v in 11 12 13; do
    py=$(cpython "$v")
    [ -n "$py" ] || { echo "borrow_plain: no python3.$v here; not run"; continue; }
    if command -v strace >/dev/null; then
        set -- $(counted bench/borrow_steps.py)
        exits
        if [ $(($2 - $1)) -ge 20 ]; then
            fail "python3.$v: the borrowing thread read $1 times in 20 steps and $2 in 80 (want fewer than 20 more)"
        else
            echo "borrow_plain: python3.$v ok (the borrowing thread read $1 times in 20 steps, $2 in 80)"
            passed=$((passed + 1))
        fi
        set -- $(counted tests/py/arena_custom.py) # 2.
        exits
        if [ $(($2 - $1)) -lt 60 ]; then
            fail "python3.$v, an arena allocator of the program's: $1 reads in 20 steps, $2 in 80 (want 60 more or over: no plain loads)"
        else
            echo "borrow_plain: python3.$v with the program's arena allocator ok ($1 reads in 20 steps, $2 in 80)"
            passed=$((passed + 1))
        fi
    else
        echo "borrow_plain: no strace: the reads are not counted"
    fi
    if got=$(run_env env LD_PRELOAD="$ROOT/build/liboomtrace.so" "$py" tests/py/borrow_unmap.py \
        "$ROOT/build/tests/libnative_thread.so" 2 2>"$out/err"); then
        echo "borrow_plain: python3.$v unmapped under the borrower: ok ($got)"
        passed=$((passed + 1))
    else
        fail "python3.$v tests/py/borrow_unmap.py exited $?: $(tail -n 3 "$out/err")"
    fi
done
echo "borrow_plain: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
