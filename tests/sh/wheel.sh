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

# The console scripts are Python, which ignores SIGPIPE and SIGXFSZ at start; the traced command and the reader
# must see the dispositions they would see untraced (a pipeline into head ends quietly; a write past
# RLIMIT_FSIZE kills). The command's ignored set is compared with the same shell's untraced one.
want=$(sh -c 'grep "^SigIgn:" /proc/self/status')
got=$(cd "$work" && "$work/venv/bin/oomtrace" run --dir sig -- sh -c 'grep "^SigIgn:" /proc/self/status' 2>/dev/null)
[ "$got" = "$want" ] || fail "the wheel's oomtrace run changed the command's ignored signals: '$got', untraced '$want'"
got=$("$py" -m oomtrace run --dir "$work/sig" -- sh -c 'grep "^SigIgn:" /proc/self/status' 2>/dev/null)
[ "$got" = "$want" ] || fail "python -m oomtrace run changed the command's ignored signals: '$got', untraced '$want'"

# SIGTERM to the console script's process id reaches the command, and the launcher still reports (exit 143).
(cd "$work" && exec "$work/venv/bin/oomtrace" run --dir term -- sh -c 'echo $$ >"$0"; exec sleep 30' "$work/term.pid") \
    >"$work/term.out" 2>&1 &
launcher=$!
n=0
until [ -s "$work/term.pid" ] && grep -q "^sleep" "/proc/$(cat "$work/term.pid")/cmdline" 2>/dev/null; do
    n=$((n + 1))
    [ "$n" -lt 200 ] || fail "the command under the wheel's oomtrace did not start"
    sleep 0.05
done
kill -TERM "$launcher"
wait "$launcher"
rc=$?
[ -d "/proc/$(cat "$work/term.pid")" ] && { kill "$(cat "$work/term.pid")"; fail "SIGTERM to the wheel's oomtrace left the command running"; }
[ "$rc" -eq 143 ] && grep -q "^oomtrace: SIGTERM passed on to sh" "$work/term.out" ||
    fail "SIGTERM to the wheel's oomtrace: status $rc: $(cat "$work/term.out")"

# What --help sends the user to is installed: the manual pages into the venv's share/man (where man finds them
# from the venv's bin/ on PATH), and every document the reader's --help and the manual name, with the README,
# into its share/doc/oomtrace.
for m in oomtrace oomtrace-read; do
    [ -f "$work/venv/share/man/man1/$m.1" ] || fail "the wheel installed no $m(1) in the venv's share/man/man1"
    if command -v man >/dev/null 2>&1; then
        [ "$(PATH="$work/venv/bin:$PATH" MANPATH='' man -w "$m" 2>/dev/null)" = "$work/venv/share/man/man1/$m.1" ] ||
            fail "man $m does not find the venv's page: $(PATH="$work/venv/bin:$PATH" man -w "$m" 2>&1)"
    fi
done
for d in README.md $("$work/venv/bin/oomtrace-read" --help 2>&1 | cat - "$work/venv/share/man/man1/oomtrace-read.1" |
    grep -o 'docs/[A-Z]*\.md' | sed 's|docs/||' | sort -u); do
    [ -f "$work/venv/share/doc/oomtrace/$d" ] || fail "the wheel did not install $d, which --help or the manual names"
done

# import oomtrace outside the tracer: the calls are no-ops.
"$py" -c 'import oomtrace; assert not oomtrace.active() and not oomtrace.mark("x") and not oomtrace.dump()' ||
    fail "import oomtrace in the venv"
# Walk 6, #13: a label that is not a str (a step number, a list) neither raises nor differs traced and untraced.
"$py" -c 'import oomtrace; assert not oomtrace.mark(["l"]) and not oomtrace.mark(10**9) and not oomtrace.dump(123)' ||
    fail "oomtrace.mark/dump with a label that is not a str, untraced"

# The README documents every public name of the module.
for name in $("$py" -c 'import oomtrace; print(" ".join(oomtrace.__all__ + ["__version__"]))'); do
    grep -q "\`oomtrace\.$name[(\`]" README.md || fail "README.md does not document oomtrace.$name"
