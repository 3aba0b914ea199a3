"""The companion's step hook without a hook on the model (issue 12, "Cost"), checked on a real torch: traced,
the model's inputs are sampled by a global forward pre hook armed after a step and removed at the model's next
call; a failing step's inputs are read from the failing thread's frames, in the forward (the model's call on
the stack) and in the backward (the frame that called the model, through the thread that waits in
`loss.backward()` when the failure is on autograd's device thread); and the model pickles and deep-copies to
the same bytes traced and untraced. About 20 s on one H200; prints one line per check and "step_sample_check:
ok" (exit 0), or the failed checks (exit 1).

  GPU (torch 2.x, its global optimizer step hook):
    mkdir -p $OUT/ss; OOMTRACE_QUIET=1 OOMTRACE_DIR=$OUT/ss LD_PRELOAD=$PWD/build/liboomtrace.so \\
        LD_LIBRARY_PATH=$PWD/.carry/lib python3 tests/gpu/step_sample_check.py
    (and again with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: no OOM observer, the OOM is seen at
    its exception's creation)
  CPU (Debian's torch 1.13: no global step hook, the benchmark's stand-in registry; failures simulated: the
  companion's answer is read where the OOM would be raised):
    OOMTRACE_QUIET=1 LD_PRELOAD=build/liboomtrace.so LD_LIBRARY_PATH=build/fake /usr/bin/python3 \\
        tests/gpu/step_sample_check.py --cpu

--hash prints only the pickle's and the deep copy's digests of the trained model (the untraced run of the
pickle check: this script runs itself with LD_PRELOAD removed)."""
import argparse
import copy
import hashlib
import io
import os
import pickle
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

failures = []


def expect(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what), flush=True)
    if not cond:
        failures.append(what)


class Boom(torch.autograd.Function):
    """Identity; its backward runs out of memory when asked (on the GPU on autograd's device thread)."""
    fail = False
    threads = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        if Boom.fail:
            Boom.threads.append(threading.get_ident())
            run_out(g.device)
        return g


