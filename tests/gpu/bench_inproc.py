"""Issue 16's rows within one process: the tracer's cost as the difference between blocks of the same work
traced and passed through, in the same process (bench_alloc_pair.py --inproc, under the pass-through build and
the stage build).

    python3 tests/gpu/bench_inproc.py {STAGE_LIB [--pass-lib PASS_LIB] | --pass-lib PASS_LIB --pass-only}
                                      [--cases step,pair,pair20,c_async] [--procs 3] [--rounds 16] [--steps 50]
                                      [--pairs 20000] [--cpus 4-7] [--cbin alloc_pair]

--pass-lib (build/bench/liboomtrace-pass.so, made by make bench-stages): each case's processes alternate between
it and the stage build. The pass-through build is the normal build's code with the switch and without the stage
build's probes, which run in traced blocks only (on the H200 an empty probe costs ~120 cycles, and a pair passes
four: a wrapper's and its driver call's, for each of its two calls), so its ratio is the one to read; the stage
build's rows give the counted column, and their ratio less the pass-through one is what the probes add.

c_async is the C program's pair (tests/gpu/alloc_pair.c ROUNDS inproc: loops of 20,000 cuMemAllocAsync +
cuMemFreeAsync, the switch through oomtrace_mark found in the process).

Why: between processes the H200 host's step moves by up to a half (docs/validation.md, run 14), so alternating
bare and traced processes resolves the step's ratio to ~±20%, not the 2% it is held to. Within one process the
two modes share the host's speed; a round (one traced block, one passed through, ABBA) spreads by ~2% for the
pairs and ~7% for 50-step blocks on the H200 (runs 76-78), so the rounds of several processes are pooled.

Prints one line a process and case ("pass" or "stage": the build it ran), then one summary line a case and build:
  ratio      each round's traced block over its passed-through one, the median of the rounds; in the
             summary, the geometric mean over every round of every process, with its standard error, the
             median round, and the spread of a round's log ratio: the issue's "step ≤ 1.02" row
  added      the same as a difference, ns a step or a pair: the pair rows' "+0.3 µs", the C row's "+150 ns"
  counted    the stage build's own count of the tracer's time in the traced blocks (the wrappers' outer probes,
             OOMTRACE_STAGE_PROBES=outer), over the traced blocks' time: what the tracer spends inside its
             wrappers. ratio - 1 less this is what the tracer costs the host outside them (its caches), plus
             the probes' own time
What a passed-through block still pays: the wrapper's call and its checks (a few ns a call), so the figures
leave that out. Needs PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (set here) and a CUDA device. Exit status 1
when a process failed (its row says why), 0 otherwise."""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

from bench_pair_parts import stages_line  # the bench builds' exit lines, parsed

HERE = os.path.dirname(os.path.abspath(__file__))


def rounds_of(blocks):
    """Each round's (traced, passed-through) block times (a round: two blocks, either order)."""
    return [(a["ns"], b["ns"]) if a["traced"] else (b["ns"], a["ns"]) for a, b in zip(blocks[0::2], blocks[1::2])]


def round_ratios(blocks):
    """Each round's traced block over its passed-through one."""
    return [t / p for t, p in rounds_of(blocks)]


def process_figures(blocks):
    """One process's median round (ratio and difference) and its least blocks' ratio."""
    rounds = rounds_of(blocks)
    least = {m: min(b["ns"] for b in blocks if b["traced"] == m) for m in (True, False)}
    return {"ratio_median": statistics.median(t / p for t, p in rounds),
            "added_median": statistics.median(t - p for t, p in rounds),
            "ratio_least": least[True] / least[False]}


def pass_error(st, nblocks):
    """Why a pass-through build's process is no measure (its exit line st, nblocks blocks), or None: each round
    switches twice, and the last mark switches back to traced."""
    if st is None:
        return "no OOMTRACE_PASS line: not the pass-through build, or no mark reached its switch"
    if st.get("switches") != nblocks + 1:
        return "the pass-through build switched %r times, want %d: a switch the library did not take" % (
            st.get("switches"), nblocks + 1)
    return None


def last_error(stderr):
    """A failed process's last line of its own: the builds' exit lines (OOMTRACE_...) come after it."""
    lines = [l for l in stderr.strip().splitlines() if not l.startswith("OOMTRACE_")]
    return lines[-1][:200] if lines else ""


