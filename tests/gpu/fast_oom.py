"""A PyTorch program that fails within a second of its first device allocation (run 36: 8 GiB kept a step
failed 0.46 s in, and the run had no framework OOM snapshot, only the driver's). The companion starts at a
pending call after the first allocation and asks again at most once a second; these modes fail before a
second pokes it. Expected in each: a framework OOM snapshot (the allocator's view), the exit status 1.

    python3 fast_oom.py MODE      MODE: leak | leak-mark | first | fraction-first | fraction

  leak            8 GiB kept a step until the card is full (no markers, no `import oomtrace`)
  leak-mark       the same with oomtrace.mark("step N") (run 36's program)
  first           the first tensor asks for more than the card (the driver refuses the first allocation)
  fraction-first  set_per_process_memory_fraction(0.01), then a 4 GiB tensor: torch refuses the very first
                  allocation inside its pool, with no driver call at all
  fraction        set_per_process_memory_fraction(0.05): 64 MiB tensors until torch refuses (no driver failure)

stderr gets the companion's state at each step (seconds since the first tensor, whether torch's OOM observer
is attached): it varies, so it is not stdout."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "leak"
T0 = None


def state(what):
    m = sys.modules.get("_oomtrace_companion")
    comp = getattr(m, "_companion", None) if m else None
    t = getattr(comp, "attached", {}).get("torch") if comp else None
    since = "-" if T0 is None else "%.3f" % (time.monotonic() - T0)
    g.err("state %s t=%s companion=%s torch=%s observer=%s raises_seen=%s cuda_ready=%s" % (
        what, since, comp is not None, t is not None, getattr(t, "observer_attached", None),
        getattr(t, "raises_seen", None), getattr(t, "cuda_ready", None)))


g.out("fast_oom %s" % MODE)
state("start")
held = []
if MODE.startswith("fraction"):
    torch.cuda.set_per_process_memory_fraction(0.01 if MODE == "fraction-first" else 0.05)
    state("fraction set")
T0 = time.monotonic()
try:
    if MODE == "first":
        held.append(torch.empty(1 << 50, dtype=torch.uint8, device="cuda"))
    elif MODE == "fraction-first":
        held.append(torch.empty(4 * g.GiB, dtype=torch.uint8, device="cuda"))
    size = 64 * g.MiB if MODE == "fraction" else 8 * g.GiB
    for step in range(100000):
        if MODE == "leak-mark":
            g.mark("step %d" % step)
        held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        state("step %d" % step)
except torch.cuda.OutOfMemoryError:
    state("oom")
    raise
g.out("UNEXPECTED: no OOM")
