#!/bin/sh
# The HTML report in a real browser: a snapshot of tests/demo/train_sim.py (traced against the stand-in
# driver) becomes `oomtrace-read --format html`, which headless Chromium must render with its timeline
# drawn: the page's script sets data-drawn="N" (N series paths) on #timeline (checked in --dump-dom), and
# the screenshot must show the series' colours in a region of more than 3 distinct colours (the PNG is
# decoded here with python3's zlib). A second snapshot carries a marker label that tries to close the
# data's <script> element: the page must still draw, and nothing of the label may become markup.
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
cat >"$T/hostile.py" <<'EOF'
import ctypes, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
import oomtrace
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
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
echo "html_screenshot: ok"
