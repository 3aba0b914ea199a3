#!/bin/sh
# The HTML report in a real browser: a snapshot of tests/demo/train_sim.py (traced against the stand-in
# driver) becomes `oomtrace-read --format html`, which headless Chromium must render with its timeline
# drawn: the page's script sets data-drawn="N" (N series paths) on #timeline (checked in --dump-dom), and
# the screenshot must show the series' colours in a region of more than 3 distinct colours (the PNG is
# decoded here with python3's zlib). A second snapshot carries a marker label that tries to close the
# data's <script> element: the page must still draw, and nothing of the label may become markup. Third,
# the layout of a few pages measured in the browser (below, at 3).
#
# Chromium comes from Debian's "chromium" package (tools/deps.sh installs it). When it is missing and
# cannot be installed here, the test prints SKIP and passes.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
READER=${READER:-$ROOT/build/oomtrace-read}
LIB=${OOMTRACE_TEST_LIB:-$ROOT/build/liboomtrace.so}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
fail() {
    echo "html_screenshot: FAIL: $*"
    exit 1
}

if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "html_screenshot: installing chromium (apt-get)"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >"$T/apt.log" 2>&1 ||
            tail -n 5 "$T/apt.log"
    fi
fi
if ! command -v chromium >/dev/null 2>&1; then
    echo "html_screenshot: SKIP (chromium is not installed and could not be installed; apt-get install chromium)"
    exit 0
fi
[ -x "$READER" ] || fail "no reader at $READER (make)"
[ -f "$LIB" ] || fail "no tracer at $LIB (make)"

browse() { # browse OUTPUT_FLAG... FILE: headless Chromium with a fresh profile, nothing from the network
    prof=$(mktemp -d "$T/prof.XXXXXX")
    timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$prof" \
        --window-size=1400,1000 "$@" 2>>"$T/chromium.log"
}

