#!/bin/sh
# The folded, markdown, html and memviz reports (docs/FORMATS.md) on a snapshot of tests/demo/train_sim.py
# (traced against the stand-in driver) and on synthetic ones (tests/snapgen: dropped ring chunks, several
# devices, hostile strings, 200,000 events), checked for their invariants:
#   folded    every line "frames BYTES", no raw control byte, bytes summing to the peak;
#   markdown  the failed request, a site table of --top rows;
#   html      the embedded JSON parses, at most 2000 points, its highest total is the peak when the peak is
#             in the ring, no '<' in the blob;
#   memviz    a pickle that loads without any global, in torch.cuda.memory._snapshot()'s shape, whose trace
#             replays onto its segments (every alloc/free pairs up, blocks lie in live segments).
# The browser side of html is tests/sh/html_screenshot.sh.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
READER=${READER:-$ROOT/build/oomtrace-read}
LIB=${OOMTRACE_TEST_LIB:-$ROOT/build/liboomtrace.so}
SNAPGEN=${SNAPGEN:-$ROOT/build/snapgen}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
fail() {
    echo "report_formats: FAIL: $*"
    exit 1
}
[ -x "$READER" ] || fail "no reader at $READER (make)"

mkdir -p "$T/snap"
LD_LIBRARY_PATH="$ROOT/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=8G OOMTRACE_DIR="$T/snap" \
    LD_PRELOAD="$LIB" python3 tests/demo/train_sim.py >"$T/run.out" 2>&1
