"""Shared bits of the GPU validation workloads (tests/gpu/*.py).

Conventions every workload follows, so that tests/gpu/run.sh can diff a plain run against a preloaded one:
  - stdout holds only deterministic text (fixed seeds, rounded numbers, byte counts that do not vary);
  - anything that may vary (addresses, timings, pids, whether the tracer took a call) goes to stderr;
  - `CHECK key=value ...` lines carry the numbers that summarize.py sets against the report; they go to
    stdout when deterministic and to stderr otherwise (summarize.py reads both).
"""
import faulthandler
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
try:
    import oomtrace  # noqa: E402  (python/oomtrace: no-ops when the tracer is not preloaded)
except Exception as e:  # pragma: no cover - only when the helper itself is broken
    oomtrace = None
    print(f"gpucommon: cannot import oomtrace helper: {e!r}", file=sys.stderr, flush=True)

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# A hang prints every thread's stack to stderr and exits, before run.sh's `timeout 120` would kill us silently.
faulthandler.dump_traceback_later(int(os.environ.get("GPU_TEST_WATCHDOG", "105")), exit=True)


def out(*a):
    print(*a, flush=True)


def err(*a):
    print(*a, file=sys.stderr, flush=True)


def check(stream=None, **kv):
    """Prints `CHECK k=v ...` (stdout by default; pass stream=sys.stderr for numbers that may vary)."""
    print("CHECK " + " ".join(f"{k}={v}" for k, v in kv.items()), file=stream or sys.stdout, flush=True)


def mark(label):
    ok = bool(oomtrace is not None and oomtrace.mark(label))
    return ok


def dump(reason):
    """oomtrace.dump(reason); what it returned goes to stderr (it differs between plain and traced runs)."""
    ok = bool(oomtrace is not None and oomtrace.dump(reason))
    err(f"oomtrace.dump({reason!r}) -> {ok} (tracer active: {oomtrace is not None and oomtrace.active()})")
    return ok


def gib(n):
    return f"{n / GiB:.3f}GiB"
