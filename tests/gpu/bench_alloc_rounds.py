"""Issue 16's table, the runner behind tests/gpu/bench_alloc_pair.sh (which builds the C loop and sets the
environment; read its header first). Bare and traced processes alternate round by round, the order flipping
every round; the table leads with the least of each variant's per-process minima and keeps the median of the
per-round differences beside it.

The Python cases run in forked children of one fork server a variant (tests/gpu/bench_alloc_pair.py serve):
a child is a new process with its own CUDA context, so it draws the host's speed afresh, and it costs no
interpreter start or torch import, so a round of every case fits in a few seconds. The C loop runs as whole
processes (C_REPS a variant and round: they are cheap). Beside the wall clock, the stage build
(build/bench/liboomtrace-stages.so) counts the tracer's own cycles in a few processes per case: that figure
does not depend on the host's speeds.

Settings come from the environment (bench_alloc_pair.sh sets them): ROUNDS, BUDGET, CASES, C_REPS, QUICK,
PIN, OUT, LIB, STAGES_LIB, CBIN, CARRY_LD, PAIRS, LOOPS, STEP_EVERY, STAGE_PROCS; LIB_B (another build of the
library, e.g. the one before a change) adds a variant traced with it to the pair, pair20 and C rows, in the
same rounds: two builds compared in one run, not across runs whose least moves by ~100 ns."""
import json
import os
import statistics
import subprocess
import sys
import time

from bench_pair_parts import stages_line  # the stage build's exit line, parsed

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.environ
ROUNDS = int(ENV.get("ROUNDS", "40"))
BUDGET = float(ENV.get("BUDGET", "180"))
CASES = ENV.get("CASES", "pair pair20 step c_async").split()
C_REPS = int(ENV.get("C_REPS", "2"))
QUICK = bool(ENV.get("QUICK"))
PIN = ENV.get("PIN", "4-7")
OUT = ENV["OUT"]
LIB = ENV["LIB"]
STAGES_LIB = ENV.get("STAGES_LIB", "")
CBIN = ENV.get("CBIN", "")
CARRY_LD = ENV.get("CARRY_LD", "")
PAIRS = int(ENV.get("PAIRS", "10000"))      # pairs a timed loop, in a child (bare ~35 ms at 3.3 us a pair)
LOOPS = int(ENV.get("LOOPS", "5"))          # timed loops a child, after one warm loop
STEPS = int(ENV.get("STEPS", "50"))         # steps a timed loop, in a step child
STEP_LOOPS = int(ENV.get("STEP_LOOPS", "4"))
STEP_EVERY = int(ENV.get("STEP_EVERY", "2"))  # the step (3 variants, ~1 s a child) in every other round
STAGE_PROCS = int(ENV.get("STAGE_PROCS", "1" if QUICK else "2"))
PY = sys.executable
RAW = os.path.join(OUT, "raw.jsonl")

PIN_CMD = ["taskset", "-c", PIN] if PIN else []
TRACED = {"LD_PRELOAD": LIB, "LD_LIBRARY_PATH": CARRY_LD}
VARIANT_ENV = {
    "bare": {},
    "traced": dict(TRACED, OOMTRACE_FRAMEWORKS="0"),
    "companion": dict(TRACED, OOMTRACE_FRAMEWORKS="1"),
    "nopython": dict(TRACED, OOMTRACE_FRAMEWORKS="0", OOMTRACE_PYTHON="0"),
    "depth4": dict(TRACED, OOMTRACE_FRAMEWORKS="0", OOMTRACE_PYTHON="0", OOMTRACE_DEPTH="4"),
}
LIB_B = ENV.get("LIB_B", "")
if LIB_B:
    VARIANT_ENV["lib_b"] = {"LD_PRELOAD": LIB_B, "LD_LIBRARY_PATH": CARRY_LD, "OOMTRACE_FRAMEWORKS": "0"}
B = ["lib_b"] if LIB_B else []
PLAN = []  # (case, variants)
if "pair" in CASES:
    PLAN.append(("pair", ["bare", "traced"] + B if QUICK else ["bare", "traced"] + B + ["nopython", "depth4"]))
if "pair20" in CASES:
    PLAN.append(("pair20", ["bare", "traced"] + B))
if "step" in CASES:
    PLAN.append(("step", ["bare", "traced", "companion"]))
