#!/bin/sh
# make wheel, then the wheel installed offline into a fresh virtual environment, as a PyTorch user installs
# tools: `oomtrace --help`, `python -m oomtrace run -- CMD` on a traced stand-in-driver program, and
# `import oomtrace` whose mark() reaches the preloaded library (its marker is in the report).
set -u
cd "$(dirname "$0")/../.."
fail() { echo "wheel: FAIL: $*"; exit 1; }
PYTHON=${PYTHON:-python3}
make -s wheel >/dev/null || fail "make wheel"
whl=$(ls build/oomtrace-*.whl 2>/dev/null | head -1)
[ -n "$whl" ] || fail "make wheel wrote no build/oomtrace-*.whl"
work=$(mktemp -d /tmp/oomtrace-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv" || fail "$PYTHON -m venv"
py=$work/venv/bin/python
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$py" -m pip install -q --no-index "$whl" >"$work/pip.out" 2>&1 ||
    fail "pip install: $(tail -3 "$work/pip.out")"

# The console script, and the usage text (not the launcher's source).
"$work/venv/bin/oomtrace" --help >"$work/help.out" 2>&1 || fail "oomtrace --help exit status"
head -1 "$work/help.out" | grep -q '^usage: oomtrace run ' || fail "oomtrace --help: $(head -2 "$work/help.out")"

# import oomtrace outside the tracer: the calls are no-ops.
"$py" -c 'import oomtrace; assert not oomtrace.active() and not oomtrace.mark("x") and not oomtrace.dump()' ||
    fail "import oomtrace in the venv"

# python -m oomtrace run: a Python program that marks a step and allocates from the stand-in driver.
cat >"$work/train.py" <<'PY'
import ctypes, sys
import oomtrace
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
assert oomtrace.active(), "the library is not preloaded"
assert oomtrace.mark("step 1 from the wheel")
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 64 << 20) == 0
sys.exit(cuda.cuMemAlloc_v2(ctypes.byref(p), 4 << 30) == 2 and 7)  # out of memory: exit 7
PY
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1
(cd "$work" && "$py" -m oomtrace run --dir out -- "$py" train.py) >"$work/run.out" 2>&1
rc=$?
[ "$rc" -eq 7 ] || fail "python -m oomtrace run: exit status $rc, want the program's 7: $(tail -5 "$work/run.out")"
grep -q "step 1 from the wheel" "$work/run.out" || fail "the report lacks the marker from import oomtrace"
grep -q "train.py:9" "$work/run.out" || fail "the report lacks the failing Python line"
ls "$work"/out/run-*/oomtrace-*-oom.oomt >/dev/null 2>&1 || fail "no out-of-memory snapshot in the run directory"
echo "wheel: ok"
