#!/bin/sh
# Hostile files (issue 15, defects 12 and 13): the reader refuses streams, devices and FIFOs at once with
# exit 2 and one line; directory mode never opens a FIFO named *.oomt, prints one summary line for the
# bad files and exits 2 when any is bad. Every reader run is under `timeout`, so a hang fails, not stalls.
set -u
cd "$(dirname "$0")/../.."
R=build/oomtrace-read
G=build/snapgen
[ -x "$R" ] && [ -x "$G" ] || { echo "hostile_files: build/oomtrace-read or build/snapgen missing (make test-build)"; exit 1; }
T=$(mktemp -d /tmp/oomtrace-hostile-XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# exit status $1 and exactly one line on stderr, within 5 s, for the reader run with the other arguments
expect_one_line() {
    want=$1
    shift
    timeout -k 1 5 "$R" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    lines=$(wc -l <"$T/err")
    [ "$rc" -eq "$want" ] || fail "$*: exit $rc, want $want ($(head -c 200 "$T/err"))"
    [ "$lines" -eq 1 ] || fail "$*: $lines lines on stderr, want 1"
}

expect_one_line 2 /dev/zero
expect_one_line 2 - </dev/zero
mkfifo "$T/pipe.oomt"
expect_one_line 2 "$T/pipe.oomt"

# A stream the user names (walk 7, #32: `oomtrace-read /dev/stdin`, `<(zstdcat S.zst)`, a FIFO with a
# writer) is read like -: the same report as the file's.
"$G" -o "$T/named.oomt" >/dev/null 2>&1 || fail "snapgen named"
timeout -k 1 5 "$R" "$T/named.oomt" >"$T/want" 2>&1
timeout -k 1 5 "$R" /dev/stdin <"$T/named.oomt" >"$T/got" 2>&1 || fail "/dev/stdin: $(head -c 200 "$T/got")"
cmp -s "$T/want" "$T/got" || fail "/dev/stdin: not the file's report"
mkfifo "$T/fed.oomt"
cat "$T/named.oomt" >"$T/fed.oomt" &
timeout -k 1 5 "$R" "$T/fed.oomt" >"$T/got" 2>&1 || fail "a named FIFO with a writer: $(head -c 200 "$T/got")"
wait
grep -q "$(head -n 1 "$T/want")" "$T/got" || fail "a named FIFO with a writer: not the file's report"

# A directory: one good snapshot, a FIFO and two damaged files. The report of the good one comes out,
# then one line for the three others, and exit 2.
mkdir "$T/d"
"$G" -o "$T/d/a-good.oomt" >/dev/null 2>&1 || fail "snapgen"
mkfifo "$T/d/b-fifo.oomt"
"$G" --corrupt section-past-eof -o "$T/d/c-bad.oomt" >/dev/null 2>&1
printf 'not a snapshot' >"$T/d/d-text.oomt"
expect_one_line 2 "$T/d"
grep -q "3 of 4" "$T/err" || fail "directory: the summary line does not count 3 of 4 bad files: $(cat "$T/err")"
[ -s "$T/out" ] || fail "directory: no report for the readable snapshot"

# Small files that claim huge or quadratic work (tests/snapgen/bombs.c), each after a valid snapshot's
# sections: refused with one line, or read, within the memory bound 64 x the file's size + 64 MiB (peak
# RSS by /usr/bin/time). Their times are figures in docs/RELIABILITY.md, not checked here.
B=build/bombs
if [ -x "$B" ] && [ -x /usr/bin/time ]; then
    "$G" --live 100 --events 1000 -o "$T/base.oomt" >/dev/null 2>&1 || fail "snapgen base"
    for k in live-seq peaks peak-refs events; do
        "$B" "$k" "$T/$k.oomt" "$T/base.oomt" || { fail "bombs $k"; continue; }
        size=$(stat -c %s "$T/$k.oomt")
        for fmt in text html; do
            timeout -k 1 60 /usr/bin/time -f "%M" -o "$T/rss" "$R" --format "$fmt" -o "$T/out.$fmt" "$T/$k.oomt" 2>"$T/err"
            rc=$?
            rss_kb=$(tail -n 1 "$T/rss")
            limit_kb=$(((64 * size + 64 * 1024 * 1024) / 1024))
            case $rc in
            0) ;;
            2) [ "$(wc -l <"$T/err")" -eq 1 ] || fail "$k $fmt: exit 2 with $(wc -l <"$T/err") lines" ;;
            *) fail "$k $fmt: exit $rc" ;;
            esac
            [ "${rss_kb:-0}" -le "$limit_kb" ] 2>/dev/null || fail "$k $fmt: peak RSS ${rss_kb} KB over ${limit_kb} KB"
            echo "hostile_files: $k ($size bytes) $fmt: exit $rc, peak RSS $rss_kb KB"
        done
    done
else
    fail "build/bombs or /usr/bin/time missing"
fi

[ "$fails" -eq 0 ] && echo "hostile_files: all passed"
[ "$fails" -eq 0 ]
