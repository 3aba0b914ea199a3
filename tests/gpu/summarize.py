#!/usr/bin/env python3
"""Summarises a tests/gpu/run.sh results folder: one line per workload, one line per snapshot.

    python3 tests/gpu/summarize.py RESULTS_DIR > summary.txt

Only the standard library; tolerant of a missing or unexpected report (the JSON schema of oomtrace-read is read
with fallbacks, since docs/JSON.md may change): whatever it cannot find it prints as '?'.
"""
import glob
import json
import os
import re
import shlex
import sys

MAX_CHARS = 7900
MAX_SNAP_LINES = 3
TRIGGERS = {1: "oom", 2: "exit", 3: "signal", 4: "api", 5: "flush", 6: "framework-oom"}
GiB, MiB = 1 << 30, 1 << 20

# Per workload: (CHECK key from the script, report quantity, which snapshot). Report quantities: tracked (sum of
# devices[].tracked_bytes), live (live.bytes), peak (peak.bytes), req (failure.requested_bytes), host_pinned
# (host_pinned.bytes), imported (imported.bytes; imported_unknown: imported.size_unknown).
# Snapshot: a dump reason, 'oom' (first OOM snapshot), 'oom-last', or '*' (last snapshot).
EXPECT = {
    "train_oom_segments": [("segments_total_bytes", "live", "segments-at-oom"),
                           ("segments_total_bytes", "tracked", "segments-at-oom"), ("max_reserved", "peak", "*")],
    "alloc_expandable": [("reserved@measure", "tracked", "measure"), ("reserved@after-free", "tracked", "after-free-3GiB")],
    "alloc_async": [("allocated", "tracked", "measure")],
    "vmm_nvcc": [("tracked_expect_bytes", "tracked", "measure"), ("device_total_bytes", "tracked", "measure"),
                 ("tracked_expect_bytes", "live", "measure"), ("host_pinned_bytes", "host_pinned", "measure"),
                 ("tracked_expect_bytes@after-free", "tracked", "after-free")],
    "cupy_alloc": [("pool_total", "tracked", "measure"), ("host_pinned_bytes", "host_pinned", "measure")],
    "jax_prealloc": [("pool_bytes", "tracked", "measure"), ("bytes_limit", "tracked", "measure")],
    "jax_noprealloc": [("pool_bytes", "tracked", "measure"), ("bytes_reserved", "tracked", "measure")],
    "cuda_graphs": [("reserved", "tracked", "graph alive"), ("reserved@after-graph-freed", "tracked", "graph freed")],
    "cudnn_bench": [("reserved", "tracked", "after benchmark")],
    "mark_steps": [("expected_peak_marker", "marker", "*"), ("max_reserved", "peak", "*"),
                   ("reserved_at_exit", "tracked", "*")],
    "neighbour": [("b_reserved", "tracked", "oom-last")],
    "ipc_size": [("imported_bytes", "imported", "ipc-open"), ("imported_unknown", "imported_unknown", "ipc-open")],
}


