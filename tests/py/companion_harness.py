"""What tests/py/test_companion.py's checks share: the failure list and expect(), a stand-in for the
library's entry points, a companion made without attaching, and helpers for stand-in framework modules."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib", "companion"))
import _oomtrace_companion as C  # noqa: E402
import fwdecode  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class Lib:
    """The library's entry points as the companion calls them (ctypes in a traced process)."""

    def __init__(self):
        self.states, self.ooms, self.marks = [], [], []

    def state(self, p, n):
        self.states.append(bytes(p[:n]))
        return 0

    def oom(self, fw, req, dev, p, n):
        self.ooms.append((fw, req, dev, bytes(p[:n])))
        return 0

    def mark(self, label):
        self.marks.append(label)
        return 0


def companion():
    c = C.Companion.__new__(C.Companion)
    lib = Lib()
    c.state_fn, c.oom_fn, c.mark_fn = lib.state, lib.oom, lib.mark
    c.attached, c.given_up, c.watching, c.recent, c.in_oom = {}, set(), False, [], False
    c.collect_failed = set()
    c.sees_raises = False
    c.created = set()
    # One process, many companions: sys.monitoring's tool ids are few, and the classes stay unwrapped.
    c.watch_exceptions = lambda fallback=True, classes=(): None
    return c, lib


def records(p):
    return fwdecode.framework(p)["records"]


def clear_modules():
    for m in ("torch", "torch.optim", "torch.optim.optimizer", "jax", "cupy", "jax._src.xla_bridge"):
        sys.modules.pop(m, None)


def run_with(mods, fn):
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        return fn()
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