def one(lib, case, a, build="stage"):
    env = dict(os.environ, LD_PRELOAD=lib, PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync", OOMTRACE_DUMP="none",
               OOMTRACE_QUIET="1", OOMTRACE_FRAMEWORKS="0", OOMTRACE_STAGE_PROBES="outer")
    if case == "c_async":  # tests/gpu/alloc_pair.c, built by bench_alloc_pair.sh: loops of 20,000 pairs
        cmd = [a.cbin, str(a.rounds), "inproc"]
    else:
        cmd = [sys.executable, os.path.join(HERE, "bench_alloc_pair.py"), case, "--inproc", "--loops", str(a.rounds),
               "--steps", str(a.steps), "--pairs", str(a.pairs)]
    if a.cpus:
        cmd = ["taskset", "-c", a.cpus] + cmd
    try:  # a process that hangs, crashes or prints what is not JSON is a row with an error, not the end of the run
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
        out = p.stdout.strip().splitlines()
        if p.returncode or not out:
            return {"case": case, "error": "status %d: %s" % (p.returncode, last_error(p.stderr))}
        st = stages_line(p.stderr, "OOMTRACE_STAGES" if build == "stage" else "OOMTRACE_PASS")
        res = json.loads(out[-1])
    except (subprocess.TimeoutExpired, OSError, ValueError) as e:
        return {"case": case, "error": repr(e)[:200]}
    blocks = res["blocks"]
    if len(blocks) < 2 or len(blocks) % 2:
        return {"case": case, "error": "%d blocks: not whole rounds" % len(blocks)}
    res["build"] = build
    res.update(process_figures(blocks))
    res["counted"] = None
    if build == "pass":
        err = pass_error(st, len(blocks))
        return {"case": case, "error": err} if err else res
    if st is None:
        return {"case": case, "error": "no OOMTRACE_STAGES line: not the stage build, or no wrapper was reached"}
    marks = [m for m in st.get("marks", []) if m["label"] in ("stage: traced", "stage: pass-through")]
    n = res.get("n") or (a.steps if case == "step" else a.pairs)
    # (the stage build keeps 1,024 marks: more blocks than that are not counted)
    if len(marks) == len(blocks) + 1:
        tracer = sum(marks[i + 1]["tracer_ns"] - marks[i]["tracer_ns"] for i, b in enumerate(blocks) if b["traced"])
        res["counted"] = tracer / sum(b["ns"] * n for b in blocks if b["traced"])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lib", nargs="?", help="the stage build: build/bench/liboomtrace-stages.so (not with --pass-only)")
    ap.add_argument("--pass-lib", help="the pass-through build (build/bench/liboomtrace-pass.so): its processes "
                    "alternate with the stage build's, and its ratio is read without the probes")
    ap.add_argument("--cases", default="step,pair,pair20", help="of step, pair, pair20, c_async (needs --cbin)")
    ap.add_argument("--cbin", help="tests/gpu/alloc_pair.c built (case c_async)")
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--steps", type=int, default=50, help="steps a block (step)")
    ap.add_argument("--pairs", type=int, default=20000, help="pairs a block (pair, pair20)")
    ap.add_argument("--cpus", default="", help="taskset's CPU list for each process (none: not pinned)")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--raw", help="append each process's JSON line (its blocks, and counted) to this file")
    ap.add_argument("--pass-only", action="store_true", help="with --pass-lib: its processes alone, no counted column")
    a = ap.parse_args()
    if a.pass_only and not a.pass_lib:
        ap.error("--pass-only needs --pass-lib")
    if a.pass_only and a.lib:
        ap.error("--pass-only runs the pass-through build alone: no stage build")
    if not a.pass_only and not a.lib:
        ap.error("the stage build is needed (or --pass-lib with --pass-only)")
    if a.rounds < 2 or a.rounds % 2:
        ap.error("--rounds must be even and at least 2 (ABBA)")
    if "c_async" in a.cases.split(",") and not a.cbin:
        ap.error("case c_async needs --cbin (tests/gpu/alloc_pair.c built)")
    builds = [("pass", os.path.abspath(a.pass_lib))] if a.pass_lib else []
    if not a.pass_only:
        builds.append(("stage", os.path.abspath(a.lib)))
    failed = 0
    for case in a.cases.split(","):
        runs = {b: [] for b, _ in builds}
        for _ in range(a.procs):
            for build, lib in builds:
                r = one(lib, case, a, build)
                if "error" in r:
                    print(json.dumps(r), flush=True)
                    failed += 1
                    continue
                runs[build].append(r)
                if a.raw:
                    with open(a.raw, "a") as f:
                        f.write(json.dumps(r) + "\n")
                print("%-6s %-5s ratio %.4f  added %+8.1f %s  least %.4f  counted %s  (%d rounds)" % (
                    case, build, r["ratio_median"], r["added_median"], r["unit"], r["ratio_least"],
                    "%.2f%%" % (100 * r["counted"]) if r["counted"] is not None else "-", len(r["blocks"]) // 2),
                    flush=True)
        for build, _ in builds:
            summary(case, build, runs[build])
    sys.exit(1 if failed else 0)


def summary(case, build, got):
    """One case's line for one build: every round of its processes pooled."""
    if not got:
        return
    # every round of every process pooled: the geometric mean of the rounds' ratios and its standard error
    # The spread of a round's log ratio says whether the host held its speed within the processes: ~0.02
    # for the pairs and ~0.07 for 50-step blocks on a steady H200 host, 0.18 where its speed moved within
    # a process (docs/validation.md, run 77); the median of the rounds then reads better than the mean.
    logs = [math.log(ratio) for r in got for ratio in round_ratios(r["blocks"])]
    sd = statistics.stdev(logs) if len(logs) > 1 else 0.0
    mean, se = statistics.mean(logs), sd / math.sqrt(len(logs))
    counted = [r["counted"] for r in got if r["counted"] is not None]
    print("%-6s %-5s SUMMARY %d processes, %d rounds: ratio %.4f ± %.4f (geometric mean, its standard error), "
          "median round %.4f, spread of a round's log ratio %.3f, processes' medians %.4f–%.4f, "
          "added median %+.1f %s, counted %s%s" % (
              case, build, len(got), len(logs), math.exp(mean), math.exp(mean) * se,
              math.exp(statistics.median(logs)), sd,
              min(r["ratio_median"] for r in got), max(r["ratio_median"] for r in got),
              statistics.median(r["added_median"] for r in got), got[0]["unit"],
              "%.2f%%" % (100 * statistics.median(counted)) if counted else "-",
              "" if len(counted) == len(got) or build == "pass" else
              " (%d not counted: over 1,024 marks)" % (len(got) - len(counted))),
          flush=True)


if __name__ == "__main__":
    main()