def rd(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def fmt(n):
    if not isinstance(n, (int, float)):
        return "?"
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n >= GiB:
        return f"{sign}{n / GiB:.3f}G"
    if n >= MiB:
        return f"{sign}{n / MiB:.1f}M"
    if n >= 1024:
        return f"{sign}{n / 1024:.1f}K"
    return f"{sign}{int(n)}B"


def num(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v.strip()):
        return int(v)
    return None


def get(d, *paths):
    """First value found at any of the dotted paths."""
    for p in paths:
        cur = d
        for k in p.split("."):
            if isinstance(cur, dict) and k in cur:
                cur = cur[k]
            else:
                cur = None
                break
        if cur is not None:
            return cur
    return None


def first_num(d, *keys):
    if not isinstance(d, dict):
        return None
    for k in keys:
        v = num(d.get(k))
        if v is not None:
            return v
    return None


def label_of(v):
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        for k in ("label", "text", "name", "marker"):
            if isinstance(v.get(k), str):
                return v[k]
    if isinstance(v, list) and v:
        return label_of(v[-1])
    return None


def peak_marker(j, peak):
    if isinstance(peak, dict):
        for k, v in peak.items():
            if "marker" in k.lower():
                s = label_of(v)
                if s:
                    return s
    for k, v in (j.items() if isinstance(j, dict) else []):
        if "marker" in k.lower() and "peak" in k.lower():
            s = label_of(v)
            if s:
                return s
    m = j.get("markers") if isinstance(j, dict) else None
    if isinstance(m, dict):
        for k, v in m.items():
            if "peak" in k.lower():
                s = label_of(v)
                if s:
                    return s
    return None


def processes(j):
    p = (j.get("other_processes") or j.get("processes")) if isinstance(j, dict) else None
    if isinstance(p, dict):
        for k in ("list", "entries", "processes", "items"):
            if isinstance(p.get(k), list):
                p = p[k]
                break
    out = []
    if isinstance(p, list):
        for e in p:
            if isinstance(e, dict):
                out.append((first_num(e, "pid"), first_num(e, "used_bytes", "bytes", "used")))
    return out


def digest(j):
    """The numbers of one report (JSON of oomtrace-read)."""
    r = {}
    t = get(j, "trigger", "meta.trigger", "snapshot.trigger")
    r["trigger"] = TRIGGERS.get(t, t) if isinstance(t, int) else (t or "?")
    r["reason"] = get(j, "reason", "meta.reason", "snapshot.reason") or ""
    r["pid"] = num(get(j, "pid", "meta.pid", "process.pid"))
    r["rank"] = num(get(j, "rank", "meta.rank", "process.rank"))
    r["complete"] = get(j, "process.finished", "finished", "complete", "meta.complete")
    r["req"] = num(get(j, "failure.requested_bytes"))
    peak = j.get("peak", j.get("peaks"))
    if isinstance(peak, dict) and first_num(peak, "bytes", "peak_bytes", "total_bytes") is None \
            and all(isinstance(v, dict) for v in peak.values()):
        peak = list(peak.values())  # keyed by device
    if isinstance(peak, list):
        peaks = [p for p in peak if isinstance(p, dict)]
        peak = max(peaks, key=lambda p: first_num(p, "bytes", "peak_bytes") or 0) if peaks else None
    r["peak"] = first_num(peak, "bytes", "peak_bytes", "total_bytes")
    sites = peak.get("sites") if isinstance(peak, dict) else None
    r["sites"] = (sum(first_num(s, "bytes", "live_bytes", "size", "total_bytes") or 0 for s in sites if isinstance(s, dict))
                  if isinstance(sites, list) else None)
    r["nsites"] = first_num(peak, "sites_total") or (len(sites) if isinstance(sites, list) else None)
    r["marker"] = peak_marker(j, peak)
    r["host_pinned"] = num(get(j, "host_pinned.bytes"))
    r["imported"] = num(get(j, "imported.bytes"))
    r["imported_unknown"] = num(get(j, "imported.size_unknown"))
    live = j.get("live")
    r["live"] = first_num(live, "bytes", "total_bytes", "live_bytes") if isinstance(live, dict) else num(get(j, "live_bytes"))
    devs = j.get("devices") or []
    devs = [d for d in (devs.values() if isinstance(devs, dict) else devs) if isinstance(d, dict)]
    r["devs"] = []
    for d in devs:
        total, free = first_num(d, "total_bytes"), first_num(d, "free_bytes")
        r["devs"].append({"ord": first_num(d, "ordinal", "device", "index"), "total": total, "free": free,
                          "used": (total - free) if total and free is not None else None,
                          "base": first_num(d, "baseline_used_bytes"), "tracked": first_num(d, "tracked_bytes")})
    tr = [d["tracked"] for d in r["devs"] if d["tracked"] is not None]
    r["tracked"] = sum(tr) if tr else None
    r["procs"] = processes(j)
    return r


def snap_line(r, ctx):
    bits = [f"[{r['trigger']}{(':' + r['reason']) if r['reason'] else ''}]"]
    if r["rank"] is not None and r["rank"] >= 0:
        bits.append(f"rank={r['rank']}")
    if r["complete"] is False:
        bits.append("INCOMPLETE")
    if r["req"] is not None:
        s = f"req={fmt(r['req'])}"
        if ctx.get("tried"):
            s += f" (torch {ctx['tried'][0]}, d={(r['req'] - ctx['tried'][1]) / ctx['tried'][1] * 100:+.1f}%)"
        bits.append(s)
    if r["peak"] is not None:
        s = f"peak={fmt(r['peak'])}"
        if r["sites"] is not None:
            s += f" sites={fmt(r['sites'])}/{r['nsites']}"
            if r["peak"]:
                s += f"({r['sites'] / r['peak'] * 100:.1f}%)"
        bits.append(s)
    if r["live"] is not None:
        bits.append(f"live={fmt(r['live'])}")
    if r.get("host_pinned"):
        bits.append(f"pinned={fmt(r['host_pinned'])}")
    if r.get("imported") or r.get("imported_unknown"):
        bits.append(f"imported={fmt(r['imported'])}" + (f"+{r['imported_unknown']} unsized" if r.get("imported_unknown") else ""))
    shown = [d for d in r["devs"] if d["tracked"]] or r["devs"][:1]
    for d in shown[:2]:
        s = f"dev{d['ord'] if d['ord'] is not None else '?'}: tracked={fmt(d['tracked'])} used={fmt(d['used'])} base={fmt(d['base'])}"
        if d["used"] is not None and d["base"] is not None and d["tracked"] is not None:
            u = d["used"] - d["base"] - d["tracked"]
            s += f" untracked={fmt(u)}({u / d['used'] * 100 if d['used'] else 0:.1f}%)"
        bits.append(s)
    if r["marker"]:
        bits.append(f"peak-marker='{r['marker'][:40]}'")
    if r["procs"]:
        bits.append("others=" + ",".join(f"{p}:{fmt(b)}" for p, b in r["procs"][:3]))
        if ctx.get("neighbour_pid") is not None:
            bits.append("neighbour-listed=" + ("YES" if any(p == ctx["neighbour_pid"] for p, _ in r["procs"]) else "NO"))
    return "    " + " ".join(bits)


def checks(text):
    """CHECK lines -> {key or key@phase: value}."""
    d = {}
    for line in text.splitlines():
        if not line.startswith("CHECK "):
            continue
        try:
            kv = dict(t.split("=", 1) for t in shlex.split(line[6:]) if "=" in t)
        except ValueError:
            continue
        phase = kv.pop("phase", None)
        rank = kv.pop("rank", None)
        for k, v in kv.items():
            key = k + (f"@{phase}" if phase else "") + (f"@rank{rank}" if rank is not None else "")
            d[key] = num(v) if num(v) is not None else v
    return d


def exc_line(text):
    lines = [l for l in text.splitlines() if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", l)]
    return lines[-1] if lines else None


def compare(plain, traced, mode):
    a, b = plain.splitlines(), traced.splitlines()
    if mode == "sorted":
        a, b = sorted(a), sorted(b)
    if a == b:
        return "SAME", None
    n = sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))
    for x, y in zip(a + [""] * len(b), b + [""] * len(a)):
        if x != y:
            return f"DIFF({n} lines)", f"plain: {x[:110]!r} | traced: {y[:110]!r}"
    return f"DIFF({n})", None


