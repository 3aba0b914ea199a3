"""step_mix: a training step's allocation mix against the driver, for issue 16's CPU-bound step.

A small training step under cudaMallocAsync makes about 102 allocations and 102 frees a step, from about
a hundred different stacks in turn (H200 run 17): the forward, layer by layer; the backward on autograd's
thread, which borrows the waiting main thread's Python stack; Adam's ops. Every per-thread "same as last
time" cache of the tracer misses there, which the one-site pair loops (py_alloc.py) never show. This
reproduces that mix through ctypes and build/bench/libstepmix.so (bench/stepmix/stepmix.c):

  forward    12 layers x 3 allocations (output, activation, saved tensor), each layer's code its own
             function at its own Python depth (11 to 22 frames), ops 0-2 in the native chain;
  loss       2 allocations;
  backward   30 allocations on the library's backward thread while the main thread waits in
             sm_backward (borrowed stacks), 16 native ops;
  optimizer  32 allocations: 16 parameter groups x 2 ops (Adam's exp_avg and exp_avg_sq updates), each
             group's code its own function, at 14 Python frames;
  = 100 allocations a step, from 100 distinct stacks; each frees an allocation made earlier (a FIFO of
  8 here, the backward's and the optimizer's their own), and the step ends with everything freed: 100 frees.
Native frames per allocation: 31 of the library's, plus ctypes' and the eval loop's.

    python3 bench/step_mix.py [STEPS] [--loops N] [--pair]
    # --pair: the same allocation and free repeated from one site (the pair benchmarks' hit path),
    #         100 per step, for the per-event cost with every cache hitting
    # --evict KB: before each of the main thread's allocations, write KB of memory (a line each 64 bytes):
    #         the step's own work between allocations, which leaves the tracer's lines cold (issue 16);
    #         the line then gives the median and lower quartile of those allocations' calls, timed alone
    # --code: with --evict, also run ~40 KB of straight-line code there (the step's own code, which leaves
    #         the tracer's code out of the instruction cache)

Prints: result kind=stepmix|pair steps=S events=E ns_per_step=<least of the loops> ns_per_event=..."""
import ctypes
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get("STEPMIX_LIB") or os.path.join(HERE, "..", "build", "bench", "libstepmix.so")
args = [a for a in sys.argv[1:]]
STEPS = int(args[0]) if args and args[0].isdigit() else 200
LOOPS = int(args[args.index("--loops") + 1]) if "--loops" in args else 5
PAIR = "--pair" in args
EVICT = int(args[args.index("--evict") + 1]) * 1024 if "--evict" in args else 0
CODE = "--code" in args

lib = ctypes.CDLL(LIB)
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
dev = ctypes.c_int()
ctx = ctypes.c_void_p()
if cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0:
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cuda.cuCtxSetCurrent(ctx)
U64 = ctypes.c_uint64
alloc = lib.sm_alloc
alloc.argtypes = [ctypes.c_uint, ctypes.c_size_t, ctypes.POINTER(U64), U64]
alloc.restype = ctypes.c_int
backward = lib.sm_backward
backward.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(U64), ctypes.POINTER(U64)]
backward.restype = ctypes.c_int
free = lib.sm_free
free.argtypes = [U64]
free.restype = ctypes.c_int
evict = lib.sm_evict
evict.argtypes = [ctypes.c_size_t]
evict.restype = None

FIFO = 8
TIMES = []  # --evict: each of the main thread's allocations (sm_alloc: the chain, the driver, a free), ns


class Pool:
    """Device pointers in allocation order; each allocation frees the one FIFO allocations before it."""

    def __init__(self):
        self.slots = [U64() for _ in range(256)]
        self.refs = [ctypes.byref(s) for s in self.slots]
        self.i = 0

    def take(self, op, nbytes):
        i = self.i
        self.i = i + 1
        old = self.slots[(i - FIFO) & 255].value if i >= FIFO else 0
        if EVICT:
            evict(EVICT)
            if CODE:
                lib.sm_evict_code()
            t0 = time.perf_counter_ns()
            if alloc(op, nbytes, self.refs[i & 255], old) != 0:
                raise SystemExit("step_mix: sm_alloc failed")
            TIMES.append(time.perf_counter_ns() - t0)
        elif alloc(op, nbytes, self.refs[i & 255], old) != 0:
            raise SystemExit("step_mix: sm_alloc failed")

    def drain(self):
        for k in range(max(0, self.i - FIFO), self.i):
            free(self.slots[k & 255].value)
        self.i = 0