done

# python -m oomtrace run: a Python program that marks a step and allocates from the stand-in driver.
cp tests/py/drv.py "$work/"
cat >"$work/train.py" <<'PY'
import sys
import oomtrace
from drv import cuda, ctypes
assert oomtrace.active(), "the library is not preloaded"
assert oomtrace.mark("step 1 from the wheel")
assert oomtrace.mark(987654) and oomtrace.mark(["a list"])  # str() of them, never bytes(987654) nor a raise
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 64 << 20) == 0
assert oomtrace.dump("after warm-up")
sys.exit(cuda.cuMemAlloc_v2(ctypes.byref(p), 4 << 30) == 2 and 7)  # out of memory: exit 7
PY
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1
(cd "$work" && "$py" -m oomtrace run --dir out -- "$py" train.py) >"$work/run.out" 2>&1
rc=$?
[ "$rc" -eq 7 ] || fail "python -m oomtrace run: exit status $rc, want the program's 7: $(tail -5 "$work/run.out")"
grep -q "step 1 from the wheel" "$work/run.out" || fail "the report lacks the marker from import oomtrace"
build/oomtrace-read --format json "$(ls "$work"/out/run-*/oomtrace-*-oom.oomt)" | grep -q '"label": "987654"' ||
    fail "oomtrace.mark(987654) is not the marker 987654"
grep -q "train.py:10" "$work/run.out" || fail "the report lacks the failing Python line"
ls "$work"/out/run-*/oomtrace-*-oom.oomt >/dev/null 2>&1 || fail "no out-of-memory snapshot in the run directory"
# oomtrace.dump()'s snapshot is named and titled in the program's words, not the trigger's internal "api".
dumped=$(ls "$work"/out/run-*/oomtrace-*-1-dump.oomt 2>/dev/null) || fail "no ...-1-dump.oomt: $(ls "$work"/out/run-*/)"
build/oomtrace-read "$dumped" >"$work/dump.out" 2>&1 || fail "reading the dump: $(tail -1 "$work/dump.out")"
head -1 "$work/dump.out" | grep -q "^oomtrace: snapshot requested by the program (oomtrace.dump / oomtrace_dump) in pid " &&
    sed -n 2p "$work/dump.out" | grep -q "^  reason: after warm-up\$" || fail "the dump's title: $(head -2 "$work/dump.out")"

# Walk 8, #31: the wheel carries what its library and reader need beyond the C library (a slim image has no
# libunwind8 or libdw1, and a preloaded library whose dependency is missing ends every command at start):
# libunwind and liblzma beside the library, found by its RPATH $ORIGIN; zstd, libdw and what it needs linked
# into the reader, zstd into the library.
pkgbin=$("$py" -c 'import os, oomtrace; print(os.path.join(os.path.dirname(oomtrace.__file__), "bin"))')
for f in liboomtrace.so oomtrace-read; do
    outside=$(ldd "$pkgbin/$f" | awk '$2 == "=>" { print $1, $3 }' |
        grep -v -E "^(libc|libm|libdl|libpthread|librt|libgcc_s)\.so|^linux-vdso" | grep -v " $pkgbin/")
    [ -z "$outside" ] || fail "the wheel's $f loads from outside the wheel: $(echo $outside)"
