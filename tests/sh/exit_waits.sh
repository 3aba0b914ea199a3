#!/bin/sh
# exit() or an exec while another thread writes its snapshot (walk 8, #33): the write was cut off with the
# process, and the process's first out-of-memory snapshot lost (a hidden unfinished file after exit, nothing
# after exec). The exit and the exec now wait for it, at most 5 seconds, and say one line when they give up.
# libfault's FAULT_SLOW_MS holds the worker's write at its start; hostile writerace exits (or execs) once the
# hidden file is there.
set -u
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/oomtrace-exitwaits.XXXXXX)
trap 'rm -rf "$work"' EXIT
NAME=exit_waits
. tests/sh/lib/cases.sh
race() { # race DIR SLOW_MS exit|exec [VAR=VALUE...]: stdout in $work/out, stderr in $work/err
    d=$1 slow=$2 how=$3
    shift 3
    mkdir "$d"
    env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$d" FAULT_SLOW_MS="$slow" \
        LD_PRELOAD="$PWD/build/tests/libfault.so:$PWD/build/liboomtrace.so" "$@" \
        build/tests/hostile writerace "$how" >"$work/out" 2>"$work/err"
}
files() { ls -A "$1" | sed 's/oomtrace-[^-]*-[0-9]*-//' | sort | tr '\n' ' '; }

race "$work/exit" 500 exit
st=$?
grep -q '^writing 1$' "$work/out" || bad "the exit came before the write began: $(cat "$work/out")"
if [ "$st" = 0 ] && [ "$(files "$work/exit")" = "1-oom.oomt " ]; then ok; else
    bad "exit during the OOM snapshot's write: status $st, files $(files "$work/exit"): $(cat "$work/err")"
fi
# With the exit snapshot too: it follows the OOM snapshot, in number as in time.
race "$work/exit2" 500 exit OOMTRACE_DUMP=oom,exit
st=$?
if [ "$st" = 0 ] && [ "$(files "$work/exit2")" = "1-oom.oomt 2-exit.oomt " ]; then ok; else
    bad "exit (with its snapshot) during the OOM snapshot's write: status $st, files $(files "$work/exit2"): $(cat "$work/err")"
fi
race "$work/exec" 500 exec
st=$?
if [ "$st" = 0 ] && [ "$(files "$work/exec")" = "1-oom.oomt " ]; then ok; else
    bad "exec during the OOM snapshot's write: status $st, files $(files "$work/exec"): $(cat "$work/err")"
fi
for d in exit exec; do
    set -- "$work/$d"/oomtrace-*-1-oom.oomt
    if build/oomtrace-read "$1" >"$work/report" 2>&1 && grep -q '^oomtrace: CUDA OUT OF MEMORY' "$work/report"; then ok; else
        bad "the $d case's OOM snapshot reads: $(head -3 "$work/report")"
    fi
done
# A writer that does not finish: the exit gives up after 5 s with one line, and exits as it would.
race "$work/stuck" 8000 exit
st=$?
if [ "$st" = 0 ] && grep -q '^oomtrace: exit while 1 snapshot was still being written by other threads after 5 s of waiting; the process ends without it$' "$work/err"; then
    ok
else
    bad "a writer stuck for 8 s: status $st, $(cat "$work/err")"
fi
summary
