#!/bin/bash
# Issue 16's C pair on this machine, wall clock: tests/gpu/alloc_pair.c (cuMemAllocAsync + cuMemFreeAsync,
# 8 loops of 20,000 pairs, each process prints its least loop) against the stand-in driver, untraced and
# under each library given, in alternating processes (the order flips every round), all pinned to one CPU.
#
#   bench/c_pair.sh ROUNDS NAME=LIB[,VAR=VALUE] ...
#   bench/c_pair.sh 11 before=/tmp/old.so after=build/liboomtrace.so after_tsc0=build/liboomtrace.so,OOMTRACE_TSC=0
#
# Prints, per variant, the median and the least over the rounds of the processes' figures, and each over
# the untraced one. On a shared machine read the least: other work only ever adds to a loop's time.
set -uo pipefail
cd "$(dirname "$0")/.."
R=${1:?rounds}; shift
CPU=${CPU:-1}
BIN=$(mktemp /tmp/oomtrace-c-pair.XXXXXX)
trap 'rm -f "$BIN"' EXIT
cc -O2 -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$BIN" tests/gpu/alloc_pair.c -Lbuild/fake -lcuda || exit 2
run() { # run LIB ENV: one process's least loop, ns per pair
    env $2 LD_LIBRARY_PATH=build/fake FAKECUDA_CAPACITY=1T OOMTRACE_DUMP=none OOMTRACE_FRAMEWORKS=0 OOMTRACE_QUIET=1 \
        ${1:+LD_PRELOAD=$1} taskset -c "$CPU" "$BIN" 8 | sed 's/.*"min": \([0-9.]*\).*/\1/'
}
for r in $(seq 1 "$R"); do
    list=("untraced=" "$@")
    [ $((r % 2)) = 0 ] && mapfile -t list < <(printf '%s\n' "${list[@]}" | tac)
    for kv in "${list[@]}"; do
        name=${kv%%=*} rest=${kv#*=}
        lib=${rest%%,*} envs=
        [ "$rest" != "$lib" ] && envs=${rest#*,}
        echo "$name $(run "$lib" "$envs")"
    done
done | python3 -c '
import statistics, sys
d = {}
for line in sys.stdin:
    name, v = line.split()
    d.setdefault(name, []).append(float(v))
med0, min0 = statistics.median(d["untraced"]), min(d["untraced"])
for name, vs in d.items():
    med, low = statistics.median(vs), min(vs)
    print(f"{name:12s} median {med:7.1f} ns/pair, least {low:7.1f}; over untraced: median {med - med0:+7.1f}, least {low - min0:+7.1f} (n={len(vs)})")
'