if "c_async" in CASES and CBIN:
    PLAN.append(("c_async", ["bare", "traced"] + B))


def env_of(variant, extra=None):
    e = dict(ENV)
    e.pop("LD_PRELOAD", None)
    e.update(VARIANT_ENV[variant])
    if extra:
        e.update(extra)
    return e


class Server:
    """One variant's fork server, pinned; children inherit the pinning and the environment."""

    def __init__(self, variant):
        self.variant = variant
        self.err = open(os.path.join(OUT, f"server-{variant}.err"), "ab")
        self.p = subprocess.Popen(PIN_CMD + [PY, os.path.join(HERE, "bench_alloc_pair.py"), "serve"],
                                  env=env_of(variant), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, bufsize=1)

    def ask(self, case):
        n, loops = (STEPS, STEP_LOOPS) if case == "step" else (PAIRS, LOOPS)
        try:
            self.p.stdin.write(f"{case} {loops} {n}\n")
            self.p.stdin.flush()
            line = self.p.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            return {"case": case, "error": f"server {self.variant}: {e!r}"}
        if not line:
            return {"case": case, "error": f"server {self.variant} ended (status {self.p.poll()})"}
        return json.loads(line)

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:
            self.p.kill()
        self.err.close()


def c_process(variant, extra=None, err=None):
    cmd = PIN_CMD + [CBIN, "8"]
    try:
        r = subprocess.run(cmd, env=env_of(variant, extra), stdout=subprocess.PIPE,
                           stderr=err or subprocess.DEVNULL, text=True, timeout=120)
        return json.loads(r.stdout.strip().splitlines()[-1])
    except Exception as e:  # a crash or a timeout is a row with an error, not the end of the run
        return {"case": "c_async", "error": repr(e)}


def record(raw, rnd, variant, res):
    if "error" in res:
        print(f"bench_alloc_rounds: round {rnd}, {variant}: {res['error']}", file=sys.stderr)
        return
    raw.write(json.dumps({"round": rnd, "variant": variant, "result": res}) + "\n")
    raw.flush()


def stages_file(path):
    """The stage build's OOMTRACE_STAGES object from a process's stderr file, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return stages_line(f.read())
    except OSError:
        return None


def counted(raw):
    """STAGE_PROCS whole processes a case under the stage build: the tracer's own ns per pair, counted."""
    if not STAGES_LIB or not os.path.exists(STAGES_LIB):
        print("bench_alloc_rounds: no stage build (make bench-stages): no counted row", file=sys.stderr)
        return
    # Outer probes only (the wrappers' and the driver calls'; one probe an allocation subtracted): with every
    # probe, a C pair's 14 nested probes at the empty loop's cost came to more than the hooks' own cycles on
    # the H200, and the count read 0.0 (stage.c: probes_exceed; runs 24-27).
    extra = {"LD_PRELOAD": STAGES_LIB, "LD_LIBRARY_PATH": CARRY_LD, "OOMTRACE_FRAMEWORKS": "0",
             "OOMTRACE_STAGE_PROBES": "outer"}
    for case in [c for c, _ in PLAN if c != "step"]:
        for k in range(STAGE_PROCS):
            err = os.path.join(OUT, f"stages-{case}-{k}.err")
            with open(err, "w") as ef:
                if case == "c_async":
                    res = c_process("bare", extra, ef)
                else:
                    try:
                        r = subprocess.run(PIN_CMD + [PY, os.path.join(HERE, "bench_alloc_pair.py"), case,
                                                      "--loops", str(LOOPS), "--pairs", str(PAIRS)],
                                           env=env_of("bare", extra), stdout=subprocess.PIPE, stderr=ef,
                                           text=True, timeout=120)
                        res = json.loads(r.stdout.strip().splitlines()[-1])
                    except Exception as e:
                        res = {"case": case, "error": repr(e)}
            st = stages_file(err)
            if "error" in res or not st:
                print(f"bench_alloc_rounds: stage build, {case}: {res.get('error', 'no OOMTRACE_STAGES line')}",
                      file=sys.stderr)
                continue
            if st.get("probes_exceed"):
                print(f"bench_alloc_rounds: stage build, {case}: the probes subtracted exceed the hooks' own "
                      "cycles: no count", file=sys.stderr)
                continue
            res["tracer_ns_per_event"] = st["tracer_ns_per_event"]
            raw.write(json.dumps({"round": 0, "variant": "stages", "result": res}) + "\n")
            raw.flush()


