#!/bin/sh
# Other processes named (issue 12 item 6): each other process on the device with its name and whether it
# is a child of this process. tests/py/child_workers.py starts two children (standing for DataLoader
# workers that opened CUDA contexts: the stand-in NVML reports each child of the caller with 256 MiB) and
# runs out of memory; NVML also lists pid 4194342, whose name only NVML knows (nvmlSystemGetProcessName, as
# for a process in another PID namespace). The report names the children as children, gives the remedy
# for workers that touched CUDA, and carries names, commands and relations in JSON, markdown and HTML.
set -u
cd "$(dirname "$0")/../.."
READER=${READER:-build/oomtrace-read}
command -v python3 >/dev/null 2>&1 || { echo "other_processes: skipped, no python3"; exit 0; }
TMP=$(mktemp -d /tmp/oomtrace-others-XXXXXX)
trap 'rm -rf "$TMP"' EXIT INT TERM
failed=0
env LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G FAKECUDA_OTHER_USED=576M \
    FAKENVML_PROCS="children:268435456,4194342:67108864" FAKENVML_NAMES="4194342:/opt/batch/bin/other_job" \
    OOMTRACE_DIR="$TMP" OOMTRACE_QUIET=1 LD_PRELOAD="$PWD/build/liboomtrace.so" \
    python3 tests/py/child_workers.py >"$TMP/program.log" 2>&1
set -- "$TMP"/*.oomt
[ -f "$1" ] || { echo "other_processes: FAIL: no snapshot"; cat "$TMP/program.log"; exit 1; }
SNAP=$1
check() { # check FORMAT PATTERN WHAT
    "$READER" --format "$1" "$SNAP" >"$TMP/r" 2>&1 || { echo "other_processes: FAIL: $1: exit $?"; failed=1; }
    grep -Eq -- "$2" "$TMP/r" || { echo "other_processes: FAIL: $1: $3 (no line matching: $2)"; failed=1; }
}
check text 'pid [0-9]+ \(sleep, a child of this process\): 256 MiB' "a child named as a child in the statement"
check text 'pid 4194342 \(other_job, named by NVML\): 64\.0 MiB' "a process /proc does not show, named by NVML"
check text '^  - 2 child processes of this one hold 512 MiB, 50% of device 0 \(the largest: pid [0-9]+ \(sleep, a child of this process\), 256 MiB\): a child that touched CUDA opened its own context' "the remedy for workers with CUDA"
check markdown 'pid [0-9]+ \(sleep, a child of this process\)' "markdown"
check html 'pid [0-9]+ \(sleep, a child of this process\)' "html"
"$READER" --format json "$SNAP" >"$TMP/j" 2>&1 || { echo "other_processes: FAIL: json: exit $?"; failed=1; }
python3 - "$TMP/j" <<'PY' || { echo "other_processes: FAIL: the JSON list"; failed=1; }
import json, sys
r = json.load(open(sys.argv[1]))
procs = r["other_processes"]["list"]
kids = [p for p in procs if p["relation"] == "child"]
assert len(kids) == 2 and all(p["name"] == "sleep" and p["command"] == "sleep 30" and p["name_source"] == "proc"
                              and p["used_bytes"] == 256 << 20 for p in kids), procs
other = [p for p in procs if p["pid"] == 4194342]
assert other and other[0]["name"] == "other_job" and other[0]["name_source"] == "nvml", other
assert other[0]["command"] == "/opt/batch/bin/other_job" and other[0]["relation"] == "unknown", other
me = [p for p in procs if p["pid"] == r["process"]["pid"]] if "process" in r else [p for p in procs if p["relation"] == "self"]
assert me and me[0]["relation"] == "self", procs
rem = [w for w in r["what_to_try"] if w["kind"] == "other_process"]
assert rem and rem[0]["numbers"]["child_processes"] == 2 and rem[0]["numbers"]["used_bytes"] == 512 << 20, rem
PY
[ $failed -eq 0 ] && echo "other_processes: ok"
exit $failed
