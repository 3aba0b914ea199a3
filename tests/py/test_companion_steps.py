"""The companion's reading of the step under way at a framework OOM (the split of test_companion.py, which
tests/sh/companion_logic.sh runs beside it): the failing thread's frames, autograd's device thread, and
PyTorch's cudaMallocAsync backend. Exits 1 with one line per failed check."""
import gc
import os
import sys
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib", "companion"))
import _oomtrace_payload as P  # noqa: E402
import fakefw  # noqa: E402

from companion_harness import clear_modules, companion, expect, failures, records, run_with  # noqa: E402

# 6. At a framework OOM, torch's grad mode on the raising thread and the optimizer step under way (its
# number and the model's inputs, read from the failing thread's frames by _oomtrace_steps); not in other
# snapshots. A failure on a thread with no Python frames of a step (autograd's device thread) reads the
# thread that waits in backward; there the inputs come from the frame that called the model, whose local
# names the last sample learnt.
import _oomtrace_steps as S  # noqa: E402
import threading  # noqa: E402
clear_modules()
c, lib = companion()
t = fakefw.fake_torch()
sys.modules["_oomtrace_steps"] = S
try:
    run_with({"torch": t, "torch.optim": t.optim, "torch.optim.optimizer": t.optim.optimizer}, c.scan)
    expect(len(t.step_hooks) == 1 and S._hook is not None, "the step hook is installed")


    def moment(payload, training=None):
        """The OOM's grad mode and step (its count of training optimizers apart: training[0] gets it)."""
        r = records(payload)
        st = [dict(x["stats"]) for x in r if x["kind"] == "STATS" and x["device"] == P.ALL_DEVICES]
        se = [x["settings"] for x in r if x["kind"] == "SETTINGS" and "step_in_progress_input_shapes" in x["settings"]]
        n = st[0].pop("optimizers", None) if st else None
        if training is not None:
            training.append(n)
        return (st[0] if st else {}), (se[0] if se else {})

    class Model(t.nn.Module):
        def forward(self, input_ids=None, fail=False):
            if fail:
                t.observers[0](0, 1 << 30, 5, 6)

    model, opt = Model(), t.optim.Optimizer()
    S._hook.roots = [weakref.ref(model)]
    S._hook.watched = True
    t.observers[0](0, 1 << 30, 5, 6)  # no step ran: grad mode only
    training = []
    st, se = moment(lib.ooms[-1][3], training)
    expect(st == {"grad_enabled": 1} and not se, "OOM outside a step: grad_enabled only (%s, %s)" % (st, se))
    expect(training == [0], "an optimizer over no device tensor is not training one: %s" % training)
    # An optimizer over a device tensor, before its first step: a model being trained (a batch-size search's
    # first forward), which the reader must not take for an evaluation with autograd on.
    on_device = t.Tensor(2, 2)
    on_device.device = type("device", (), {"type": "cuda"})()
    trainer = t.optim.Optimizer()
    trainer.param_groups = [{"params": [on_device]}]
    t.observers[0](0, 1 << 30, 5, 6)
    moment(lib.ooms[-1][3], training)
    expect(training[-1] == 1, "an optimizer over a device tensor counts, before any step: %s" % training)
    del trainer, on_device
    model(input_ids=t.Tensor(64, 1024), fail=True)  # no optimizer step yet: an evaluation, not a step
    st, se = moment(lib.ooms[-1][3])
    expect(st == {"grad_enabled": 1} and not se, "a model's call before any step is not a step: %s, %s" % (st, se))
    t.step_hooks[0](opt, (), {})
    t.step_hooks[0](opt, (), {})
    t.grad_on = False
    model(input_ids=t.Tensor(64, 1024), fail=True)
    st, se = moment(lib.ooms[-1][3])
    expect(st == {"grad_enabled": 0, "step_in_progress": 3}, "OOM in step 3 with grad off: %s" % st)
    expect(se == {"step_in_progress_input_shapes": "input_ids=(64, 1024)"}, "step 3's inputs: %s" % se)
    c.refresh("api")
    st, se = moment(lib.states[-1])
    expect(not st and not se, "a snapshot that is not an OOM says neither")
    del t.is_grad_enabled
    model(input_ids=t.Tensor(64, 1024), fail=True)
    st, se = moment(lib.ooms[-1][3])
    expect(st == {"step_in_progress": 3}, "a torch without is_grad_enabled: the step still (%s)" % st)

    # The sample after step 2 learnt how train_step passes the inputs; step 3's backward runs out on another
    # thread while this one waits in backward.
    S._hook.due, S._hook.sampling = 0, None
    S._hook.slow_step(2, "")
    waiting, done = threading.Event(), threading.Event()

    def train_step(batch, loss, fail_in_backward):
        model(input_ids=batch)
        if fail_in_backward:
            t.autograd.backward(loss, run=lambda: (waiting.set(), done.wait(10)))

    train_step(t.Tensor(2, 1024), None, False)
    expect(S._hook.seen == "input_ids=(2, 1024)" and S._hook.sampling is None, "a sample, then disarmed")
    S._hook.seen = ""
    th = threading.Thread(target=train_step, args=(t.Tensor(64, 1024), None, True))
    th.start()
    waiting.wait(10)
    threading.Thread(target=lambda: t.observers[0](0, 1 << 30, 5, 6)).start()  # a thread with no step frames
    time.sleep(0.2)
    done.set()
    th.join()
    st, se = moment(lib.ooms[-1][3])
    expect(st == {"step_in_progress": 3} and se == {"step_in_progress_input_shapes": "input_ids=(64, 1024)"},
           "a failure in backward on another thread: the waiting thread's step and inputs (%s, %s)" % (st, se))

    # 6c. Reading a frame's locals leaves nothing held. Before 3.13, frame.f_locals is a snapshot the frame
    # keeps until it returns: a sample (learn_caller) and a failure (the step's inputs) read the training
    # loop's locals, and the loop's tensors stayed alive after the program let them go (H200, train_oom:
    # memory_allocated 128 KiB higher traced, a step's input ids; a previous step's logits would have been
    # gigabytes). A caught OOM must leave the failing step's inputs free too.
    def loop(fail):
        S._hook.due, S._hook.sampling = 0, None
        S._hook.slow_step(2, "")
        batch = t.Tensor(2, 1024)
        ref = weakref.ref(batch)
        model(input_ids=batch, fail=fail)
        sampled = S._hook.seen == "input_ids=(2, 1024)"
        del batch
        gc.collect()
        return ref() is None, sampled, S._hook.caller_code is loop.__code__

    freed, sampled, learnt = loop(False)
    expect(sampled and learnt and freed, "after a sample the caller's input is freed when the caller lets it go "
           "(sampled %s, its name learnt %s, freed %s)" % (sampled, learnt, freed))
    freed, sampled, learnt = loop(True)
    expect(freed, "after a failure read the step's inputs the caller's input is freed when it lets it go")

    # A failure outside any step (no model call, backward or optimizer on the failing thread: the other threads
    # are read) leaves the failing function's locals free once it returns, without a collection: this thread's
    # own entry among the threads' frames, bound to a local of the reader, held the reader's frame and every
    # caller's (H200, a batch-size search: the failed attempt's 114 GiB stayed allocated after the except).
    def outside():
        batch = t.Tensor(2, 1024)
        t.observers[0](0, 1 << 30, 5, 6)
        return weakref.ref(batch)

    gc.collect()
    gc.disable()
    try:
        ref = outside()
        freed = ref() is None
    finally:
        gc.enable()
    expect(freed, "after a failure outside a step the failing function's input is freed when it returns")

    # A snapshot the program holds (d = locals()) keeps what it had when the program took it, and one a
    # debugger wrote to (pdb's `x = 5`, written back to the frame when its trace function returns) keeps
    # the debugger's values: a read refreshes the frame's snapshot from its locals in place.
    def held(fail):
        S._hook.due, S._hook.sampling = 0, None
        S._hook.slow_step(2, "")
        x = "taken"
        d = locals()
        x = "later"  # noqa: F841
        batch = t.Tensor(2, 1024)
        model(input_ids=batch, fail=fail)
        return list(d.items())

    for fail in (False, True):
        got = held(fail)
        expect(got == [("fail", fail), ("x", "taken")], "the program's locals() is left as it took it (%s): %s"
               % ("failure" if fail else "sample", got))

    class Debugged:
        def run(self, fail):
            x = "program's"
            batch = t.Tensor(2, 1024)  # noqa: F841
            return x  # the debugger stops here: `x = "debugger's"`, then `model(input_ids=batch)`

    stop = Debugged.run.__code__.co_firstlineno + 3

    def debugger(frame, event, arg):
        if frame.f_code is Debugged.run.__code__:
            if event == "line" and frame.f_lineno == stop:
                loc = frame.f_locals  # read once, as pdb does (each read refreshes it)
                loc["x"] = "debugger's"
                S._hook.due, S._hook.sampling = 0, None
                S._hook.slow_step(2, "")
                model(input_ids=loc["batch"], fail=loc["fail"])
            return debugger
        return None

    for fail in (False, True):
        sys.settrace(debugger)
        try:
            got = Debugged().run(fail)
        finally:
            sys.settrace(None)
        expect(got == "debugger's", "a debugger's write to the frame's locals stands (%s): %s"
               % ("failure" if fail else "sample", got))

    # The program's own code can run while the companion reads a frame's locals (a property of a `self` it
    # reads, or another thread's turn at the GIL): a snapshot it takes of that frame meanwhile is its own.
    taken = []

    class Owner:
        @property
        def __class__(self):  # (isinstance reads it)
            taken.append(self.frame.f_locals)
            return Owner

        def run(self, fail, before):
            self.frame = sys._getframe()
            if before:
                locals()  # one the program took before, which the frame keeps
            S._hook.due, S._hook.sampling = 0, None
            S._hook.slow_step(2, "")
            batch = t.Tensor(2, 1024)
            step_of(batch, fail)  # (the model's caller, whose frame the companion learns, is not this one)

    def step_of(batch, fail):
        model(input_ids=batch, fail=fail)

    Owner().run(True, False)
    Owner().run(True, True)
    expect(len(taken) == 2 and all("batch" in d for d in taken), "a snapshot the program took while the companion read "
           "the frame is left whole: %s" % [sorted(d) for d in taken])
    namespace = {}
    exec("x = 1\ny = [x]\n", namespace)
    expect(namespace.get("y") == [1], "a module-level namespace is left alone")
