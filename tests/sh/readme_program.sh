#!/bin/sh
# The README's own driver-API program ("Without a GPU"), compiled and run exactly as the README writes it:
# its C block saved as my_prog.c, then its two shell lines, in a scratch directory whose build/ is this
# one. It must compile against the toolkit's cuda.h (CUDA 13: cuCtxCreate's v4 signature), fail its 2 GiB
# request on the simulated 1 GiB device, and be reported with its own file:line.
set -u
cd "$(dirname "$0")/../.."
root=$PWD
fail() { echo "readme_program: FAIL: $*"; exit 1; }
[ -f /usr/local/cuda/include/cuda.h ] || { echo "readme_program: skipped, no /usr/local/cuda/include/cuda.h"; exit 0; }
work=$(mktemp -d /tmp/oomtrace-readme.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The first ```c block after "**Without a GPU**", and the ```sh block after it.
python3 - README.md "$work" <<'PY' || fail "no C example and shell lines under 'Without a GPU' in README.md"
import re, sys
s = open(sys.argv[1], encoding="utf-8").read()
part = s[s.index("**Without a GPU**"):]
c = re.search(r"```c\n(.*?)```", part, re.S)
sh = re.search(r"```sh\n(.*?)```", part[c.end():], re.S)
open(sys.argv[2] + "/my_prog.c", "w").write(c.group(1))
open(sys.argv[2] + "/commands.sh", "w").write(sh.group(1))
PY
ln -s "$root/build" "$work/build"
grep -q "my_prog.c" "$work/commands.sh" && grep -q "oomtrace run" "$work/commands.sh" || fail "the shell lines: $(cat "$work/commands.sh")"
(cd "$work" && OOMTRACE_QUIET=1 sh -e commands.sh) >"$work/out" 2>&1
rc=$?
[ -x "$work/my_prog" ] || fail "the README's program did not compile: $(grep -m3 'error' "$work/out")"
[ "$rc" -eq 1 ] || fail "exit status $rc, want the program's 1 (its 2 GiB request refused): $(tail -3 "$work/out")"
grep -q "^Failed request: 2.00 GiB" "$work/out" || fail "no failed 2 GiB request in the report: $(head -5 "$work/out")"
grep -q "grab (my_prog.c:[0-9]*)" "$work/out" || fail "the report does not name grab (my_prog.c:N)"
ls "$work"/oomtrace-out/run-*/oomtrace-*-oom.oomt >/dev/null 2>&1 || fail "no out-of-memory snapshot in ./oomtrace-out/run-*"
# The README's other way, cuCtxCreate with NULL params (CUDA 13's v4), compiles and allocates on the stand-in.
cat >"$work/ctx.c" <<'C'
#include <cuda.h>
int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&ctx, NULL, 0, dev) || cuMemAlloc(&p, 1 << 20))
        return 1;
    return cuMemFree(p) || cuCtxDestroy(ctx);
}
C
cc -I/usr/local/cuda/include "$work/ctx.c" -L"$root/build/fake" -lcuda -o "$work/ctx" >"$work/ctx.out" 2>&1 ||
    fail "cuCtxCreate(&ctx, NULL, 0, dev) does not compile: $(grep -m2 error "$work/ctx.out")"
LD_LIBRARY_PATH="$root/build/fake" "$work/ctx" || fail "cuCtxCreate(&ctx, NULL, 0, dev) on the stand-in: status $?"
# The README's Python way onto the stand-in (ctypes, import oomtrace), run from the source tree as written: the
# report shows the program's markers and Python lines.
python3 - README.md "$work" <<'PY' || fail "no shell line running tests/demo/train_sim.py in README.md"
import re, sys
s = open(sys.argv[1], encoding="utf-8").read()
part = s[s.index("**Without a GPU**"):]
sh = next(b for b in re.findall(r"```sh\n(.*?)```", part, re.S) if "tests/demo/train_sim.py" in b)
open(sys.argv[2] + "/python.sh", "w").write(sh)
PY
OOMTRACE_DIR=$work/py OOMTRACE_QUIET=1 sh -e "$work/python.sh" >"$work/py.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "train_sim.py as the README runs it: status $rc, want its 1 (out of memory): $(tail -3 "$work/py.out")"
grep -q 'marker "step 5 seq_len=16384"' "$work/py.out" && grep -q "train_sim.py:[0-9]* in device_alloc" "$work/py.out" ||
    fail "train_sim.py's report lacks its markers or Python lines: $(head -5 "$work/py.out")"
echo "readme_program: ok"
