#!/bin/sh
# A Python frame seen for the first time is interned with few reads (lib/capture/pyintern.c: read_some): the
# code object's fields in one process_vm_readv, its file and qualified names each in one with the string's
# header, its line table in one with its header. 40 functions each allocating once (~80 new frames: each
# function's line and the module's line that calls it): the calls of the process counted with strace. Before,
# each field, header and string was a call of its own: 1,316 calls (Python 3.11), ~16 a new frame; now ~4.
set -eu
cd "$(dirname "$0")/../.."
command -v strace >/dev/null || { echo "intern_reads: SKIP (no strace)"; exit 0; }
ROOT=$PWD
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cp tests/py/drv.py "$out/"
"${PYTHON:-python3}" - "$out/many.py" <<'PY'
import sys
defs = "".join(f"def f{i}():\n    return try_alloc(MiB)\n\n" for i in range(40))
calls = "".join(f"f{i}()\n" for i in range(40))
open(sys.argv[1], "w").write("from drv import try_alloc, MiB, cuda\ncuda.cuInit(0)\n" + defs + calls)
PY
LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1T OOMTRACE_DUMP=none OOMTRACE_QUIET=1 OOMTRACE_FRAMEWORKS=0 \
    strace -f -qq -e trace=process_vm_readv -o "$out/trace" \
    env LD_PRELOAD="$ROOT/build/liboomtrace.so" "${PYTHON:-python3}" "$out/many.py"
calls=$(grep -c process_vm_readv "$out/trace" || true)
if [ "$calls" -ge 600 ]; then
    echo "intern_reads: FAIL: $calls process_vm_readv calls for 40 call sites' first sight (want < 600: ~4 a new frame)"
    exit 1
fi
if [ "$calls" -lt 80 ]; then
    echo "intern_reads: FAIL: only $calls process_vm_readv calls: were the Python frames read at all?"
    exit 1
fi
echo "intern_reads: ok ($calls process_vm_readv calls for 40 call sites' first sight)"