done
# The same run with the system's libunwind and libdw hidden (a private mount namespace: each bound over by
# /dev/null, which the loader reads as "file too short"), where a mount namespace can be had.
sysunw=$(readlink -f "$(ldd build/liboomtrace.so | awk '$1 == "libunwind.so.8" { print $3 }')")
sysdw=$(readlink -f "$(ldd build/oomtrace-read | awk '$1 == "libdw.so.1" { print $3 }')")
if [ -f "$sysunw" ] && [ -f "$sysdw" ] && unshare -rm true 2>/dev/null; then
    (cd "$work" && unshare -rm sh -c 'mount --bind /dev/null "$1" && mount --bind /dev/null "$2" || exit 3
        LD_PRELOAD="$3" /bin/true 2>/dev/null && exit 4 # hidden indeed: the library of the build tree fails to load
        exec "$4" run --dir hidden -- "$5" train.py' sh "$sysunw" "$sysdw" "$OLDPWD/build/liboomtrace.so" \
        "$work/venv/bin/oomtrace" "$py") >"$work/hidden.out" 2>&1
    rc=$?
    [ "$rc" -eq 7 ] && grep -q "step 1 from the wheel" "$work/hidden.out" ||
        fail "the wheel without the system's libunwind and libdw: status $rc: $(tail -3 "$work/hidden.out")"
fi

# Walk 6, #33: with standard error or standard output closed (a cron job, a daemon), the console scripts still
# run the command, as it runs untraced, and the reader still reads.
for closed in '2>&-' '>&-'; do
    rm -f "$work/ran"
    (cd "$work" && eval '"$work/venv/bin/oomtrace" run --dir closed -- touch "$work/ran"' "$closed") 2>/dev/null
    rc=$?
    [ "$rc" -eq 0 ] && [ -e "$work/ran" ] || fail "oomtrace run with $closed: status $rc, the command ran: $([ -e "$work/ran" ] && echo yes || echo no)"
    rm -f "$work/ran"
    (cd "$work" && eval '"$py" -m oomtrace run --dir closed -- touch "$work/ran"' "$closed") 2>/dev/null
    rc=$?
    [ "$rc" -eq 0 ] && [ -e "$work/ran" ] || fail "python -m oomtrace run with $closed: status $rc"
done
"$work/venv/bin/oomtrace-read" --version 2>&- | grep -q '^oomtrace-read ' || fail "oomtrace-read --version with standard error closed"
"$work/venv/bin/oomtrace" --help 2>&- | grep -q '^usage: oomtrace run ' || fail "oomtrace --help with standard error closed"

# The reader, as the README names it, from the venv's PATH (not site-packages/oomtrace/bin/), and as
# `oomtrace read` and `python -m oomtrace read`: the same report of the same run's directory.
rundir=$(ls -d "$work"/out/run-*)
PATH="$work/venv/bin:/usr/bin:/bin"
export PATH
command -v oomtrace-read | grep -q "^$work/venv/bin/oomtrace-read\$" || fail "no oomtrace-read on the venv's PATH"
oomtrace-read --top 3 "$rundir" >"$work/read1.out" 2>&1 || fail "oomtrace-read DIR: $(tail -1 "$work/read1.out")"
grep -q "step 1 from the wheel" "$work/read1.out" || fail "oomtrace-read DIR: no report: $(head -3 "$work/read1.out")"
oomtrace read --top 3 "$rundir" >"$work/read2.out" 2>&1 || fail "oomtrace read DIR: $(tail -1 "$work/read2.out")"
"$py" -m oomtrace read --top 3 "$rundir" >"$work/read3.out" 2>&1 || fail "python -m oomtrace read: $(tail -1 "$work/read3.out")"
cmp -s "$work/read1.out" "$work/read2.out" && cmp -s "$work/read1.out" "$work/read3.out" ||
    fail "oomtrace-read, oomtrace read and python -m oomtrace read differ"
# The reader into a pipe already closed (its reader, true, has exited) ends quietly by SIGPIPE (141), as the
# built reader does.
{ sleep 0.5; oomtrace-read "$rundir" 2>"$work/pipe.err"; echo $? >"$work/pipe.rc"; } | true
rc=$(cat "$work/pipe.rc")
[ "$rc" -eq 141 ] && [ ! -s "$work/pipe.err" ] ||
    fail "oomtrace-read | head: status $rc, want 141 and nothing on stderr: $(cat "$work/pipe.err")"
oomtrace-read --bogus >"$work/read4.out" 2>&1
[ $? -eq 2 ] && grep -q "^oomtrace-read: unknown option" "$work/read4.out" || fail "oomtrace-read's usage error: $(cat "$work/read4.out")"
echo "wheel: ok"
