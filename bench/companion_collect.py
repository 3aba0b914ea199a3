"""Cost of the framework companion (lib/companion/_oomtrace_companion.py and its modules), no GPU needed:
  collect   building the FRAMEWORK payload from a torch.cuda.memory._snapshot()-shaped dict of 100k blocks
            (the figure the issue bounds at 200 ms), with a stand-in torch module (tests/py/fakefw.py);
  step      a small CPU-bound PyTorch training step (12 x Linear(256), batch 32, Adam; Debian's
            python3-torch is enough) under the preload on the stand-in driver, companion on against
            OOMTRACE_FRAMEWORKS=0, alternating runs; the companion is started by one device allocation
            through ctypes, so its step hook runs at every step.
    python3 bench/companion_collect.py collect [BLOCKS]
    python3 bench/companion_collect.py step [ROUNDS] [STEPS]      (needs build/ and python3-torch)
Prints one line per figure; asserts nothing."""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "lib", "companion"))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))


def collect(nblocks):
    import _oomtrace_companion as comp
    import _oomtrace_frameworks as frameworks
    import fakefw
    per = 100
    snap = fakefw.torch_snapshot(n_segments=nblocks // per, blocks_per_segment=per)
    torch = fakefw.fake_torch(snapshot=snap)

    c = comp.Companion.__new__(comp.Companion)
    c.attached, c.given_up, c.watching, c.recent, c.in_oom = {}, set(), False, [], False
    c.collect_failed = set()
    c.sees_raises = False
    c.mark_fn = lambda label: 0  # what __init__ binds to the library; collection marks nothing
    adapter = frameworks.Torch(c, torch)
    c.attached["torch"] = adapter
    wall, cpu = [], []
    size = 0
    for _ in range(7):
        t0, c0 = time.perf_counter(), time.process_time()
        p = c.collect("oom")
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        size = len(p)
    # CPU time is the figure on a shared machine: wall time there includes other processes' turns.
    print("collect: %d blocks in %d segments: CPU best %.1f ms, median %.1f ms; wall best %.1f ms; "
          "payload %.1f MB" % (nblocks, nblocks // per, min(cpu) * 1e3, statistics.median(cpu) * 1e3,
                               min(wall) * 1e3, size / 1e6))


STEP_PROG = r'''
import ctypes, sys, time, torch
cuda = ctypes.CDLL("libcuda.so.1"); cuda.cuInit(0)
alloc = cuda.cuMemAlloc_v2; alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
p = ctypes.c_uint64(); alloc(ctypes.byref(p), 1 << 20)   # the companion starts at the next safe point
torch.set_num_threads(1)
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(12)])
opt = torch.optim.Adam(model.parameters()); x = torch.randn(32, 256)
def step():
    opt.zero_grad(set_to_none=True); model(x).sum().backward(); opt.step()
for _ in range(20): step()
n = int(sys.argv[1]); t0 = time.perf_counter()
for _ in range(n): step()
print((time.perf_counter() - t0) / n)
print("companion" if "_oomtrace_companion" in sys.modules else "none")
'''


def steps(rounds, n):
    env = dict(os.environ, LD_PRELOAD=os.path.join(ROOT, "build", "liboomtrace.so"),
               LD_LIBRARY_PATH=os.path.join(ROOT, "build", "fake"), OOMTRACE_QUIET="1", OOMTRACE_DIR="/tmp")
    py = "/usr/bin/python3"
    res = {"1": [], "0": []}
    seen = {}
    for _ in range(rounds):
        for on in ("1", "0"):
            out = subprocess.run([py, "-c", STEP_PROG, str(n)], env=dict(env, OOMTRACE_FRAMEWORKS=on),
                                 capture_output=True, text=True, check=True).stdout.split()
            res[on].append(float(out[0]))
            seen[on] = out[1]
    on, off = statistics.median(res["1"]), statistics.median(res["0"])
    print("step: companion on (%s) %.1f us, off (%s) %.1f us per step (medians of %d runs x %d steps): "
          "ratio %.4f" % (seen["1"], on * 1e6, seen["0"], off * 1e6, rounds, n, on / off))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "collect"
    if what == "collect":
        collect(int(sys.argv[2]) if len(sys.argv) > 2 else 100000)
    else:
        steps(int(sys.argv[2]) if len(sys.argv) > 2 else 7, int(sys.argv[3]) if len(sys.argv) > 3 else 300)