def run():
    servers = {}
    for _, variants in PLAN:
        for v in variants:
            if v not in servers and any(c != "c_async" for c, vs in PLAN if v in vs):
                servers[v] = Server(v)
    t0 = time.monotonic()
    with open(RAW, "w") as raw:
        try:
            for rnd in range(1, ROUNDS + 1):
                if rnd > 1 and time.monotonic() - t0 > BUDGET:
                    print(f"budget of {BUDGET:.0f}s spent: {rnd - 1} rounds", file=sys.stderr)
                    break
                print(f"round {rnd}/{ROUNDS} ({time.monotonic() - t0:.0f}s; pinned: {PIN or 'no'})",
                      file=sys.stderr)
                for case, variants in PLAN:
                    if case == "step" and (rnd - 1) % STEP_EVERY:
                        continue
                    order = variants if rnd % 2 else variants[::-1]
                    for _ in range(C_REPS if case == "c_async" else 1):
                        for v in order:
                            res = c_process(v) if case == "c_async" else servers[v].ask(case)
                            record(raw, rnd, v, res)
        finally:
            for s in servers.values():
                s.close()
        counted(raw)
    print(f"bench_alloc_rounds: {time.monotonic() - t0:.0f}s", file=sys.stderr)


NAMES = {"pair": "PyTorch, cudaMallocAsync, torch.empty(4096)+del, shallow",
         "pair20": "same, 20 extra Python frames",
         "step": "CPU-bound step (12 x Linear(256), Adam, batch 32)",
         "c_async": "C program, cuMemAllocAsync + cuMemFreeAsync"}
LABELS = {"traced": "traced", "lib_b": f"traced with LIB_B ({LIB_B})", "companion": "traced + Python companion", "nopython": "traced, OOMTRACE_PYTHON=0",
          "depth4": "traced, OOMTRACE_DEPTH=4 OOMTRACE_PYTHON=0"}


def table(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by = {}
    for r in rows:
        if r["variant"] == "stages":
            continue
        # several processes of one variant in a round (C_REPS): the round keeps the least of them
        d = by.setdefault((r["result"]["case"], r["variant"]), {})
        d[r["round"]] = min(d.get(r["round"], float("inf")), r["result"]["min"])
    print("| case | variant | bare (least) | variant (least) | added (least of each) | ratio (least of each) | "
          "added (median of per-round differences) | spread of the differences | processes | "
          "tracer's own, counted (stage build, outer probes) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case in ("pair", "pair20", "step", "c_async"):
        bare = by.get((case, "bare"), {})
        if not bare:
            continue
        nproc = lambda v: sum(1 for r in rows if r["result"]["case"] == case and r["variant"] == v)  # noqa: E731
        unit = "µs/step" if case == "step" else "ns/pair"
        scale = 1e3 if case == "step" else 1.0
        # the stage build's count, per pair (an allocation event and a free event)
        cnt = sorted(2 * r["result"]["tracer_ns_per_event"] for r in rows
                     if r["variant"] == "stages" and r["result"]["case"] == case)
        cnt_s = (f"{cnt[0]:.1f} ns/pair least, {statistics.median(cnt):.1f} median ({len(cnt)} processes)"
                 if cnt else "")
        for v in ("traced", "lib_b", "companion", "nopython", "depth4"):
            got = by.get((case, v), {})
            common = sorted(set(got) & set(bare))
            if not common:
                continue
            diffs = [got[k] - bare[k] for k in common]
            b = min(bare[k] for k in common)
            t = min(got[k] for k in common)
            print(f"| {NAMES[case]} | {LABELS[v]} | {b / scale:.2f} {unit} | {t / scale:.2f} {unit} | "
                  f"{(t - b) / scale:+.2f} {unit} | {t / b:.3f} | "
                  f"{statistics.median(diffs) / scale:+.2f} {unit} | "
                  f"{min(diffs) / scale:+.2f} .. {max(diffs) / scale:+.2f} | "
                  f"{nproc('bare')} bare, {nproc(v)} {v} in {len(common)} rounds | "
                  f"{cnt_s if v == 'traced' else ''} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--table":
        table(sys.argv[2])
    else:
        run()
        table(RAW)
        print(f"raw: {RAW}", file=sys.stderr)