# Each layer's forward and each parameter group's update is its own function (its own code object and
# lines), as a model's modules and the optimizer's per-group work are distinct code in a real step.
SRC = []
for k in range(12):
    SRC.append(f"""
def layer_{k}(pool):
    pool.take(0, {65536 + k * 4096})      # output
    pool.take(1, {65536 + k * 4096})      # activation
    pool.take(2, {32768 + k * 2048})      # saved for backward
""")
for g in range(16):
    SRC.append(f"""
def group_{g}(pool):
    pool.take({4 + (g & 7)}, {16384 + g * 1024})   # exp_avg update
    pool.take({12 + (g & 3)}, {16384 + g * 1024})  # exp_avg_sq update
""")
NS = {}
exec(compile("".join(SRC), os.path.join(HERE, "step_mix_model.py"), "exec"), NS)
LAYERS = [NS[f"layer_{k}"] for k in range(12)]
GROUPS = [NS[f"group_{g}"] for g in range(16)]


def call_module(depth, fn, pool):
    """nn.Module.__call__ -> _call_impl -> forward ... : depth frames of wrapping over fn."""
    if depth > 0:
        return call_module(depth - 1, fn, pool)
    return fn(pool)


def forward(pool):
    for k, layer in enumerate(LAYERS):
        call_module(8 + k, layer, pool)
    pool.take(3, 4096)  # loss
    pool.take(3, 4096)


BW_N = 30
bw_out = (U64 * BW_N)()
bw_free = (U64 * BW_N)()


def run_backward(_pool):
    """loss.backward(): the engine's thread allocates while this thread waits in the call."""
    if backward(BW_N, 49152, bw_out, bw_free) != 0:
        raise SystemExit("step_mix: sm_backward failed")
    for i in range(BW_N):  # the next step's backward frees these
        bw_free[i] = bw_out[i]


def optimizer_step(pool):
    for group in GROUPS:
        call_module(10, group, pool)


def step(pool):
    forward(pool)
    pool.drain()
    call_module(6, run_backward, None)
    call_module(4, optimizer_step, pool)
    pool.drain()


def pair_step(pool):
    """the hit path: 100 allocations and frees from one site"""
    for _ in range(100):
        pool.take(0, 65536)
    pool.drain()


def mark(label):
    """oomtrace_mark when a tracer is in the process: the stage build counts the tracer's time between the marks
    (bench/stage_summary.py --steps: the timed loops' steps)."""
    fn = getattr(ctypes.CDLL(None), "oomtrace_mark", None)
    if fn is not None:
        fn.argtypes, fn.restype = [ctypes.c_char_p], ctypes.c_int
        fn(label)


def main():
    pool = Pool()
    fn = pair_step if PAIR else step
    for _ in range(max(5, STEPS // 10)):  # warm-up: first sight of every site
        call_module(3, fn, pool)
    least = None
    mark(b"timed loops")
    for _ in range(LOOPS):
        t0 = time.perf_counter_ns()
        for _ in range(STEPS):
            call_module(3, fn, pool)
        dt = (time.perf_counter_ns() - t0) / STEPS
        least = dt if least is None else min(least, dt)
    mark(b"timed loops end")
    for i in range(BW_N):
        free(bw_free[i])
    events = 200
    cold = ""
    if EVICT:
        t = sorted(TIMES[len(TIMES) // 4:])  # (after the warm-up's first quarter)
        cold = f" evict_kb={EVICT // 1024} alloc_median_ns={t[len(t) // 2]} alloc_q1_ns={t[len(t) // 4]}"
    print(f"result kind={'pair' if PAIR else 'stepmix'} steps={STEPS * LOOPS} events={events}"
          f" ns_per_step={least:.0f} ns_per_event={least / events:.1f}{cold}")


if __name__ == "__main__":
    main()
