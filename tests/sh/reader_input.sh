#!/bin/sh
# What the reader is given, and where its output goes (walk 8): a large file that is no snapshot (#9); -o - (#17);
# two snapshots joined, and bytes appended to one (#10); --diff of two unrelated programs (#6).
set -u
cd "$(dirname "$0")/../.."
fail() { echo "reader_input: FAIL: $*"; exit 1; }
READER=${READER:-$PWD/build/oomtrace-read}
work=$(mktemp -d /tmp/oomtrace-input.XXXXXX)
trap 'rm -rf "$work"' EXIT

# #9: a 1 GiB file that is no snapshot (a checkpoint, a core file) is refused by its first bytes, before it is
# read: under a 512 MiB address-space limit the reader says it is no snapshot, not that it ran out of memory.
truncate -s 1G "$work/sparse.oomt" || fail "truncate"
out=$( (ulimit -v 524288 && "$READER" "$work/sparse.oomt") 2>&1)
rc=$?
[ "$rc" -eq 2 ] && [ "$out" = "oomtrace-read: $work/sparse.oomt: not an oomtrace snapshot (its first bytes are not a snapshot's)" ] ||
    fail "a 1 GiB file that is no snapshot: status $rc: $out"

# #17: -o - is standard output, never a file named "-".
mkdir "$work/snaps"
(cd "$work/snaps" && LD_LIBRARY_PATH="$OLDPWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DUMP=oom,exit \
    LD_PRELOAD="$OLDPWD/build/liboomtrace.so" "$OLDPWD/build/tests/door_linked") >/dev/null 2>&1 || fail "door_linked"
oom=$(ls "$work"/snaps/*-oom.oomt | head -1)
(cd "$work" && "$READER" -o - "$oom" >"$work/dash.out" 2>&1) || fail "-o -: $(cat "$work/dash.out")"
[ -e "$work/-" ] && fail "-o - wrote a file named '-'"
"$READER" "$oom" | cmp -s - "$work/dash.out" || fail "-o - is not the report on standard output: $(head -2 "$work/dash.out")"

# Walk 11, #4: one of the reader's own reports passed back to it (or a checkpoint) is named, from a file and from
# standard input, with the file to give instead.
for fmt in json html markdown memviz text; do
    "$READER" --format $fmt -o "$work/report.$fmt" "$oom" 2>/dev/null || fail "--format $fmt"
    out=$("$READER" "$work/report.$fmt" 2>&1)
    rc=$?
    [ "$rc" -eq 2 ] && printf '%s\n' "$out" | grep -q "^oomtrace-read: $work/report.$fmt: not an oomtrace snapshot but, by its first bytes, .*: give the .oomt snapshot (oomtrace-\*.oomt in the run's directory)\$" ||
        fail "a $fmt report read as a snapshot: status $rc: $out"
done
out=$("$READER" - <"$work/report.json" 2>&1)
[ "$out" = "oomtrace-read: -: not an oomtrace snapshot but, by its first bytes, a JSON document (oomtrace-read --format json writes one): give the .oomt snapshot (oomtrace-*.oomt in the run's directory)" ] ||
    fail "a JSON report on standard input: $out"
printf 'PK\003\004rest' >"$work/model.pt"
"$READER" "$work/model.pt" 2>&1 | grep -q "a zip archive (a torch.save checkpoint is one)" || fail "a checkpoint: $("$READER" "$work/model.pt" 2>&1)"

# #9: a valid header followed by a stream that does not end is read up to a bound (--max-memory when given, else
# the tracer's largest snapshot), then refused with one line, not until the machine runs out of memory.
out=$( { head -c 32 "$oom"; head -c 40000000 /dev/zero; } | "$READER" --max-memory 16M - 2>&1)
[ $? -eq 2 ] && [ "$out" = "oomtrace-read: -: the stream passed 16 MiB (--max-memory) and had not ended: a stream that does not end? Give a file, or --max-memory SIZE to read more" ] ||
    fail "an endless stream after a valid header: $out"

# #10: two snapshots joined (cat S S) are said as such, with where the second starts; bytes appended to a whole
# snapshot are said as a tail that is no part, not as a truncated "section 1414352719".
size=$(wc -c <"$oom")
cat "$oom" "$oom" >"$work/twice.oomt"
out=$("$READER" "$work/twice.oomt" 2>&1)
[ $? -eq 2 ] && [ "$out" = "oomtrace-read: $work/twice.oomt: a second snapshot starts at byte $size, after this one's last part (two files joined, as by cat A B?): read each file on its own" ] ||
    fail "two snapshots joined: $out"
for tail in garbage "a longer line of text appended to the snapshot by a script"; do
    { cat "$oom"; echo "$tail"; } >"$work/tail.oomt"
    out=$("$READER" "$work/tail.oomt" 2>&1)
    [ $? -eq 2 ] && [ "$out" = "oomtrace-read: $work/tail.oomt: the file ends with $((${#tail} + 1)) bytes after its last whole part (from byte $size) that are no part this reader knows: data appended to the snapshot, or a copy cut short?" ] ||
        fail "'$tail' appended: $out"
done

# helper-91 #1: a tail of zeros (a crash that left the file extended, a padded copy) is refused at its first
# header, before the file is read whole: a 20 GiB sparse tail costs a few reads, not 20 GiB of memory. So is a
# run of parts of an unknown kind past the reader's limit, which was skipped part by part.
cp "$oom" "$work/zeros.oomt"
truncate -s $((size + (20 << 30))) "$work/zeros.oomt"
out=$(ulimit -v 1000000; "$READER" "$work/zeros.oomt" 2>&1)
[ $? -eq 2 ] && [ "$out" = "oomtrace-read: $work/zeros.oomt: the file holds zeros from byte $size (of $((size + (20 << 30)))), where its next part should start: zero-filled after its last whole part, by a crash before the writer finished or by a copy?" ] ||
    fail "a zero-filled tail: $out"
rm -f "$work/zeros.oomt"
out=$( { cat "$oom"; head -c 240 /dev/zero; } | "$READER" - 2>&1)
[ $? -eq 2 ] && case $out in *"the file holds zeros from byte $size (of $((size + 240)))"*) true ;; *) false ;; esac ||
    fail "a zero-filled tail on standard input: $out"
python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<IIQQ", 999, 0, 0, 0) * 1025)' >"$work/unknown.bin"
cat "$oom" "$work/unknown.bin" >"$work/unknown.oomt"
out=$("$READER" "$work/unknown.oomt" 2>&1)
[ $? -eq 2 ] && [ "$out" = "oomtrace-read: $work/unknown.oomt: more than 1024 parts of kinds this reader does not know (the next at byte $((size + 1024 * 24))): a damaged file, or one from a far later version of oomtrace" ] ||
    fail "1025 parts of an unknown kind: $out"
head -c $((1024 * 24)) "$work/unknown.bin" | cat "$oom" - >"$work/unknown.oomt"
"$READER" "$work/unknown.oomt" >/dev/null 2>&1 || fail "1024 parts of an unknown kind are skipped"

# helper-91 #4: a write that fails says where and why in one line, the same in every mode.
if [ -w /dev/full ]; then
    mkdir -p "$work/two" && cp "$oom" "$work/two/"
    for mode in "-o /dev/full $oom" "-o /dev/full --diff $oom $oom" "-o /dev/full $work/two" "--format html $oom"; do
        # shellcheck disable=SC2086
        out=$("$READER" $mode 2>&1 >/dev/full)
        [ $? -eq 2 ] && case $out in "oomtrace-read: "*": write failed: No space left on device") true ;; *) false ;; esac &&
            [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "a full disk ($mode): $out"
    done
fi

# helper-91 #8, helper-92 #3: a stream is read once, so one given twice is refused before the second read.
out=$(cat "$oom" | "$READER" --diff - - 2>&1)
[ $? -eq 2 ] && [ "$out" = "oomtrace-read: - and - are the same stream, which is read once: give a file for one of them" ] ||
    fail "--diff - -: $out"
out=$(cat "$oom" | "$READER" --max-growth 10 --baseline - - 2>&1)
[ $? -eq 2 ] && case $out in *"are the same stream, which is read once"*) true ;; *) false ;; esac || fail "--baseline - -: $out"
if [ -e /dev/stdin ]; then
    out=$(cat "$oom" | "$READER" --diff - /dev/stdin 2>&1)
    [ $? -eq 2 ] && [ "$out" = "oomtrace-read: /dev/stdin and - are the same stream, which is read once: give a file for one of them" ] ||
        fail "--diff - /dev/stdin: $out"
fi
# A snapshot redirected from a file: one "-" reads it, two are refused (the first read leaves it at its end).
"$READER" --diff "$oom" - <"$oom" >/dev/null 2>&1 || fail "--diff FILE - with a file on standard input"
out=$("$READER" --diff - - <"$oom" 2>&1)
[ $? -eq 2 ] && case $out in *"are the same stream, which is read once"*) true ;; *) false ;; esac ||
    fail "--diff - - with a file on standard input: $out"

# #6: --diff of two programs that share no call site says so, and each side names its command, where a 401%
# regression was all it said.
cp tests/py/drv.py "$work/"
printf 'from drv import try_alloc\nassert try_alloc(64 << 20)[0] == 0\n' >"$work/other.py"
(cd "$work/snaps" && LD_LIBRARY_PATH="$OLDPWD/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DUMP=exit \
    LD_PRELOAD="$OLDPWD/build/liboomtrace.so" python3 "$work/other.py") >/dev/null 2>&1 || fail "other.py"
other=$(ls -t "$work"/snaps/*-exit.oomt | head -1)
"$READER" --diff "$oom" "$other" >"$work/diff.out" 2>&1 || fail "--diff: status $?: $(cat "$work/diff.out")"
grep -q "^  base: .*; oom snapshot of pid [0-9]*, $PWD/build/tests/door_linked\$" "$work/diff.out" &&
    grep -q "^  new:  .*; exit snapshot of pid [0-9]*, [^ ]*python3 $work/other.py\$" "$work/diff.out" &&
    grep -q "^  no call site in common: the two snapshots share no call site (different programs, or a baseline from another job?), so the change compares unrelated runs\$" "$work/diff.out" ||
    fail "--diff of unrelated programs: $(head -6 "$work/diff.out")"
"$READER" --format json --diff "$oom" "$other" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["no_site_in_common"] is True and "python3 " in d["new"]["command"], d' || fail "--diff JSON of unrelated programs"
"$READER" --diff "$oom" "$oom" | grep -q "no call site in common" && fail "a snapshot against itself has no site in common"

echo "reader_input: ok"