snaps=$(ls "$T"/snap/*-oom.oomt 2>/dev/null | head -n 1)
[ -n "$snaps" ] || { cat "$T/run.out"; fail "no snapshot from train_sim.py"; }
if [ -x "$SNAPGEN" ]; then
    "$SNAPGEN" --events 200000 --chunk 4096 --drop-chunks 5 -o "$T/dropped.oomt" >/dev/null || fail "snapgen"
    "$SNAPGEN" --devices 3 --hostile-strings --events 20000 -o "$T/hostile.oomt" >/dev/null || fail "snapgen"
    "$SNAPGEN" --trigger exit --events 0 --live 0 -o "$T/empty.oomt" >/dev/null || fail "snapgen"
    snaps="$snaps $T/dropped.oomt $T/hostile.oomt $T/empty.oomt"
    # Every trigger the format defines has a title in each format (a framework OOM once read "unknown").
    "$SNAPGEN" --trigger framework-oom --framework torch --probes 2 -o "$T/fwoom.oomt" >/dev/null || fail "snapgen"
    for fmt in text markdown html; do
        "$READER" --format "$fmt" -o "$T/fwoom.$fmt" "$T/fwoom.oomt" || fail "$fmt of a framework OOM"
        grep -qi 'unknown trigger' "$T/fwoom.$fmt" && fail "$fmt calls a framework OOM an unknown trigger"
        grep -Eq "framework(&#39;|')s allocator" "$T/fwoom.$fmt" || fail "$fmt does not title a framework OOM"
    done
else
    echo "report_formats: no $SNAPGEN: only the tracer's snapshot"
fi

for s in $snaps; do
    name=$(basename "$s" .oomt)
    for fmt in folded markdown html memviz; do
        "$READER" --format "$fmt" -o "$T/$name.$fmt" "$s" 2>"$T/$name.$fmt.err" ||
            fail "$name: --format $fmt exited $?: $(cat "$T/$name.$fmt.err")"
        "$READER" --format "$fmt" -o "$T/$name.$fmt.again" "$s" 2>/dev/null
        cmp -s "$T/$name.$fmt" "$T/$name.$fmt.again" || fail "$name: --format $fmt is not deterministic"
    done
    "$READER" --format json -o "$T/$name.json" "$s" || fail "$name: --format json exited $?"
    "$READER" --format markdown --top 2 -o "$T/$name.md2" "$s" || fail "$name: --format markdown --top 2"
    python3 - "$T" "$name" <<'EOF' || fail "$name: see above"
import json, pickle, re, sys
d, name = sys.argv[1], sys.argv[2]
rep = json.load(open(f"{d}/{name}.json"))
peak = rep.get("peak") or {}

# folded
lines = open(f"{d}/{name}.folded", "rb").read().split(b"\n")
assert lines[-1] == b"", "folded: no final newline"
total = 0
for ln in lines[:-1]:
    m = re.fullmatch(rb"(.+) (\d+)", ln)
    assert m, f"folded: bad line {ln[:120]!r}"
    assert not re.search(rb"[\x00-\x1f\x7f]", ln), f"folded: raw control byte in {ln[:120]!r}"
    total += int(m.group(2))
if peak.get("sites") is not None:
    assert total == peak["bytes"], f"folded: {total} bytes, the peak is {peak['bytes']}"

# markdown
md = open(f"{d}/{name}.markdown", encoding="utf-8").read()
md2 = open(f"{d}/{name}.md2", encoding="utf-8").read()
if rep.get("failure"):
    assert "**Failed request:**" in md, "markdown: no failed request"
nsites = len(peak.get("sites") or (rep.get("live") or {}).get("sites") or [])
rows = [l for l in md2.splitlines() if re.match(r"\| [0-9]+ \| [0-9.]+ [KMGT]?i?B \|", l)]
assert len(rows) == min(2, nsites), f"markdown --top 2: {len(rows)} site rows for {nsites} sites"

# html
page = open(f"{d}/{name}.html", encoding="utf-8").read()
blob = re.search(r'<script type="application/json" id="oomtrace-data">(.*?)</script>', page, re.S)
if 'data-empty="1"' in page:
    # Nothing live and no event: a sentence, no chart (issue 13 item 14).
    assert not blob and "Nothing to draw" in page, "html: an empty timeline is drawn or not explained"
    n = 0
else:
    blob = blob.group(1)
    assert "<" not in blob, "html: '<' in the JSON blob"
    tl = json.loads(blob)
    n = len(tl["t"])
    assert 2 <= n <= 2000, f"html: {n} points"
    assert all(len(s["v"]) == n for s in tl["series"]), "html: series of different lengths"
    assert all(a <= b for a, b in zip(tl["t"], tl["t"][1:])), "html: time goes backwards"
    tot = [sum(s["v"][i] for s in tl["series"]) for i in range(n)]
    ev = rep["events"]
    if tl["peak"] and ev.get("first_time_ns") is not None and peak.get("time_ns", 0) >= ev["first_time_ns"] \
            and peak.get("device") == tl["device"]:
        assert max(tot) == peak["bytes"], f"html: the timeline's highest total {max(tot)} is not the peak {peak['bytes']}"
    live = sum(x["tracked_bytes"] for x in rep["devices"] if x["ordinal"] == tl["device"])
    assert tot[-1] == live, f"html: the timeline ends at {tot[-1]}, not the device's tracked {live}"

# memviz
class Plain(pickle.Unpickler):
    def find_class(self, module, gname):
        raise pickle.UnpicklingError(f"global {module}.{gname}")
mv = Plain(open(f"{d}/{name}.memviz", "rb")).load()
assert set(mv) == {"segments", "device_traces"}, sorted(mv)
segs = mv["segments"]
for s in segs:
    for k in ("device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
              "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"):
        assert k in s, f"memviz: segment without {k}"
    assert sum(b["size"] for b in s["blocks"]) == s["total_size"]
    for b in s["blocks"]:
        assert b["state"] == "active_allocated" and isinstance(b["frames"], list)
        for f in b["frames"]:
            assert set(f) == {"filename", "line", "name"} and isinstance(f["line"], int), f
for dev, trace in enumerate(mv["device_traces"]):
    live = {s["address"]: s["total_size"] for s in segs if s["device"] == dev}
    # Undo the trace from the end: the state before each entry must be consistent.
    for e in reversed(trace):
        a = e["action"]
        assert isinstance(e["frames"], list) and "time_us" in e and "size" in e, e
        if a == "segment_alloc":
            assert live.pop(e["addr"], None) == e["size"], f"memviz: segment_alloc {e['addr']:#x} not live after it"
        elif a == "segment_free":
            assert e["addr"] not in live, f"memviz: segment_free {e['addr']:#x} still live after it"
            live[e["addr"]] = e["size"]
        elif a in ("alloc", "free_requested", "free_completed"):
            pass
        else:
            assert a == "oom" and "device_free" in e, e
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            assert trace[i - 1]["action"] == "segment_alloc" and trace[i - 1]["addr"] == e["addr"]
        if e["action"] == "free_completed":
            assert trace[i - 1]["action"] == "free_requested" and trace[i + 1]["action"] == "segment_free"
print(f"report_formats: {name}: folded {len(lines) - 1} sites / {total} bytes, html {n} points, memviz "
      f"{len(segs)} segments / {sum(map(len, mv['device_traces']))} trace entries: ok")
EOF
done
# Options that do not apply say so: a directory has no folded stacks or pickle; the line names a file to give instead.
"$READER" --format folded "$T" >/dev/null 2>"$T/dir.err" && fail "--format folded DIRECTORY was accepted"
grep -q "reads one snapshot, not a directory: give one of its files" "$T/dir.err" || fail "--format folded DIRECTORY: $(cat "$T/dir.err")"
echo "report_formats: ok"
