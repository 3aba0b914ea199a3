"""Where a traced allocation's time goes when the tracer's own code is small (issue 16, sixth pass): the runner
behind tests/gpu/bench_pair_parts.sh (which builds the C loop and sets the environment; read its header).

The C pair (tests/gpu/alloc_pair.c with `split`: rdtsc around each call) runs in whole processes, pinned,
round by round in a rotating order, as four variants:
  bare         untraced;
  traced       the library (build/liboomtrace.so);
  outer        the stage build with only the wrappers' probes (OOMTRACE_STAGE_PROBES=outer): it times the
               driver calls inside the wrappers, to set against the bare process's calls timed by the program;
  outer_drop   the same with the ring's compressor off (OOMTRACE_STAGE_RING=drop: full blocks emptied in place).
Then the CPU-bound step (tests/gpu/bench_alloc_pair.py step) once bare, once under the stage build with every
probe (the split of each stage by thread: main or other, and whether the previous event was another
thread's) and once with the outer probes only (the tracer's time a step with one probe subtracted).

Settings from the environment: OUT, PIN (4-7), C_BUDGET (seconds of C rounds, 75), ROUNDS (at most, 16),
STEP (1: run the step part), LIB, STAGES_LIB, CBIN, CARRY_LD.

    python3 tests/gpu/bench_pair_parts.py --table OUT/parts.jsonl    # the tables again from the raw lines"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.environ
PIN = ENV.get("PIN", "4-7")
PIN_CMD = ["taskset", "-c", PIN] if PIN else []
C_LOOPS = 8


def variant_env(v):
    e = dict(ENV)
    e.pop("LD_PRELOAD", None)
    e.update({"OOMTRACE_FRAMEWORKS": "0", "OOMTRACE_QUIET": "1"})
    carry = ENV.get("CARRY_LD", "")
    if v == "bare":
        return e
    if v == "traced":
        e.update(LD_PRELOAD=ENV["LIB"], LD_LIBRARY_PATH=carry)
        return e
    e.update(LD_PRELOAD=ENV["STAGES_LIB"], LD_LIBRARY_PATH=carry)
    if v in ("outer", "outer_drop", "step_outer"):
        e["OOMTRACE_STAGE_PROBES"] = "outer"
    if v == "outer_drop":
        e["OOMTRACE_STAGE_RING"] = "drop"
    return e


def stages_line(text, name="OOMTRACE_STAGES"):
    """A bench build's exit line in a process's stderr, its JSON object (the stage build's OOMTRACE_STAGES, or the
    pass-through build's OOMTRACE_PASS), or None."""
    for line in text.splitlines():
        at = line.find(name + " ")
        if at >= 0:
            return json.loads(line[at + len(name) + 1:])
    return None


def one(cmd, v, timeout):
    try:
        r = subprocess.run(PIN_CMD + cmd, env=variant_env(v), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        return {"variant": v, "result": res, "stages": stages_line(r.stderr)}
    except Exception as e:  # a crash or a timeout is a row with an error, not the end of the run
        return {"variant": v, "error": repr(e)}


def run():
    out = ENV["OUT"]
    raw = os.path.join(out, "parts.jsonl")
    cbin, py = ENV["CBIN"], sys.executable
    variants = ["bare", "traced", "outer", "outer_drop"]
    t0 = time.monotonic()
    with open(raw, "w") as f:
        def keep(row, rnd):
            row["round"] = rnd
            if "error" in row:
                print(f"bench_pair_parts: {row['variant']}: {row['error']}", file=sys.stderr)
            f.write(json.dumps(row) + "\n")
            f.flush()
        for rnd in range(1, int(ENV.get("ROUNDS", "16")) + 1):
            if rnd > 1 and time.monotonic() - t0 > float(ENV.get("C_BUDGET", "75")):
                break
            k = (rnd - 1) % len(variants)
            for v in variants[k:] + variants[:k]:
                keep(one([cbin, str(C_LOOPS), "split"], v, 60), rnd)
        print(f"bench_pair_parts: C rounds {time.monotonic() - t0:.0f}s", file=sys.stderr)
        keep(one([cbin, str(C_LOOPS), "split"], "fine", 60), 0)
        if ENV.get("STEP", "1") == "1":
            step = [py, os.path.join(HERE, "bench_alloc_pair.py"), "step", "--loops", "4", "--steps", "100"]
            for v in ("bare", "step_fine", "step_outer"):
                keep(one(step, v, 150), 0)
    print(f"bench_pair_parts: {time.monotonic() - t0:.0f}s", file=sys.stderr)
    return raw


def lm(xs):
    """least and median, as text"""
    xs = [x for x in xs if x is not None]
    return f"{min(xs):.1f} / {statistics.median(xs):.1f}" if xs else "-"


def per_call(st, stage):
    s = st["stages"][stage]
    return s["cycles"] * st["ns_per_cycle"] / s["calls"] if s["calls"] else None


def c_tables(rows):
    c = [r for r in rows if r.get("round", 0) > 0 and "result" in r and "split" in r["result"]]
    by = {}
    for r in c:
        by.setdefault(r["variant"], []).append(r)
    print("C pair, tests/gpu/alloc_pair.c split (ns; least / median over the processes of each variant)")
    print("| variant | processes | ns/pair, least loop | its alloc call | its free call | its rest of the loop "
          "| alloc call, all pairs | free call, all pairs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for v in ("bare", "traced", "outer", "outer_drop"):
        rs = by.get(v, [])
        if not rs:
            continue
        g = lambda part, k: [r["result"]["split"][part][k] for r in rs]  # noqa: E731
        print(f"| {v} | {len(rs)} | {lm([r['result']['min'] for r in rs])} | {lm(g('least', 'alloc'))} | "
              f"{lm(g('least', 'free'))} | {lm(g('least', 'rest'))} | {lm(g('all', 'alloc'))} | "
              f"{lm(g('all', 'free'))} |")
    print()
    print("Inside the wrappers (the stage build, outer probes; per call over all pairs; probe = one begin/end pair)")
    print("| variant | driver's alloc inside | driver's free inside | alloc hook less its driver call and probe "
          "| free hook | call less hook (alloc) | call less hook and driver (free) | probe |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for v in ("outer", "outer_drop"):
        rs = [r for r in by.get(v, []) if r.get("stages")]
        if not rs:
            continue
        cols = {k: [] for k in ("da", "df", "ha", "hf", "ea", "ef", "pr")}
        for r in rs:
            st, sp = r["stages"], r["result"]["split"]["all"]
            pr = st["probe_cycles"] * st["ns_per_cycle"]
            da, df = per_call(st, "driver_alloc"), per_call(st, "driver_free")
            ha, hf = per_call(st, "hook"), per_call(st, "hook_free")
            cols["da"].append(da)
            cols["df"].append(df)
            cols["ha"].append(ha - da - pr)
            cols["hf"].append(hf)
            cols["ea"].append(sp["alloc"] - ha)
            cols["ef"].append(sp["free"] - hf - df)
            cols["pr"].append(pr)
        print(f"| {v} | " + " | ".join(lm(cols[k]) for k in ("da", "df", "ha", "hf", "ea", "ef", "pr")) + " |")
    bare = by.get("bare", [])
    if bare:
        ba = [r["result"]["split"]["all"]["alloc"] for r in bare]
        bf = [r["result"]["split"]["all"]["free"] for r in bare]
        print()
        print(f"The same calls in the bare processes (all pairs): alloc {lm(ba)}, free {lm(bf)}. The driver's calls "
              "inside the wrappers less these (least less least) say whether the driver runs slower traced:")
        for v in ("outer", "outer_drop"):
            rs = [r for r in by.get(v, []) if r.get("stages")]
            if rs:
                da = min(per_call(r["stages"], "driver_alloc") for r in rs)
                df = min(per_call(r["stages"], "driver_free") for r in rs)
                print(f"  {v}: alloc {da - min(ba):+.1f} ns, free {df - min(bf):+.1f} ns")
    fine = [r for r in rows if r["variant"] == "fine" and r.get("stages")]
    for r in fine:
        st = r["stages"]
        print()
        print(f"C pair, every probe (one process): tracer {2 * st['tracer_ns_per_event']:.1f} ns a pair counted, "
              f"{st['nested_probes'] / max(1, st['allocs']):.1f} nested probes an allocation of "
              f"{st['probe_cycles'] * st['ns_per_cycle']:.1f} ns each")
        for k, s in st["stages"].items():
            if s["calls"]:
                print(f"  {k:13s} {s['calls']:9d} calls {s['cycles'] * st['ns_per_cycle'] / s['calls']:8.1f} ns each")


CLASSES = ("main", "other", "main_switched", "other_switched", "gap_near", "gap_mid", "gap_far")


def split_table(st):
    npc = st["ns_per_cycle"]
    g = st.get("gap_cycles", [0, 0])
    print(f"  split, ns a call (calls): switched = the previous event was another thread's; gap = since the thread's "
          f"previous hook: near < {g[0]} ticks, mid < {g[1]}, far beyond")
    print("  | stage | " + " | ".join(CLASSES) + " |")
    print("  |---|" + "---:|" * len(CLASSES))
    for k, v in st["split"].items():
        cells = []
        for c in CLASSES:
            n, cy = v[c]
            cells.append(f"{cy * npc / n:.0f} ({n})" if n else "-")
        print(f"  | {k} | " + " | ".join(cells) + " |")
    if st.get("probes") == "outer":
        # the allocation's wrapper less its driver call and that call's probe: the tracer's own, by class
        pr = st["probe_cycles"] * npc
        h, d = st["split"]["hook"], st["split"]["driver_alloc"]
        cells = [f"{(h[c][1] - d[c][1]) * npc / h[c][0] - pr:.0f}" if h[c][0] else "-" for c in CLASSES]
        print("  | alloc hook less its driver call | " + " | ".join(cells) + " |")


def step_tables(rows):
    steps = [r for r in rows if r["variant"] in ("bare", "step_fine", "step_outer") and r.get("round") == 0
             and "result" in r and r["result"].get("case") == "step"]
    bare = [r["result"]["min"] / 1e3 for r in steps if r["variant"] == "bare"]
    for r in steps:
        st = r["stages"]
        us = r["result"]["min"] / 1e3
        print()
        if not st:
            print(f"step, {r['variant']}: {us:.1f} us a step (least loop)")
            continue
        ran = 20 + 4 * 100
        t = st["tracer_ns"] / ran / 1e3
        share = f", {100 * t / min(bare):.2f}% of the bare step" if bare else ""
        print(f"step, {r['variant']}: {us:.1f} us a step; tracer {t:.1f} us a step counted{share}; "
              f"{(st['allocs'] + st['frees']) / ran:.0f} events a step; {st['tracer_ns_per_event']:.0f} ns an event; "
              f"probe {st['probe_cycles'] * st['ns_per_cycle']:.1f} ns, {st['nested_probes']} nested")
        loops = {m["label"]: m for m in st.get("marks", [])}
        a, b = loops.get("timed loops"), loops.get("timed loops end")
        if a and b:  # the timed loops alone (bench_alloc_pair.py marks them): the steady step, as the ratio reads it
            t = (b["tracer_ns"] - a["tracer_ns"]) / 400 / 1e3
            share = f", {100 * t / min(bare):.2f}% of the bare step" if bare else ""
            print(f"  within the timed loops (400 steps): tracer {t:.1f} us a step{share}; "
                  f"{(b['events'] - a['events']) / 400:.0f} events a step; before them (setup, 20 warm steps): "
                  f"{a['tracer_ns'] / 1e6:.2f} ms")
        rates = [f"{k} {100.0 * v['hit'] / (v['hit'] + v['miss']):.1f}% of {v['hit'] + v['miss']}"
                 for k, v in st.get("caches", {}).items() if v["hit"] + v["miss"]]
        if rates:  # (counted with every probe only)
            print("  caches, hit rate: " + ", ".join(rates))
        split_table(st)


def table(raw):
    rows = [json.loads(line) for line in open(raw) if line.strip()]
    c_tables(rows)
    step_tables(rows)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--table":
        table(sys.argv[2])
    else:
        table(run())