FW_STATS = ("allocated_bytes", "reserved_bytes", "inactive_split_bytes", "num_alloc_retries",
            "memory_fraction_limit_bytes", "bytes_in_use", "bytes_limit", "largest_free_block_bytes",
            "pool_used_bytes", "pool_free_bytes")


def framework_lines(d):
    """The framework layer, read from the snapshots themselves (tests/py/fwdecode.py, independent of the
    reader): how many snapshots, the fatal one(s) with the request and probes, the allocator's figures."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
    import fwdecode
    files = sorted(glob.glob(os.path.join(d, "snap", "**", "*.oomt"), recursive=True), key=os.path.getmtime)
    if not files:
        return []
    fatal, with_fw = [], 0
    last_fw = None
    for f in files:
        try:
            j = fwdecode.decode(f)
        except Exception as e:  # noqa: BLE001 - a summary line, not a verdict
            return [(1, f"    framework: {os.path.basename(f)}: undecodable ({str(e)[:100]})")]
        if "framework" in j:
            with_fw += 1
            last_fw = (f, j)
        if j.get("trigger") == 6:
            fatal.append((f, j))
    lines = []
    head = f"    framework: {len(files)} snapshots, {len(fatal)} fatal (framework-oom), {with_fw} with allocator state"
    lines.append((1, head))
    for f, j in fatal[:2] or ([last_fw] if last_fw else []):
        fail = j.get("failure", {})
        recs = j.get("framework", {}).get("records", [])
        stats = {}
        for r in recs:
            if r["kind"] == "STATS":
                for k in FW_STATS:
                    if k in r["stats"]:
                        stats[f"{r['framework']}.{k}"] = r["stats"][k]
        segs = [r for r in recs if r["kind"] == "SEGMENTS"]
        private = sum(1 for r in segs for fl in r["segments"]["flags"] if fl & 4)
        err = next((r["text"] for r in recs if r["kind"] == "ERROR"), "")
        desc = (f"    {os.path.basename(f)[-40:]}: reason={j.get('reason')} req={fmt(fail.get('requested', 0))} "
                f"probes={len(j.get('probes', []))} segments={sum(len(r['segments']['address']) for r in segs)} "
                f"private_pool_segments={private} " +
                " ".join(f"{k}={fmt(v) if v > 4096 else v}" for k, v in stats.items()))
        lines.append((1, desc[:400]))
        if err:
            lines.append((2, f"      error: {err[:160]!r}"))
    return lines


def workload(R, wl):
    d = os.path.join(R, wl)
    info = dict(l.split("=", 1) for l in rd(os.path.join(d, "info.txt")).splitlines() if "=" in l)
    head = [f"-- {wl}:"]
    if info.get("skipped"):
        return [(0, f"-- {wl}: SKIPPED ({info['skipped']})")]
    res = {}
    for mode in ("plain", "traced"):
        if os.path.exists(os.path.join(d, mode + ".skipped")):
            head.append(f"{mode} SKIPPED({rd(os.path.join(d, mode + '.skipped')).strip()})")
            continue
        rc = rd(os.path.join(d, mode + ".rc")).strip()
        if not rc:
            continue
        ms = num(rd(os.path.join(d, mode + ".ms")).strip())
        res[mode] = (rc, ms)
        s = f"{mode} rc={rc}{' TIMEOUT' if rc in ('124', '137') else ''} {ms / 1000 if ms else 0:.1f}s"
        if mode == "traced" and "plain" in res and res["plain"][1] and ms:
            s += f"({(ms / res['plain'][1] - 1) * 100:+.0f}%)"
        head.append(s)
    pout, tout = rd(os.path.join(d, "plain.out")), rd(os.path.join(d, "traced.out"))
    perr, terr = rd(os.path.join(d, "plain.err")), rd(os.path.join(d, "traced.err"))
    detail = []
    if "plain" in res and "traced" in res:
        if res["plain"][0] != res["traced"][0]:
            head.append("RC-DIFFERS")
        mode = info.get("compare", "exact")
        if mode != "none":
            verdict, first = compare(pout, tout, mode)
            head.append(f"stdout {verdict}")
            if first:
                detail.append((1, "    first stdout diff: " + first))
        if info.get("errline") == "1":
            ea, eb = exc_line(perr), exc_line(terr)
            nopid = lambda s: re.sub(r"\b[Pp]rocess \d+", "Process PID", s or "")
            if ea != eb and nopid(ea) == nopid(eb):
                head.append("errline SAME(pids masked)")
            elif ea == eb:
                head.append("errline SAME" if ea else "errline NONE")
            else:
                mask = lambda s: re.sub(r"\d+(\.\d+)?", "N", s or "")
                head.append("errline SAME-but-numbers" if mask(ea) == mask(eb) else "errline DIFF")
                detail.append((1, f"    errline plain: {(ea or '')[:150]!r}"))
                detail.append((1, f"    errline traced: {(eb or '')[:150]!r}"))
    # What the traced run said on stderr that the plain one did not (tracer messages, new tracebacks).
    ctx = {}
    m = re.findall(r"Tried to allocate ([\d.]+) (GiB|MiB|KiB|B)", terr or perr)
    if m:
        v, u = m[-1]
        ctx["tried"] = (f"{v}{u}", float(v) * {"GiB": GiB, "MiB": MiB, "KiB": 1024, "B": 1}[u])
        head.append(f"torch-tried={v}{u}")
    ck = checks(tout + "\n" + terr) or checks(pout + "\n" + perr)
    if "neighbour_pid" in ck:
        ctx["neighbour_pid"] = ck["neighbour_pid"]
    snapfiles = {os.path.basename(p): p for p in glob.glob(os.path.join(d, "snap", "**"), recursive=True)
                 if os.path.isfile(p)}

    def when(report):
        src = snapfiles.get(os.path.basename(report)[:-5], report)
        return (os.path.getmtime(src), src)

    snaps = sorted(glob.glob(os.path.join(d, "reports", "*.json")), key=when)
    nsnap = len(snapfiles)
    if "traced" in res:
        head.append(f"snaps={nsnap}")
    digests = []
    for p in snaps:
        try:
            j = json.loads(rd(p) or "null")
        except ValueError:
            j = None
        if not isinstance(j, dict):
            e1 = (rd(p + ".err").strip().splitlines() or [rd(p + ".rc").strip() and f"rc={rd(p + '.rc').strip()}" or "no output"])[0]
            detail.append((1 if not digests else 2, f"    {os.path.basename(p)[:-5][:40]}: reader failed: {e1[:150]}"))
            continue
        digests.append(digest(j))
    for i, r in enumerate(digests[:MAX_SNAP_LINES]):
        detail.append((1 if i == 0 else 2, snap_line(r, ctx)))
    if len(digests) > MAX_SNAP_LINES:
        detail.append((2, f"    (+{len(digests) - MAX_SNAP_LINES} more snapshots: {', '.join(r['trigger'] for r in digests[MAX_SNAP_LINES:])})"))
    # Script numbers against report numbers.
    cmp = []
    for key, qty, sel in EXPECT.get(wl, []):
        want = ck.get(key)
        if want is None:
            continue
        pick = None
        if sel == "*":
            pick = digests[-1] if digests else None
        elif sel in ("oom", "oom-last"):
            ooms = [r for r in digests if r["trigger"] == "oom"]
            pick = (ooms[0] if sel == "oom" else ooms[-1]) if ooms else None
        else:
            pick = next((r for r in digests if r["reason"] == sel), None)
        if pick is None:
            cmp.append(f"{key} vs {qty}[{sel}]: no such snapshot")
            continue
        got = pick.get(qty)
        if isinstance(want, str):  # a label, e.g. the marker expected at the peak
            cmp.append(f"{key}='{want}' vs {qty}[{sel}]='{got}' {'EQ' if got == want else 'DIFF'}")
            continue
        if not isinstance(got, (int, float)):
            cmp.append(f"{key}={fmt(want)} vs {qty}[{sel}]=?")
            continue
        dd = got - want
        tag = "EQ" if dd == 0 else ("~" if want and abs(dd) <= 0.01 * abs(want) else "DIFF")
        cmp.append(f"{key}={fmt(want)} vs {qty}[{sel}]={fmt(got)} d={dd:+d}B {tag}" if isinstance(dd, int)
                   else f"{key}={fmt(want)} vs {qty}[{sel}]={fmt(got)} {tag}")
    if cmp:
        detail.append((1, "    check: " + "; ".join(cmp)))
    elif ck:
        detail.append((2, "    script: " + " ".join(f"{k}={fmt(v) if isinstance(v, (int, float)) and v > 4096 else v}"
                                                 for k, v in list(ck.items())[:8])))
    if "merged_rc" in info or os.path.exists(os.path.join(d, "merged.rc")):
        mrc = rd(os.path.join(d, "merged.rc")).strip()
        mfirst = (rd(os.path.join(d, "merged.txt")).strip().splitlines() or
                  rd(os.path.join(d, "merged.err")).strip().splitlines() or [""])[0]
        detail.append((1, f"    merged view (oomtrace-read DIR): rc={mrc} {mfirst[:120]!r}"))
    tlines = [l for l in terr.splitlines() if (re.match(r"\s*\[?(lib)?oomtrace\b(?!\.dump\(|_dump_if)", l, re.I)
                                              or "liboomtrace" in l) and l not in perr]
    if tlines:
        uniq = list(dict.fromkeys(tlines))
        detail.append((1 if not digests else 2, f"    tracer stderr ({len(tlines)}): " + " | ".join(u[:140] for u in uniq[:2])))
    if "plain" in res and "traced" in res and res["plain"][0] != res["traced"][0]:
        tail = [l for l in terr.splitlines() if l.strip()][-2:]
        detail.append((1, "    traced stderr tail: " + " | ".join(t[:150] for t in tail)))
    elif "traced" in res and res["traced"][0] not in ("0",) and info.get("expect_rc", "0") != res["traced"][0]:
        tail = [l for l in terr.splitlines() if l.strip()][-1:]
        detail.append((1, "    traced stderr tail: " + " | ".join(t[:150] for t in tail)))
    try:
        detail.extend(framework_lines(d))
    except Exception as e:  # noqa: BLE001 - one odd snapshot must not cost the summary
        detail.append((1, f"    framework: summary failed: {type(e).__name__}: {str(e)[:120]}"))
    if info.get("note"):
        detail.append((3, "    note: " + info["note"]))
    return [(0, " ".join(head))] + detail


def main():
    R = sys.argv[1]
    out = []
    out.extend(rd(os.path.join(R, "header.txt")).rstrip().splitlines())
    out.append("legend: per snapshot [trigger:reason] req=failure.requested_bytes peak=peak.bytes sites=sum(peak.sites)/n "
               "live=live.bytes devN: tracked used=total-free base=baseline untracked=used-base-tracked(% of used); "
               "check: script's number vs report's (EQ exact, ~ within 1%)")
    order = [w for w in rd(os.path.join(R, "order.txt")).split() if w]
    blocks = []
    for wl in order:
        try:
            blocks.append(workload(R, wl))
        except Exception as e:  # one odd report must not cost the whole summary
            blocks.append([(0, f"-- {wl}: summarize.py error {type(e).__name__}: {str(e)[:150]}")])
    # Every workload's first line; then detail lines by priority (1 before 2 before 3) while they fit.
    budget = MAX_CHARS - len("\n".join(out)) - 80
    keep = set()
    for prio in (0, 1, 2, 3):
        for bi, b in enumerate(blocks):
            for li, (p, line) in enumerate(b):
                if p == prio and (prio == 0 or len(line) + 1 <= budget):
                    keep.add((bi, li))
                    budget -= len(line) + 1
    lines = out + [line for bi, b in enumerate(blocks) for li, (p, line) in enumerate(b) if (bi, li) in keep]
    text = "\n".join(lines)
    if len(keep) < sum(len(b) for b in blocks):
        text += "\n(summary shortened; everything is in gpu-results.tar.gz)"
    tail = rd(os.path.join(R, "footer.txt")).rstrip()
    print(text + ("\n" + tail if tail else ""))


if __name__ == "__main__":
    main()