traced() { # traced DIR PROGRAM...: one traced run against the simulated 8 GiB device
    mkdir -p "$1"
    d=$1
    shift
    LD_LIBRARY_PATH="$ROOT/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=8G OOMTRACE_DIR="$d" \
        LD_PRELOAD="$LIB" "$@" >"$T/run.out" 2>&1
    ls "$d"/*-oom.oomt >/dev/null 2>&1 || { cat "$T/run.out"; fail "no oom snapshot from $*"; }
}

# 1. The demo: a timeline of 3 call sites, markers, the peak and the failure.
traced "$T/snap" python3 tests/demo/train_sim.py
snap=$(ls "$T"/snap/*-oom.oomt | head -n 1)
"$READER" --format html -o "$T/report.html" "$snap" || fail "oomtrace-read --format html exited $?"
if grep -Eio '<(link|img|iframe)[^>]*>|(src|href)="?(https?:)?//[^"> ]*|@import|url\(https?:' "$T/report.html"; then
    fail "the page references something outside itself"
fi
browse --dump-dom "file://$T/report.html" >"$T/dom.html" || fail "chromium --dump-dom failed: $(tail -n 3 "$T/chromium.log")"
drawn=$(sed -n 's/.*id="timeline" data-drawn="\([0-9]*\)".*/\1/p' "$T/dom.html" | head -n 1)
[ -n "$drawn" ] || fail "no #timeline with data-drawn in the rendered page"
[ "$drawn" -ge 1 ] || fail "the timeline drew no series (data-drawn=$drawn)"
paths=$(grep -o 'data-series="[0-9]*"' "$T/dom.html" | wc -l)
[ "$paths" -eq "$drawn" ] || fail "data-drawn=$drawn but $paths series paths in the SVG"
echo "html_screenshot: --dump-dom: timeline data-drawn=$drawn, $paths series paths"
# The legend lists what held memory at the peak: no row of 0 B (the "other sites" of a run whose peak is all named).
grep -o '<div class="legend" id="legend">.*' "$T/dom.html" | grep -q '<b>0 B </b>' && fail "the legend has a 0 B row"

browse --screenshot="$T/shot.png" "file://$T/report.html" >/dev/null || fail "chromium --screenshot failed"
[ -s "$T/shot.png" ] || fail "no screenshot written"
# The series colours of the page (its JSON blob names them), then the PNG: decoded by hand (zlib +
# scanline filters), pixels of each series colour counted, distinct colours in their bounding box.
python3 - "$T/shot.png" "$T/report.html" <<'EOF' || fail "the screenshot does not show the timeline"
import re, struct, sys, zlib

png, page = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()
pal = re.search(r'"palette":\[([^\]]*)\]', page).group(1)
series = [tuple(int(h[i:i + 2], 16) for i in (1, 3, 5)) for h in re.findall(r'"(#[0-9a-fA-F]{6})"', pal)][:-1]
data = open(png, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
rows, prev = [], bytearray(stride)
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
count, box = {}, [w, h, -1, -1]
for y in range(h):
    r = rows[y]
    for x in range(w):
        px = (r[x * bpp], r[x * bpp + 1], r[x * bpp + 2])
        if px in series:
            count[px] = count.get(px, 0) + 1
            box = [min(box[0], x), min(box[1], y), max(box[2], x), max(box[3], y)]
seen = {c: n for c, n in count.items() if n >= 200}
assert len(seen) >= 2, f"series colours on screen: {count}"
colours = set()
for y in range(box[1], box[3] + 1):
    r = rows[y]
    for x in range(box[0], box[2] + 1):
        colours.add(bytes(r[x * bpp:x * bpp + 3]))
assert len(colours) > 3, f"only {len(colours)} colours in the timeline region"
print(f"html_screenshot: screenshot {w}x{h}: {len(seen)} series colours "
      f"({', '.join(str(n) for n in sorted(seen.values(), reverse=True))} pixels), "
      f"{len(colours)} distinct colours in the timeline region {box}")
EOF

# 2. A marker label that tries to end the data's <script> and inject markup.
cp tests/py/drv.py "$T/"
cat >"$T/hostile.py" <<'EOF'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
import oomtrace
from drv import cuda, ctypes
assert cuda.cuInit(0) == 0
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 1 << 30) == 0
oomtrace.mark('</script><script>document.title="INJECTED"</script><b id="injected">&amp;')
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 2 << 30) == 0
assert cuda.cuMemAlloc_v2(ctypes.byref(p), 16 << 30) == 2
EOF
traced "$T/snap2" python3 "$T/hostile.py"
snap2=$(ls "$T"/snap2/*-oom.oomt | head -n 1)
"$READER" --format html -o "$T/hostile.html" "$snap2" || fail "oomtrace-read --format html exited $?"
n=$(grep -o '</script>' "$T/hostile.html" | wc -l)
[ "$n" -eq 2 ] || fail "$n </script> in the page: the marker label reached it unescaped (2 expected: data, code)"
browse --dump-dom "file://$T/hostile.html" >"$T/dom2.html" || fail "chromium --dump-dom failed"
grep -q 'id="timeline" data-drawn="[1-9]' "$T/dom2.html" || fail "the timeline was not drawn with a hostile marker label"
grep -q '<title>oomtrace' "$T/dom2.html" || fail "the marker label ran as script (the title changed)"
grep -q '<b id="injected"' "$T/dom2.html" && fail "the marker label became markup"
grep -q '&lt;/script&gt;&lt;script&gt;document.title="INJECTED"' "$T/dom2.html" || fail "the marker label is not shown as text"
echo "html_screenshot: a marker label with </script> stays text; the timeline is drawn"
# 3. The layout, measured in the browser (issue 12's "checked in headless Chromium", issue 13
# item 14). Each page gets a small script of this test appended, which runs after the page's own: it reads
# the element boxes (getBoundingClientRect) of the breakdown's stacked bars and their labels, the allocator
# view's bars, the timeline's marker labels, and writes them as JSON into an attribute of <body>, which
# `chromium --dump-dom` returns. Checked:
#   - H200 fragmentation (tests/h200/fw_fragmentation.oomt): two stacked bars (failure, peak) that fill
#     their track, share labels inside their segments, a legend with the cache row; the allocator view's
#     table and the failed request against the largest free block drawn to scale (2.00 GiB : 424 MiB);
#     What to try present.
#   - H200 Adam first step: the legend splits optimizer state into Adam.exp_avg / exp_avg_sq.
#   - A traced program whose markers crowd (30 in a few milliseconds on each side of the phase the Why
#     section cites): the cited markers' labels are shown, no two marker labels overlap, and some of the
#     others were left out (else nothing was crowded).
#   - A traced program that made no device allocation: no chart, a sentence saying why.
#   - No page scrolls sideways.
traced_any() { # traced_any DIR PROGRAM...: as traced, for a program that may write any kind of snapshot
    d=$1
    shift
    mkdir -p "$d"
    LD_LIBRARY_PATH="$ROOT/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=8G OOMTRACE_DIR="$d" \
        OOMTRACE_QUIET=1 LD_PRELOAD="$LIB" "$@" >"$T/run.out" 2>&1
    ls "$d"/*.oomt >/dev/null 2>&1 || { cat "$T/run.out"; fail "no snapshot from $*"; }
}

# measure NAME SNAPSHOT: the page, with the measuring script before </body>, rendered; its JSON in $T/NAME.json
measure() {
    "$READER" --format html -o "$T/$1.html" "$2" || fail "$1: oomtrace-read --format html exited $?"
    python3 - "$T/$1.html" <<'EOF' || fail "$1: could not append the measuring script"
import sys
p = sys.argv[1]
page = open(p, encoding="utf-8").read()
probe = r"""<script>
(function(){
function box(e){var b=e.getBoundingClientRect();return [b.left,b.top,b.right,b.bottom];}
var r={},bd=document.getElementById('breakdown');
r.breakdown=!!bd;r.bars=[];r.legend=[];
if(bd){bd.querySelectorAll('.bdrow').forEach(function(row){var bar=row.querySelector('.bdbar'),bb=bar.getBoundingClientRect(),segs=[],sum=0;
 bar.querySelectorAll('i').forEach(function(i){var b=i.getBoundingClientRect(),sp=i.querySelector('span'),s=sp?sp.getBoundingClientRect():null;sum+=b.width;
  segs.push({w:b.width,title:i.title,label:sp?sp.textContent:null,fits:!s||(s.left>=b.left-0.5&&s.right<=b.right+0.5)});});
 r.bars.push({moment:row.getAttribute('data-moment'),width:bb.width,sum:sum,segs:segs});});
 r.legend=[].map.call(bd.querySelectorAll('table.bdleg tbody tr'),function(tr){return tr.textContent;});}
var al=document.getElementById('allocator');r.allocator=!!al;
if(al){r.fwrows=al.querySelectorAll('table.fw tbody tr').length;var rb=al.querySelector('.reqbar'),fb=al.querySelector('.freebar');
 if(rb&&fb){r.req=rb.getBoundingClientRect().width;r.free=fb.getBoundingClientRect().width;}}
var tl=document.getElementById('timeline');r.drawn=tl?+tl.getAttribute('data-drawn'):null;r.empty=tl?tl.getAttribute('data-empty'):null;
r.svgs=tl?tl.querySelectorAll('svg').length:0;r.tltext=tl?tl.textContent.slice(0,400):'';
r.markers=JSON.parse((document.getElementById('oomtrace-data')||{textContent:'{"markers":[]}'}).textContent).markers.length;
r.marks=[].map.call(document.querySelectorAll('#timeline text.mlab'),function(t){return {text:t.textContent,cited:t.getAttribute('data-cited')==='1',box:box(t)};});
r.roles={};document.querySelectorAll('#timeline [data-role]').forEach(function(e){r.roles[e.getAttribute('data-role')]=box(e);});
r.overflowX=document.documentElement.scrollWidth>window.innerWidth+1;
r.remedies=!!document.getElementById('remedies');
document.body.setAttribute('data-layout',JSON.stringify(r));
})();
</script>
"""
i = page.rindex("</body>")
open(p, "w", encoding="utf-8").write(page[:i] + probe + page[i:])
EOF
    browse --dump-dom "file://$T/$1.html" >"$T/$1.dom" ||
        fail "$1: chromium --dump-dom failed: $(tail -n 3 "$T/chromium.log")"
    python3 - "$T/$1.dom" "$T/$1.json" <<'EOF' || fail "$1: the measuring script left no result"
import html, re, sys
m = re.search(r'<body[^>]*data-layout="([^"]*)"', open(sys.argv[1], encoding="utf-8").read())
assert m, "no data-layout on <body>"
open(sys.argv[2], "w").write(html.unescape(m.group(1)))
EOF
}

# check NAME PYTHON: asserts about $T/NAME.json (as r), each failure one line
check() {
    python3 - "$T/$1.json" "$1" "$2" <<'EOF' || fail "$1: layout check failed"
import json, sys
r, name = json.load(open(sys.argv[1])), sys.argv[2]
def bars_ok():
    assert r["breakdown"], "no breakdown"
    for b in r["bars"]:
        assert b["segs"], f"{b['moment']}: an empty bar"
        assert b["sum"] <= b["width"] + 1, f"{b['moment']}: segments overflow their bar ({b['sum']} > {b['width']})"
        for s in b["segs"]:
            assert s["fits"], f"{b['moment']}: the label {s['label']!r} spills out of its segment ({s['title']})"
def no_overlap(marks):
    for i, a in enumerate(marks):
        for b in marks[i + 1:]:
            x = a["box"][0] < b["box"][2] and b["box"][0] < a["box"][2]
            y = a["box"][1] < b["box"][3] and b["box"][1] < a["box"][3]
            assert not (x and y), f"marker labels overlap: {a['text']!r} {a['box']} and {b['text']!r} {b['box']}"
assert not r["overflowX"], "the page scrolls sideways"
exec(sys.argv[3])
print(f"html_screenshot: layout: {name}: ok")
EOF
}

# 3a. The H200's fragmentation OOM: breakdown, allocator view, What to try.
measure frag "$ROOT/tests/h200/fw_fragmentation.oomt"
check frag '
bars_ok()
assert [b["moment"] for b in r["bars"]] == ["failure", "peak"], r["bars"]
for b in r["bars"]:
    assert b["sum"] >= 0.95 * b["width"], "%s: the shares cover %.0f of %.0f px" % (b["moment"], b["sum"], b["width"])
assert any(s["label"] == "58%" for s in r["bars"][0]["segs"]), r["bars"][0]["segs"]
assert any(l.startswith("framework cache") and "57.1 GiB" in l for l in r["legend"]), r["legend"]
assert r["allocator"] and r["fwrows"] == 1, r
ratio = r["req"] / r["free"]
assert abs(ratio - 2048 / 424) < 0.05 * 2048 / 424, f"request:largest free drawn {ratio:.2f}, numbers {2048/424:.2f}"
assert r["remedies"], "no What to try"
assert r["drawn"] >= 1, r["drawn"]
'
# 3b. The H200's Adam first step: optimizer state split by state name.
measure adam "$ROOT/tests/h200/ut_adam_first_step.oomt"
check adam '
bars_ok()
assert any(l.startswith("optimizer state") for l in r["legend"]), r["legend"]
assert any(l.strip("\u2003\u21b3 ").startswith("Adam.exp_avg_sq") for l in r["legend"]), r["legend"]
assert not r["allocator"] or r["fwrows"] >= 1
'
# 3c. Crowded markers around the phase the Why section cites.
cat >"$T/crowd.py" <<'EOF'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
import oomtrace
from drv import cuda, ctypes, MiB
assert cuda.cuInit(0) == 0
p = ctypes.c_uint64()
def alloc(n):
    return p.value if cuda.cuMemAlloc_v2(ctypes.byref(p), n) == 0 else None
for i in range(30):
    oomtrace.mark(f"warmup step {i}")
    cuda.cuMemFree_v2(alloc(MiB))
oomtrace.mark("load the big tables")
held = [alloc(512 * MiB) for _ in range(8)]
for i in range(30):
    oomtrace.mark(f"eval step {i}")
    cuda.cuMemFree_v2(alloc(MiB))
assert alloc(6 << 30) is None  # more than the 4 GiB free, not the whole 8 GiB device: the Why then cites the phase
EOF
traced_any "$T/crowd" python3 "$T/crowd.py"
measure crowd "$(ls "$T"/crowd/*-oom.oomt | head -n 1)"
check crowd '
cited = [m["text"] for m in r["marks"] if m["cited"]]
assert "load the big tables" in cited, "the cited marker has no label; labels: %r" % [m["text"] for m in r["marks"]]
no_overlap(r["marks"])
assert len(r["marks"]) < r["markers"], "all %d labels shown: the markers did not crowd" % r["markers"]
assert r["drawn"] >= 1
'
# 3e. Walk 6, #21: an OOM whose peak reaches the device total. The peak's label is clear of the device total's
# label and line and of the OOM's label; and the time axis ends at the failure, not at the snapshot: the
# allocations take a millisecond, writing the snapshot after the failure several (without the companion,
# whose start-up would delay the first allocation), so an axis to the snapshot put the failure at its left.
cat >"$T/near.py" <<'EOF'
from drv import cuda, ctypes, MiB, try_alloc
assert cuda.cuInit(0) == 0
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0 and cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
held = [try_alloc(300 * MiB) for _ in range(26)]
assert all(rc == 0 for rc, _ in held)
assert try_alloc(1024 * MiB)[0] == 2
EOF
traced_any "$T/near" env OOMTRACE_FRAMEWORKS=0 python3 "$T/near.py"
measure near "$(ls "$T"/near/*-oom.oomt | head -n 1)"
check near '
ro = r["roles"]
for k in ("total", "capacity", "peak", "oom", "failure", "plot"):
    assert k in ro, f"no {k} in the chart: {sorted(ro)}"
def apart(a, b):
    A, B = ro[a], ro[b]
    return A[2] <= B[0] or B[2] <= A[0] or A[3] <= B[1] or B[3] <= A[1]
for a, b in (("peak", "total"), ("peak", "oom"), ("total", "oom")):
    assert apart(a, b), f"the {a} label {ro[a]} overlaps the {b} label {ro[b]}"
cy = (ro["capacity"][1] + ro["capacity"][3]) / 2
assert ro["peak"][3] <= cy or ro["peak"][1] >= cy, "the peak label %r crosses the device total line at y %.1f" % (ro["peak"], cy)
pl, fx = ro["plot"], ro["failure"][0]
share = (fx - pl[0]) / (pl[2] - pl[0])
assert share >= 0.85, f"the failure is at {share:.0%} of the time axis: the axis runs past it to the snapshot"
'
# 3d. No device allocation at all.
cat >"$T/none.py" <<'EOF'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
import oomtrace
from drv import cuda
assert cuda.cuInit(0) == 0
oomtrace.dump()
EOF
traced_any "$T/none" python3 "$T/none.py"
measure none "$(ls "$T"/none/*.oomt | head -n 1)"
check none '
assert r["empty"] == "1" and r["svgs"] == 0 and r["drawn"] == 0, r
assert "Nothing to draw: this process made no device allocation" in r["tltext"], r["tltext"]
'
echo "html_screenshot: ok"
