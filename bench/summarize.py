"""bench/summarize.py OUTDIR section NAME | table

Reads the raw outputs bench/run.sh left in OUTDIR/raw and prints the figures of one section, or the
whole table (and writes it as markdown to OUTDIR/results.md). Each figure is the median over the
rounds of one run, with its min-max; the "met?" column is information, never an assertion."""
import glob
import os
import re
import statistics
import sys

OUT = sys.argv[1]
RAW = os.path.join(OUT, "raw")


def parse(path):
    """'result kind=K a=1 b=2' lines -> list of dicts (values as float when they parse)."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            if not (line.startswith("result ") or line.startswith("snap ")):
                continue
            d = {"_type": line.split()[0]}
            for k, v in re.findall(r"(\w+)=(\S+)", line):
                try:
                    d[k] = float(v)
                except ValueError:
                    d[k] = v
            rows.append(d)
    return rows


def pick(rows, **want):
    for r in rows:
        if all(r.get(k) == v for k, v in want.items()):
            return r
    return None


def rounds(sub):
    """{round: {variant: rows}} from RAW/sub/<round>-<variant>.txt"""
    out = {}
    for p in glob.glob(os.path.join(RAW, sub, "*-*.txt")):
        m = re.match(r"(\d+)-(\w+)\.txt$", os.path.basename(p))
        if m:
            out.setdefault(int(m.group(1)), {})[m.group(2)] = parse(p)
    return dict(sorted(out.items()))


class Fig:
    """A list of per-round values."""

    def __init__(self, values):
        self.v = [x for x in values if x is not None]

    def ok(self):
        return bool(self.v)

    def med(self):
        return statistics.median(self.v) if self.v else None

    def lo(self):
        return min(self.v) if self.v else None

    def hi(self):
        return max(self.v) if self.v else None


def fmt(x, unit):
    if x is None:
        return "n/a"
    if unit == "ns":
        return f"{x:.0f} ns"
    if unit == "ms":
        return f"{x / 1e6:.0f} ms"
    if unit == "s":
        return f"{x / 1e9:.2f} s"
    if unit == "B":
        return f"{x:.2f} B"
    if unit == "MiB":
        return f"{x / 1024:.1f} MiB"  # from kB
    if unit == "MB":
        return f"{x / 1e6:.1f} MB"
    if unit == "Mev/s":
        return f"{x / 1e6:.1f} M/s"
    return f"{x:g} {unit}"


TABLE = []  # (section, measure, median, spread, target, floor, met)
NOTES = []


def row(section, measure, fig, unit, target="—", floor="—", met=None):
    if fig is None or not fig.ok():
        TABLE.append((section, measure, "n/a", "n/a", target, floor, "n/a"))
        return
    spread = f"{fmt(fig.lo(), unit)} – {fmt(fig.hi(), unit)} (n={len(fig.v)})"
    m = "—" if met is None else ("yes" if met(fig.med()) else "**no**")
    TABLE.append((section, measure, fmt(fig.med(), unit), spread, target, floor, m))


# ---- 1. event cost ---------------------------------------------------------------------------------
def section_alloc():
    R = rounds("alloc")

    def diff(kind, depth, threads):
        vals = []
        for r, v in R.items():
            t = pick(v.get("t", []), kind=kind, depth=depth, threads=threads)
            u = pick(v.get("u", []), kind=kind, depth=depth, threads=threads)
            if t and u:
                vals.append(t["ns"] - u["ns"])
        return Fig(vals)

    def raw(kind, depth, threads, variants=("t", "u")):
        vals = []
        for r, v in R.items():
            for var in variants:
                x = pick(v.get(var, []), kind=kind, depth=depth, threads=threads)
                if x:
                    vals.append(x["ns"])
        return Fig(vals)

    S = "1. event cost"
    sp = os.path.join(RAW, "alloc", "stacks.txt")
    if os.path.exists(sp):
        with open(sp) as f:
            depths = sorted({int(m) for m in re.findall(r"nframes=(\d+)", f.read())})
        NOTES.append("alloc_cost: native stack depths the tracer kept (from a snapshot): "
                     + ", ".join(map(str, depths)))
    for t in (1, 8):
        for d in (8, 32, 64):
            unw = raw("unw", d, t)
            label = f"alloc event, {d} native frames, {t} thread{'s' if t > 1 else ''}"
            if t > 1:
                label += " (CPU time/event)"
            floor = f"unw_backtrace({d}): {fmt(unw.med(), 'ns')}" if unw.ok() else "—"
            if d == 32:
                row(S, label + ", over untraced", diff("alloc", d, t), "ns", "≤ 500 ns", floor, lambda x: x <= 500)
            else:
                row(S, label + ", over untraced", diff("alloc", d, t), "ns", "—", floor)
    lc = raw("lockclock", 32, 1)
    lcs = f"mutex pair + clock_gettime: {fmt(lc.med(), 'ns')}" if lc.ok() else "—"
    row(S, "free, 1 thread, over untraced", diff("free", 32, 1), "ns", "≤ 100 ns", lcs, lambda x: x <= 100)
    row(S, "free, 8 threads (CPU time/free), over untraced", diff("free", 32, 8), "ns", "≤ 100 ns", lcs,
        lambda x: x <= 100)
    row(S, "alloc+free pair, 32 frames, 8 threads: wall × 2 cores / pair, over untraced",
        diff("pairwall", 32, 8), "ns", "—", "—")
    # untraced references (what the stand-in driver itself costs)
    for kind in ("alloc", "free"):
        row(S, f"(reference) untraced {kind} through the stand-in driver, 32 frames, 1 thread",
            raw(kind, 32, 1, ("u",)), "ns")

    P = rounds("py")

    def pydiff(kind, a, b):
        vals = []
        for r, v in P.items():
            x, y = pick(v.get(a, []), kind=kind), pick(v.get(b, []), kind=kind)
            if x and y:
                vals.append(x["ns"] - y["ns"])
        return Fig(vals)

    pyk = ""
    sp = os.path.join(RAW, "py", "stacks.txt")
    if os.path.exists(sp):
        with open(sp) as f:
            m = re.search(r"nframes=(\d+) python=(\d+)", f.read())
        if m:
            n, p = int(m.group(1)), int(m.group(2))
            pyk = f" (stack kept: {p} Python + {n - p} native frames)"
    row(S, "20 Python frames: extra per alloc event, OOMTRACE_PYTHON=1 − =0" + pyk, pydiff("pyalloc", "p1", "p0"),
        "ns", "≤ 300 ns", "—", lambda x: x <= 300)
    row(S, "Python process: alloc event over untraced (OOMTRACE_PYTHON=1)", pydiff("pyalloc", "p1", "u"), "ns")
    row(S, "Python process: alloc event over untraced (OOMTRACE_PYTHON=0)", pydiff("pyalloc", "p0", "u"), "ns")
    row(S, "Python process: free over untraced (OOMTRACE_PYTHON=1)", pydiff("pyfree", "p1", "u"), "ns",
        "≤ 100 ns", "—", lambda x: x <= 100)

    def borrowdiff(mode):
        vals = []
        for r, v in P.items():
            x, y = pick(v.get("b1", []), kind="borrow", mode=mode), pick(v.get("b0", []), kind="borrow", mode=mode)
            if x and y:
                vals.append(x["ns"] - y["ns"])
        return Fig(vals)

    row(S, "native thread, main thread waiting 20 frames deep: borrowing its stack, extra per alloc+free "
        "(OOMTRACE_PYTHON=1 − =0)", borrowdiff("wait"), "ns")
    row(S, "native thread, main thread holding the GIL: nothing to borrow, extra per alloc+free "
        "(OOMTRACE_PYTHON=1 − =0)", borrowdiff("hold"), "ns")


# ---- 2. trace size and footprint --------------------------------------------------------------------
def section_steady():
    R = rounds("steady")
    S = "2. trace size"
    bpe, raw_bpe, ring_bpe, rss, maxrss = [], [], [], [], []
    for r, v in R.items():
        t = v.get("t", [])
        u = v.get("u", [])
        snap = next((x for x in t if x["_type"] == "snap"), None)
        st, su = pick(t, kind="steady"), pick(u, kind="steady")
        if snap and snap.get("chunk_events"):
            bpe.append(snap["events_section"] / snap["chunk_events"])
            raw_bpe.append(snap["raw_bytes"] / snap["chunk_events"])
        if st and su:
            rss.append(st["vmrss_kb"] - su["vmrss_kb"])
            maxrss.append(st["maxrss_kb"] - su["maxrss_kb"])
    row(S, "compressed bytes/event, steady training-like loop (EVENTS section / events kept)", Fig(bpe), "B",
        "≤ 8 B", f"raw varints before zstd: {fmt(Fig(raw_bpe).med(), 'B')}/event", lambda x: x <= 8)
    row(S, "tracer memory, steady loop: VmRSS traced − untraced at the end", Fig(rss), "MiB")
    row(S, "tracer memory, steady loop: maxrss traced − untraced", Fig(maxrss), "MiB")


# ---- 3. dump ------------------------------------------------------------------------------------------
def section_dump():
    S = "3. dump"
    t = parse(os.path.join(RAW, "dump", "t.txt"))
    dumps = [x for x in t if x.get("kind") == "dump"]
    floor = Fig([x["floor_ns"] for x in dumps])
    row(S, "oomtrace_dump(): 1,000,000 live allocations, 100,000 stacks (+1M events in the ring)",
        Fig([x["ns"] for x in dumps]), "ms", "≤ 100 ms",
        f"zstd-1 + write of the same sections: {fmt(floor.med(), 'ms')}", lambda x: x <= 100e6)
    first = pick(t, kind="dumpfirst")
    if first:
        row(S, "(reference) first dump of the process (cold buffers)", Fig([first["ns"]]), "ms")
    row(S, "snapshot file size (1M live + 100k stacks)", Fig([x["bytes"] for x in dumps]), "MB")
    lt = pick(t, kind="liverss")
    us = [pick(parse(os.path.join(RAW, "dump", f)), kind="liverss") for f in ("rss-u1.txt", "rss-u2.txt")]
    if lt:
        row(S, "tracer memory with 1M live + 100k stacks: VmRSS traced − untraced",
            Fig([lt["vmrss_kb"] - u["vmrss_kb"] for u in us if u]), "MiB")


# ---- 4. reader ----------------------------------------------------------------------------------------
def section_reader():
    S = "4. reader"
    rs = [parse(p) for p in sorted(glob.glob(os.path.join(RAW, "reader", "[0-9]*.txt")))]

    def info(name):
        return next(iter(parse(os.path.join(RAW, "reader", f"info-{name}.txt"))), None)

    def vals(kind):
        return [pick(r, kind=kind)["ns"] for r in rs if pick(r, kind=kind)]

    origin = {"sg": "snapgen", "tr": "tracer-made"}
    for src in ("sg", "tr"):
        ev = info(src + "ev")
        if not ev:
            continue
        nev = ev.get("chunk_events", 0)
        rate = Fig([nev / (ns / 1e9) for ns in vals(src + "ev_json")])
        floor_rate = Fig([nev / (ns / 1e9) for ns in vals(src + "ev_decodefloor")])
        row(S, f"events decoded/s, {origin[src]} {nev / 1e6:.0f}M-event snapshot "
            f"({ev['events_section'] / nev:.1f} B/event, {ev['file_bytes'] / 1e6:.0f} MB): "
            "oomtrace-read --format json, whole process", rate, "Mev/s", "≥ 20 M/s",
            f"read + zstd -d of the chunks: {fmt(floor_rate.med(), 'Mev/s')}", lambda x: x >= 20e6)
    for src in ("sg", "tr"):
        lv = info(src + "live")
        if not lv:
            continue
        desc = (f"{origin[src]}: {lv['chunk_events'] / 1e6:.0f}M events + {lv['live'] / 1e6:.0f}M live, "
                f"{lv['stacks'] / 1e3:.0f}k stacks, {lv['file_bytes'] / 1e6:.0f} MB")
        fl = Fig(vals(src + "live_decodefloor"))
        fls = f"read + zstd -d of the events: {fmt(fl.med(), 's')}"
        row(S, f"report, --format json > /dev/null ({desc})", Fig(vals(src + "live_json")), "s", "< 5 s", fls,
            lambda x: x < 5e9)
        row(S, f"report, --format json --top 10 ({origin[src]}, same file)", Fig(vals(src + "live_json_top10")),
            "s", "—", fls)
        row(S, f"report, text ({origin[src]}, same file)", Fig(vals(src + "live_text")), "s", "—", fls)


SECTIONS = {"alloc": section_alloc, "steady": section_steady, "dump": section_dump, "reader": section_reader}


def print_rows(rows):
    w = [max(len(str(r[i])) for r in rows + [HEAD]) for i in range(1, 7)]
    line = "  ".join(h.ljust(w[i]) for i, h in enumerate(HEAD[1:]))
    print(line)
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(str(r[i + 1]).ljust(w[i]) for i in range(6)))


HEAD = ("section", "measure", "median", "spread (min – max over rounds)", "target", "floor", "met?")


def main():
    what = sys.argv[2]
    if what == "section":
        SECTIONS[sys.argv[3]]()
        print_rows(TABLE)
        for n in NOTES:
            print(n)
        print()
        return
    for f in SECTIONS.values():
        f()
    print_rows(TABLE)
    for n in NOTES:
        print(n)
    env = ""
    if os.path.exists(os.path.join(OUT, "env.txt")):
        with open(os.path.join(OUT, "env.txt")) as f:
            env = f.read()
    with open(os.path.join(OUT, "results.md"), "w") as f:
        f.write("# oomtrace benchmark results (CPU, stand-in driver)\n\n")
        f.write("Written by `make bench` (bench/run.sh). Each figure: median over the rounds of this one run, "
                "interleaved with its baseline; spread = min – max over the rounds. No timing is asserted.\n\n")
        f.write("```\n" + env + "```\n\n")
        f.write("| " + " | ".join(HEAD[1:]) + " |\n")
        f.write("|" + "---|" * 6 + "\n")
        section = None
        for r in TABLE:
            if r[0] != section:
                section = r[0]
                f.write(f"| **{section}** | | | | | |\n")
            f.write("| " + " | ".join(str(x).replace("|", "\\|") for x in r[1:]) + " |\n")
        for n in NOTES:
            f.write(f"\n{n}\n")


if __name__ == "__main__":
    main()
