#!/bin/sh
# A borrow's check of the lender reads the lender's frames in the thread's data stack, where it reads them
# through the kernel (the first check after a walk, or after an unmap: tests/sh/borrow_plain.sh), with one
# system call of one buffer (Python 3.11-3.13): the main thread's state (in _PyRuntime) and what lies on its C stack
# (3.11 and 3.12's _PyCFrame, 3.12 and 3.13's C-stack shim frames) are read with plain loads, since neither
# is ever unmapped (lib/capture/pyborrow.c: on_main_stack). Each buffer cost the H200 about a microsecond
# (docs/PERFORMANCE.md, issue 16's tenth pass); before, a check after the lender's forward read 2 buffers and
# one while it waited all along 3 (3.12). bench/borrow_steps.py, 20 steps: a forward of 8 own allocations,
# then 40 borrowed ones; every process_vm_readv of the borrowing thread counted by its buffers (strace).
set -u
cd "$(dirname "$0")/../.."
command -v strace >/dev/null || { echo "borrow_buffers: SKIP (no strace)"; exit 0; }
. tests/py/cpython.sh
ROOT=$PWD
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ran=0
for v in 11 12 13; do
    py=$(cpython "$v")
    [ -n "$py" ] || { echo "borrow_buffers: no python3.$v here; not run"; continue; }
    LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1T OOMTRACE_DUMP=none OOMTRACE_QUIET=1 OOMTRACE_FRAMEWORKS=0 \
        strace -f -qq -e trace=process_vm_readv -o "$out/trace" \
        env LD_PRELOAD="$ROOT/build/liboomtrace.so" "$py" bench/borrow_steps.py "$ROOT/build/tests/libnative_thread.so" 20 0.002 ||
        { echo "borrow_buffers: FAIL: python3.$v bench/borrow_steps.py exited $?"; exit 1; }
    # strace -f writes the thread's id first: the main thread's is the process's, the first line's. A read of
    # one object cut at a page boundary (pyintern.c: read_some, a frame's first sight) has elements that
    # follow each other; a check's buffers do not.
    set -- $("${PYTHON:-python3}" - "$out/trace" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
main = lines[0].split()[0] if lines else ""
calls = multi = 0
for line in lines:
    if line.split()[0] == main or "process_vm_readv(" not in line:
        continue
    calls += 1
    # the remote buffers: addresses (strace shows the local ones as their bytes, quoted)
    remote = [(int(b, 16), int(n)) for b, n in re.findall(r"iov_base=(0x[0-9a-f]+), iov_len=(\d+)", line)]
    if any(remote[i][0] != remote[i - 1][0] + remote[i - 1][1] for i in range(1, len(remote))):
        multi += 1
print(calls, multi)
PY
)
    calls=$1 multi=$2
    if [ "$calls" -lt 20 ]; then
        echo "borrow_buffers: FAIL: python3.$v: the borrowing thread read the lender $calls times in 20 steps (want one check a step at least)"
        exit 1
    fi
    if [ "$multi" -ne 0 ]; then
        echo "borrow_buffers: FAIL: python3.$v: $multi of the borrowing thread's $calls reads had buffers apart (want none)"
        exit 1
    fi
    echo "borrow_buffers: python3.$v ok ($calls reads by the borrowing thread, none of buffers apart)"
    ran=$((ran + 1))
done
echo "borrow_buffers: ok ($ran versions)"