finally:
    sys.modules.pop("_oomtrace_steps", None)
    S._hook = None

# 6b. The same under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (H200, torch 2.11: the snapshot said no
# step): no OOM observer, the OOM seen where its exception is created, in the failing thread; torch's
# _snapshot() raises there, and the step under way and its inputs must not go with it. No blocks, the
# counters and settings (the backend named), and nothing said.
clear_modules()
c, lib = companion()
c.watch_exceptions = lambda fallback=True, classes=(): all([c.watch_created(k) for k in classes]) and bool(classes)
t = fakefw.fake_torch(observer="refuses", backend="cudaMallocAsync")
sys.modules["_oomtrace_steps"] = S
try:
    run_with({"torch": t, "torch.optim": t.optim, "torch.optim.optimizer": t.optim.optimizer}, c.scan)
    expect(c.attached["torch"].raises_seen and not c.attached["torch"].observer_attached and S._hook is not None,
           "cudaMallocAsync: no observer, the OOM class watched, the step hook installed")

    def run_out(gib=1):  # each its own text: the same text within 2 s with a reused id reads as the same OOM
        try:
            raise t.OutOfMemoryError("CUDA out of memory. Tried to allocate %d.00 GiB. GPU 0 has ..." % gib)
        except RuntimeError:
            pass

    class Model(t.nn.Module):
        def forward(self, input_ids=None, fail=False):
            if fail:
                run_out()

    model, opt = Model(), t.optim.Optimizer()
    S._hook.roots = [weakref.ref(model)]
    S._hook.watched = True
    t.step_hooks[0](opt, (), {})
    t.step_hooks[0](opt, (), {})
    model(input_ids=t.Tensor(64, 1024), fail=True)
    r = records(lib.ooms[-1][3]) if lib.ooms else []
    st, se = moment(lib.ooms[-1][3]) if lib.ooms else ({}, {})
    expect(st == {"grad_enabled": 1, "step_in_progress": 3} and se == {"step_in_progress_input_shapes": "input_ids=(64, 1024)"},
           "cudaMallocAsync, an OOM in the forward: step 3 and its inputs (%s, %s)" % (st, se))
    kinds = [x["kind"] for x in r]
    expect("SEGMENTS" not in kinds and [x["device"] for x in r if x["kind"] == "STATS"] == [P.ALL_DEVICES, 0] and
           [x["settings"].get("backend") for x in r if x["kind"] == "SETTINGS" and "backend" in x["settings"]] == ["cudaMallocAsync"]
           and not c.collect_failed, "cudaMallocAsync: no blocks asked for, counters and settings kept, nothing said: %s" % kinds)

    # The backward on autograd's device thread: the exception is created there, while this one waits in backward.
    S._hook.due, S._hook.sampling = 0, None
    S._hook.slow_step(2, "")
    waiting, done = threading.Event(), threading.Event()

    def train_step(batch, fail_in_backward):
        model(input_ids=batch)
        if fail_in_backward:
            t.autograd.backward(None, run=lambda: (waiting.set(), done.wait(10)))

    train_step(t.Tensor(2, 1024), False)
    S._hook.seen = ""
    n = len(lib.ooms)
    th = threading.Thread(target=train_step, args=(t.Tensor(64, 1024), True))
    th.start()
    waiting.wait(10)
    device_thread = threading.Thread(target=run_out, args=(2,))
    device_thread.start()
    device_thread.join()
    done.set()
    th.join()
    st, se = moment(lib.ooms[-1][3]) if len(lib.ooms) > n else ({}, {})
    expect(st.get("step_in_progress") == 3 and se == {"step_in_progress_input_shapes": "input_ids=(64, 1024)"},
           "cudaMallocAsync, an OOM in the backward on another thread: the waiting thread's step and inputs (%s, %s)"
           % (st, se))
finally:
    sys.modules.pop("_oomtrace_steps", None)
    S._hook = None

if failures:
    print("test_companion_steps: %d failed" % len(failures))
    sys.exit(1)
print("test_companion_steps: ok (%s)" % sys.version.split()[0])
