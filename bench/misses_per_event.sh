#!/bin/sh
# Instructions and data-cache misses per event of the tracer's parts (cachegrind with a cache simulation),
# as the difference between two runs of one program that differ only in length, divided by the events
# between them (as bench/ir_per_event.sh does for instructions alone). In a step's mix the tracer's cost is
# its misses more than its instructions (docs/PERFORMANCE.md, issue 16's fifth pass on a step's capture).
#
#   bench/misses_per_event.sh EVENTS 'CMD SHORT' 'CMD LONG'
#   e.g. bench/misses_per_event.sh 4100 'python3.12 bench/step_mix.py 20 --loops 1' 'python3.12 bench/step_mix.py 60 --loops 1'
# Runs under LD_PRELOAD=build/liboomtrace.so (LIB= to name another, LIB=none untraced) against the stand-in
# driver, with a 32 KB 8-way I1, a 48 KB 12-way D1 and a 2 MB 16-way LL (I1=, D1= and LL= to change them:
# cachegrind's size,assoc,line). Prints per event: Ir, I1 misses, D1 misses (reads and writes) and LL misses,
# for the tracer (functions in lib/), its parts, the libc copies and compares it calls (memcmp, memcpy: the
# program's own are in them too), the program's own code (everything outside lib/) and the whole process.
# bench/host_misses.sh sets the program's own misses traced against untraced.
# (bench/ir_per_event.sh runs the two processes, with MISSES=1; bench/misses_summary.py reads them.)
MISSES=1 exec "$(dirname "$0")/ir_per_event.sh" "$@"
