#!/bin/sh
# bench/hostile_inputs.sh: the reader's peak RSS and time on hostile inputs, against the bound of issue 15
# (peak RSS at most 64 x the file's size + 64 MiB, and 2 s), for docs/RELIABILITY.md.
#
#   bench/hostile_inputs.sh [DIR...]
#
# Reads every file of each DIR, and the four bombs of tests/snapgen/bombs.c (made here), with
# build/oomtrace-read in text and in HTML, each under /usr/bin/time. Prints one line per input over the
# bound or slower than 2 s, and per format the count, the exit statuses, the largest share of the bound
# and the slowest input. A typical call, after `make fuzz FUZZ_TIME=60`:
#   bench/hostile_inputs.sh build/fuzz/corpus tests/fuzz/corpus tests/fuzz/regressions
# Nothing is asserted (tests/sh/hostile_files.sh checks the bombs' memory); exit 1 only when it cannot run.
set -u
cd "$(dirname "$0")/.."
R=build/oomtrace-read
[ -x "$R" ] && [ -x /usr/bin/time ] || { echo "hostile_inputs: needs build/oomtrace-read and /usr/bin/time" >&2; exit 1; }
T=$(mktemp -d /tmp/oomtrace-hostile-inputs-XXXXXX)
trap 'rm -rf "$T"' EXIT

list=$T/inputs
: >"$list"
for d in "$@"; do
    find "$d" -maxdepth 1 -type f >>"$list"
done
if [ -x build/bombs ] && [ -x build/snapgen ]; then
    build/snapgen --live 100 --events 1000 -o "$T/base.oomt" >/dev/null 2>&1
    for k in live-seq peaks peak-refs events; do
        build/bombs "$k" "$T/bomb-$k.oomt" "$T/base.oomt" && echo "$T/bomb-$k.oomt" >>"$list"
    done
fi

# One line per run: FORMAT EXIT SECONDS PEAK_KB SIZE FILE; awk sums them up.
for fmt in text html; do
    while IFS= read -r f; do
        timeout -k 1 60 /usr/bin/time -f "%e %M" -o "$T/rm" "$R" --format "$fmt" -o "$T/out" "$f" >/dev/null 2>&1
        rc=$?
        echo "$fmt $rc $(tail -n 1 "$T/rm") $(stat -c %s "$f") $f"
    done <"$list"
done | awk '
{
    fmt = $1; rc = $2; secs = $3 + 0; kb = $4 + 0; size = $5 + 0; file = $6
    bound = (64 * size + 64 * 1048576) / 1024
    n[fmt]++
    if (rc == 0) ok[fmt]++; else if (rc == 2) refused[fmt]++; else { other[fmt]++; print fmt ": exit " rc ": " file }
    if (kb / bound > share[fmt]) { share[fmt] = kb / bound; share_at[fmt] = file " (" size " B, " kb " KB)" }
    if (secs >= slow[fmt]) { slow[fmt] = secs; slow_at[fmt] = file " (" size " B)" }
    if (kb > bound) print fmt ": OVER the memory bound: " file " (" size " B): " kb " KB, bound " int(bound) " KB"
    if (secs > 2) print fmt ": over 2 s: " file " (" size " B): " secs " s"
}
END {
    for (f in n)
        printf "%s: %d inputs: %d read (exit 0), %d refused (exit 2), %d other; largest peak RSS %.1f%% of its bound: %s; slowest %.2f s: %s\n",
            f, n[f], ok[f], refused[f], other[f], 100 * share[f], share_at[f], slow[f], slow_at[f]
}'
