#!/bin/sh
# Runs the reader over snapgen output: every --corrupt mode must exit 2 with exactly one line on stderr
# and nothing on stdout; every valid variant must exit 0 in text and JSON, with JSON that parses.
#   READER=build/oomtrace-read SNAPGEN=build/snapgen tests/snapgen/check.sh
# Point READER at a sanitizer build to check memory safety as well (see tests/snapgen/README).
set -u
READER=${READER:-build/oomtrace-read}
SNAPGEN=${SNAPGEN:-build/snapgen}
TMP=${TMPDIR:-/tmp}/oomtrace-check.$$
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
fail=0
pass=0

bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for mode in $("$SNAPGEN" --help | sed -n 's/^ *\(truncated,.*\)$/\1/p' | tr -d ','); do
    f="$TMP/$mode.oomt"
    "$SNAPGEN" --seed 7 --events 20000 --chunk 1000 --corrupt "$mode" -o "$f" || { bad "snapgen $mode"; continue; }
    "$READER" "$f" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err")
    if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || [ -s "$TMP/out" ]; then
        bad "corrupt $mode: rc=$rc, $lines stderr lines, $(wc -c <"$TMP/out") stdout bytes"
        sed 's/^/    /' "$TMP/err"
    else
        pass=$((pass + 1))
        printf '  %-20s %s\n' "$mode" "$(cat "$TMP/err")"
    fi
done

# A file cut short says so first, in the user's words, and where it ends (walk 6, #12): the format's
# detail (section numbers, offsets) may follow, never lead.
for mode in truncated section-past-eof header-cut short-header; do
    f="$TMP/$mode.oomt"
    "$SNAPGEN" --seed 7 --events 20000 --chunk 1000 --corrupt "$mode" -o "$f" || { bad "snapgen $mode"; continue; }
    "$READER" "$f" >/dev/null 2>"$TMP/err"
    if grep -q "^[^:]*: $f: the snapshot is truncated: it ends at byte [0-9][0-9]* of at least [0-9][0-9]*, inside \(its\|the\) " "$TMP/err"; then
        pass=$((pass + 1))
    else
        bad "corrupt $mode does not lead with the truncation: $(cat "$TMP/err")"
    fi
done
printf 'OOMTRACE' >"$TMP/cut8.oomt"
"$READER" "$TMP/cut8.oomt" 2>&1 >/dev/null | grep -q ": the snapshot is truncated: it ends at byte 8 of at least 32, inside its file header" &&
    pass=$((pass + 1)) || bad "an 8-byte start of a snapshot is not called truncated"
printf 'not a snapshot\n' >"$TMP/text.oomt"
"$READER" "$TMP/text.oomt" 2>&1 >/dev/null | grep -q ": not an oomtrace snapshot" &&
    pass=$((pass + 1)) || bad "a 15-byte text file is not called 'not an oomtrace snapshot'"
: >"$TMP/empty.oomt"
"$READER" "$TMP/empty.oomt" 2>&1 >/dev/null | grep -q ": the file is empty" && pass=$((pass + 1)) || bad "an empty file"

check_valid() {
    name=$1
    shift
    f="$TMP/$name.oomt"
    "$SNAPGEN" "$@" -o "$f" || { bad "snapgen $name"; return; }
    for fmt in text json; do
        "$READER" --format $fmt "$f" >"$TMP/out" 2>"$TMP/err"
        rc=$?
        if [ "$rc" -ne 0 ] || [ -s "$TMP/err" ]; then
            bad "valid $name ($fmt): rc=$rc"
            sed 's/^/    /' "$TMP/err"
            continue
        fi
        if [ $fmt = json ] && ! python3 -m json.tool "$TMP/out" >/dev/null 2>"$TMP/jerr"; then
            bad "valid $name: JSON does not parse: $(cat "$TMP/jerr")"
            continue
        fi
        pass=$((pass + 1))
    done
}

check_valid default
check_valid exit --trigger exit
check_valid signal --trigger signal --devices 2
check_valid api --trigger api --devices 4 --live 500
check_valid flush --trigger flush --incomplete
check_valid nocompress --no-compress --events 5000
check_valid dropped --events 100000 --chunk 2000 --drop-chunks 10
check_valid future --future
check_valid seqorder --seq-order --devices 2 --live 300
check_valid seqorder-plain --seq-order --no-compress --trigger exit
check_valid hostile --hostile-strings
check_valid tiny --events 0 --live 0 --stacks 1 --markers-every 0
check_valid nomarkers --events 3000 --markers-every 0
check_valid real --real-stacks --stacks 20
check_valid borrowed --borrowed
check_valid borrowed-real --real-stacks --stacks 20 --borrowed --no-compress
check_valid ctx-ends --ctx-ends --devices 2
check_valid ctx-ends-plain --ctx-ends --no-compress --trigger exit --events 3000
check_valid onechunk --events 1 --live 1 --chunk 1
check_valid fw-torch --framework torch --trigger framework-oom
check_valid fw-torch-driver --framework torch --live 300
check_valid fw-fraction --framework torch --fraction 40 --trigger framework-oom --no-compress
check_valid fw-jax --framework jax --trigger framework-oom
check_valid fw-cupy --framework cupy,torch --trigger exit
check_valid fw-all --framework torch,jax,cupy --trigger framework-oom --hostile-strings --devices 2
check_valid fw-tiny --framework torch --events 0 --live 0 --stacks 1 --markers-every 0 --trigger framework-oom --probes 0

# Options of the reader itself.
f="$TMP/default.oomt"
for args in "--top 0" "--top 3 --frames 0" "--at peak" "--at failure" "--at live" "--frames 100" "--no-symbolize" \
    "--format json --top 1" "--debug-dir $TMP"; do
    # shellcheck disable=SC2086
    if "$READER" $args "$f" >"$TMP/out" 2>"$TMP/err" && [ ! -s "$TMP/err" ]; then
        pass=$((pass + 1))
    else
        bad "options $args"
    fi
done
"$READER" -o "$TMP/report.txt" "$f" && [ -s "$TMP/report.txt" ] && pass=$((pass + 1)) || bad "-o FILE"
# A --debug-dir that does not exist is a usage error (it was /nonexistent, which some hosts have: nobody's home).
for args in "--top" "--top x" "--at never" "--format xml" "--bogus" "" "$f $f" "$TMP/missing.oomt" \
    "--debug-dir $TMP/no-such-dir $f"; do
    # shellcheck disable=SC2086
    "$READER" $args >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ]; then pass=$((pass + 1)); else bad "usage '$args': rc=$rc"; fi
done

# Same options, same seed: same bytes.
"$SNAPGEN" --seed 42 --events 50000 -o "$TMP/d1.oomt" && "$SNAPGEN" --seed 42 --events 50000 -o "$TMP/d2.oomt"
cmp -s "$TMP/d1.oomt" "$TMP/d2.oomt" && pass=$((pass + 1)) || bad "snapgen output differs for the same seed"

echo "check: $pass passed, $fail failed"
[ $fail -eq 0 ]
