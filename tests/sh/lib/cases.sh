# Counted cases for a test script, sourced with NAME set: ok, bad MESSAGE, and summary, whose last line
# "NAME: N passed, N failed" is what tests/run.sh counts; summary's status is the script's.
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "$NAME: FAIL: $*"; }
summary() {
    echo "$NAME: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
