"""Reads the stage build's lines (OOMTRACE_STAGES {...}, build/bench/liboomtrace-stages.so, on stderr) and
prints each process's stages per call and per allocation event, and its caches' hit rates.

    python3 bench/stage_summary.py FILE [--steps N]    # --steps: the steps the process ran, for a per-step line
With marks "timed loops" and "timed loops end" in the process (bench/step_mix.py sets them), --steps counts the
steps between them (step_mix: STEPS x LOOPS) and the per-step line is the tracer's time within them.
Prints a table per process, then one line of JSON per process: {"tracer_ns_per_event", "tracer_us_per_step", ...}."""
import json
import sys


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "-"
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 0
    src = sys.stdin if path == "-" else open(path, encoding="utf-8", errors="replace")
    for line in src:
        at = line.find("OOMTRACE_STAGES ")
        if at < 0:
            continue
        d = json.loads(line[at + len("OOMTRACE_STAGES "):])
        npc, allocs, frees = d["ns_per_cycle"], d["allocs"], d["frees"]
        print(f"pid {d['pid']}: {allocs} allocations, {frees} frees; {npc:.4f} ns a cycle ({d['rate_from']}); "
              f"a probe adds {d['probe_cycles']} cycles to the stage around it")
        print(f"  {'stage':14s} {'calls':>9s} {'cycles/call':>12s} {'ns/call':>9s} {'ns/alloc':>9s}")
        for k, v in d["stages"].items():
            if not v["calls"]:
                continue
            c = v["cycles"] / v["calls"]
            print(f"  {k:14s} {v['calls']:9d} {c:12.0f} {c * npc:9.1f} {v['ns'] / max(1, allocs):9.1f}")
        for k, v in d["caches"].items():
            n = v["hit"] + v["miss"]
            if n:
                print(f"  cache {k:14s} hit {v['hit']:8d} miss {v['miss']:8d} ({100.0 * v['hit'] / n:.1f}% hit)")
        out = {"pid": d["pid"], "allocs": allocs, "frees": frees,
               "tracer_ns_per_event": d["tracer_ns_per_event"], "tracer_ns": d["tracer_ns"]}
        marks = {m["label"]: m for m in d.get("marks", [])}
        a, b = marks.get("timed loops"), marks.get("timed loops end")
        if steps and a and b:
            out["tracer_us_per_step"] = round((b["tracer_ns"] - a["tracer_ns"]) / steps / 1e3, 2)
            out["events_per_step"] = round((b["events"] - a["events"]) / steps, 1)
            out["tracer_ms_before_loops"] = round(a["tracer_ns"] / 1e6, 2)
        elif steps:
            out["tracer_us_per_step"] = round(d["tracer_ns"] / steps / 1e3, 2)
            out["events_per_step"] = round((allocs + frees) / steps, 1)
        print(json.dumps(out))


if __name__ == "__main__":
    main()
