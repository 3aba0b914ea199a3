"""Summarises `run.sh bench` (tests/gpu/bench_steps.py, bench_async_pair.py): median step time with its
p10-p90 spread per (allocator, model, mode), the overhead of each recorder over the plain run, the
per-event cost, and the compressed bytes per event from the traced processes' exit snapshots."""
import glob
import json
import os
import statistics
import struct
import sys


def events_section_bytes(path):
    """Stored bytes of the EVENTS section (type 10): the compressed chunks (docs/FORMAT.md)."""
    with open(path, "rb") as f:
        data = f.read()
    off, total = 32, 0
    while off + 24 <= len(data):
        typ, _flags, stored, _raw = struct.unpack_from("<IIQQ", data, off)
        if typ == 10:
            total += stored
        off += 24 + stored
    return total


def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def main(d):
    print("== step time (ms): median [p10-p90] over all rounds; overhead vs plain median")
    for f in sorted(glob.glob(os.path.join(d, "steps-*.jsonl"))):
        alloc = os.path.basename(f)[6:-6]
        rows = {}
        for line in open(f):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            key = (r["model"], "oomtrace" if r["traced"] else r["mode"])
            rows.setdefault(key, {"ms": [], "ev": r.get("allocs_per_step")})["ms"].extend(r["ms"])
        for model in ("transformer", "mlp"):
            base = rows.get((model, "none"))
            if not base:
                continue
            b = statistics.median(base["ms"])
            ev = base["ev"] or 0
            for mode in ("none", "oomtrace", "python", "all"):
                r = rows.get((model, mode))
                if not r:
                    continue
                m = statistics.median(r["ms"])
                over = (m - b) / b * 100
                per_ev = f" {((m - b) * 1e3 / ev):+.2f} us/event" if ev and mode != "none" else ""
                print(f"  {alloc:7s} {model:11s} {mode:8s} {m:8.3f} [{q(r['ms'], .1):.3f}-{q(r['ms'], .9):.3f}]"
                      f"  {over:+6.2f}%{per_ev}  ({ev:.0f} allocs/step, n={len(r['ms'])})")
    pairs = {True: [], False: []}
    for line in open(os.path.join(d, "pair.jsonl")) if os.path.exists(os.path.join(d, "pair.jsonl")) else []:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        pairs[r["traced"]].extend(r["pair_ns"])
    if pairs[True] and pairs[False]:
        p, t = statistics.median(pairs[False]), statistics.median(pairs[True])
        print(f"== cudaMallocAsync+cudaFreeAsync pair via ctypes: plain {p:.0f} ns [{q(pairs[False], .1):.0f}-"
              f"{q(pairs[False], .9):.0f}], traced {t:.0f} ns [{q(pairs[True], .1):.0f}-{q(pairs[True], .9):.0f}],"
              f" +{t - p:.0f} ns per pair")
    for f in sorted(glob.glob(os.path.join(d, "snap", "*.json"))):
        try:
            r = json.load(open(f))
        except ValueError:
            continue
        kept = (r.get("events") or {}).get("kept") or 0
        used = events_section_bytes(f[:-5])
        if kept:
            print(f"== trace size {os.path.basename(f)[:40]}: {kept} events in {used} B of EVENTS:"
                  f" {used / kept:.2f} B/event compressed")


if __name__ == "__main__":
    main(sys.argv[1])
