#!/bin/sh
# The tracer's own writes never end the program (walk 8, #26, #27). Its stderr line into a pipe whose reader
# has gone (`python train.py 2>&1 | head`) raised SIGPIPE, and a snapshot written past a file size limit
# (`ulimit -f`) raised SIGXFSZ: both killed a program that had caught its OOM and would have gone on. Now the
# line is dropped and the snapshot's write fails with one line, and the program's own view of both signals
# (pending or not) is what it would be untraced.
set -u
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/oomtrace-hostsig.XXXXXX)
trap 'rm -rf "$work"' EXIT
NAME=host_signals
. tests/sh/lib/cases.sh
env_traced() { # DIR: the tracer's environment, as variables for env
    echo "LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1G OOMTRACE_DIR=$1 LD_PRELOAD=$PWD/build/liboomtrace.so"
}
# broken_pipe DIR PROGRAM ARGS...: traced, stdout in $work/out, stderr a pipe whose reader is closed before
# the program starts (no race with a reader that exits); prints the exit status as the shell gives it.
broken_pipe() {
    d=$1
    shift
    # shellcheck disable=SC2046
    env $(env_traced "$d") python3 -c '
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
with open(sys.argv[1], "w") as out:
    rc = subprocess.run(sys.argv[2:], stdout=out, stderr=w).returncode
print(rc if rc >= 0 else 128 - rc)' "$work/out" "$@"
}

# 27: the "snapshot written" line into a pipe nobody reads.
mkdir "$work/p"
st=$(broken_pipe "$work/p" build/tests/hostile oomloop 1)
if [ "$st" = 0 ] && grep -q '^failed 1$' "$work/out"; then ok; else
    bad "oomloop with stderr a pipe whose reader has gone: status $st (141 is SIGPIPE), out: $(cat "$work/out")"
fi
set -- "$work"/p/oomtrace-*-1-oom.oomt
if [ -f "$1" ]; then ok; else bad "no snapshot with stderr a broken pipe: $(ls -A "$work/p")"; fi
for pre in 0 1; do
    st=$(broken_pipe "$work/p" build/tests/hostile sigpending $pre)
    if [ "$st" = 0 ] && grep -q "^failed 1 sigpipe_pending $pre sigxfsz_pending $pre\$" "$work/out"; then ok; else
        bad "SIGPIPE blocked by the program (pending before: $pre): status $st, $(cat "$work/out")"
    fi
done

# 26: a file size limit smaller than the snapshot.
for pre in oomloop sigpending0 sigpending1; do
    rm -rf "$work/f"
    mkdir "$work/f"
    case $pre in
    oomloop) set -- oomloop 1; want='^failed 1$' ;;
    sigpending0) set -- sigpending 0; want='^failed 1 sigpipe_pending 0 sigxfsz_pending 0$' ;;
    *) set -- sigpending 1; want='^failed 1 sigpipe_pending 1 sigxfsz_pending 1$' ;;
    esac
    # shellcheck disable=SC2046
    (ulimit -f 2 && env $(env_traced "$work/f") build/tests/hostile "$@" >"$work/out" 2>"$work/err")
    st=$?
    if [ "$st" = 0 ] && grep -q "$want" "$work/out"; then ok; else
        bad "hostile $* under a 1 KiB file size limit: status $st (153 is SIGXFSZ), $(cat "$work/out" "$work/err")"
    fi
    if grep -q "^oomtrace: cannot write snapshot $work/f/oomtrace-[^/]*-1-oom\.oomt: File too large; removed the partial file\$" "$work/err"; then
        ok
    else
        bad "hostile $* under the file size limit, the line: $(cat "$work/err")"
    fi
    if [ -z "$(ls -A "$work/f")" ]; then ok; else bad "left under the file size limit: $(ls -A "$work/f")"; fi
done
# The note the library leaves for the launcher (OOMTRACE_OUTER_RUN) is a file write too: under `ulimit -f 0`.
mkdir "$work/n"
# shellcheck disable=SC2046
(ulimit -f 0 && env $(env_traced "$work/n") OOMTRACE_OUTER_RUN="$work/n" build/tests/hostile oomloop 1 >/dev/null 2>&1)
st=$?
if [ "$st" = 0 ]; then ok; else bad "the launcher's note under ulimit -f 0: status $st (153 is SIGXFSZ)"; fi
summary