class Net(nn.Module):
    """A language-model-shaped module called with keyword inputs (what a global hook is not given)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(512, 64)
        self.body = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
        self.head = nn.Linear(64, 512)
        self.fail_forward = False

    def forward(self, input_ids, labels=None):
        h = Boom.apply(self.body(self.emb(input_ids)))
        if self.fail_forward:
            run_out(h.device)
        logits = self.head(h)
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


SEEN = []  # on CPU: the companion's answer where the OOM would be raised


def run_out(device):
    if device.type == "cuda":
        torch.empty(1 << 50, dtype=torch.uint8, device=device)
    steps = sys.modules.get("_oomtrace_steps")
    SEEN.append(steps.step_in_progress() if steps is not None else None)
    raise MemoryError("stand-in OOM")


def build(device):
    torch.manual_seed(0)
    model = Net().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, opt


def train_step(model, opt, batch):
    loss = model(input_ids=batch, labels=batch)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def digests(model):
    """sha256 of the model's pickle and of its deep copy's, with every tensor written as its dtype, shape,
    device type and requires_grad (their addresses and values are not what is compared: the module objects
    are, hook dicts included)."""
    class P(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, torch.Tensor):
                return ("tensor", str(obj.dtype), tuple(obj.shape), obj.device.type, bool(obj.requires_grad))
            return None

    def one(m):
        buf = io.BytesIO()
        P(buf, protocol=4).dump(m)
        return hashlib.sha256(buf.getvalue()).hexdigest()
    return one(model), one(copy.deepcopy(model))


def start_companion_cpu(optmod):
    """CPU torch: a device allocation through the stand-in driver starts the companion (as in
    bench_step_hooks.setup), and torch 1.13's missing global step hook is the benchmark's stand-in."""
    from bench_step_hooks import Registry
    registry = Registry(optmod) if not hasattr(optmod, "register_optimizer_step_post_hook") else None
    import ctypes
    cu = ctypes.CDLL("libcuda.so.1")
    ptr = ctypes.c_uint64()
    if cu.cuInit(0) == 0 and cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0:
        for _ in range(10000):  # safe points, where the pending call runs
            pass
    return registry


def framework_oom(d, before):
    """The records of the framework OOM snapshot written since `before` (None when there is none)."""
    import fwdecode
    new = sorted(f for f in set(os.listdir(d)) - before if "framework-oom" in f)
    if not new:
        return None
    return fwdecode.decode(os.path.join(d, new[-1]))["framework"]["records"]


def at_failure(recs):
    st = [r["stats"] for r in recs if r["kind"] == "STATS" and r["device"] == (1 << 32) - 1]
    se = [r["settings"] for r in recs if r["kind"] == "SETTINGS" and "step_in_progress_input_shapes" in r["settings"]]
    return ((st[0] if st else {}).get("step_in_progress"),
            (se[0] if se else {}).get("step_in_progress_input_shapes", ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--hash", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    device = "cpu" if a.cpu else "cuda"
    import torch.optim.optimizer as optmod
    registry = start_companion_cpu(optmod) if a.cpu and not a.hash else None
    model, opt = build(device)
    if registry is not None:
        registry.wrap(opt)
    small = torch.randint(0, 512, (2, 128), device=device)
    if a.hash:
        for _ in range(3):
            train_step(model, opt, small)
        print(" ".join(digests(model)))
        return 0
    steps = sys.modules.get("_oomtrace_steps")
    hook = getattr(steps, "_hook", None)
    if hook is None:
        sys.exit("step_sample_check: the companion's step hook is not installed (preload build/liboomtrace.so)")
    table = torch.nn.modules.module._global_forward_pre_hooks
    # One sample only, whatever the steps' length: the first step's end arms the hook (its due time starts
    # at 0), and the next would be due 10 s later, not 1 s.
    steps.SAMPLE_SPACING_NS = 10 ** 10
    print("torch %s, Python %s, %s" % (torch.__version__, sys.version.split()[0], device), flush=True)

    # (b) The model is found at the first step's end, the sampled hook armed there; step 2's call fires it, it
    # removes itself, and only step 2's STEPS entry carries the inputs.
    train_step(model, opt, small)
    expect(hook.sampling is not None and len(table) == 1, "after step 1 the sampled hook is armed in torch's "
           "global table (%d there)" % len(table))
    expect(all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules()),
           "no hook in the model's own hook dicts")
    train_step(model, opt, small)
    expect(hook.samples == 1 and hook.sampling is None and len(table) == 0,
           "step 2's call fired it once and removed it (%d samples, %d in the table)" % (hook.samples, len(table)))
    train_step(model, opt, small)
    comp = sys.modules["_oomtrace_companion"]._companion
    kept = [(s[0], s[4]) for s in comp.attached["torch"].step_record()]  # the C hook's ring and on_step's deque
    expect(kept[-3:] == [(1, ""), (2, "input_ids=(2, 128), labels=(2, 128)"), (3, "")],
           "STEPS: only the sampled step carries the inputs: %s" % kept[-3:])

    # (c) The model's pickle and deep copy: the same bytes as untraced, also with the sampled hook armed.
    if hook.sampling is None:
        hook.arm()
    traced = " ".join(digests(model))
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "OOMTRACE_DIR")}
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--hash"] + (["--cpu"] if a.cpu else []),
                       env=env, capture_output=True, text=True, timeout=300)
    plain = r.stdout.strip()
    expect(r.returncode == 0 and plain == traced, "pickle and deep copy: traced %s, untraced %s%s" % (
        traced[:12] + "/" + traced[65:77], plain[:12] + "/" + plain[65:77], "" if r.returncode == 0 else r.stderr[-300:]))
    h = hook.sampling
    hook.sampling = None
    h.remove()

    # (a) A step that runs out in the forward, then one that runs out in the backward: step 4 both times (a
    # failed step never ends), its inputs read at the failure. No sample may help: none is armed or kept.
    d = os.environ.get("OOMTRACE_DIR", "")
    big = torch.randint(0, 512, (64, 128), device=device)
    want = (4, "input_ids=(64, 128), labels=(64, 128)")
    for where in ("forward", "backward"):
        hook.seen = ""
        before = set(os.listdir(d)) if d and os.path.isdir(d) else set()
        model.fail_forward, Boom.fail = where == "forward", where == "backward"
        del SEEN[:]
        caught = ""
        try:
            train_step(model, opt, big)
        except (torch.cuda.OutOfMemoryError, MemoryError) as e:
            caught = type(e).__name__
        model.fail_forward = Boom.fail = False
        opt.zero_grad(set_to_none=True)
        if a.cpu:
            got = SEEN[0] if SEEN else None
            how = "the companion's answer at the failure"
        else:
            recs = framework_oom(d, before) if d else None
            got = at_failure(recs) if recs is not None else None
            how = "the framework OOM snapshot"
        thread = ""
        if where == "backward" and Boom.threads:
            thread = " (the backward ran on %s thread)" % ("the main" if Boom.threads[-1] == threading.main_thread().ident
                                                          else "another")
        expect(caught and got == want, "an OOM in the %s: %s says %s, want %s%s" % (where, how, got, want, thread))
    expect(hook.samples == 1, "no more samples in the failing steps (%d)" % hook.samples)
    if failures:
        print("step_sample_check: %d failed" % len(failures))
        return 1
    print("step_sample_check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
