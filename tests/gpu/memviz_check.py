#!/usr/bin/env python3
"""Checks `oomtrace-read --format memviz` output against PyTorch's own memory_viz code.

    python3 tests/gpu/memviz_check.py FILE...        # FILE: a .pickle from --format memviz, or a .oomt
                                                     # snapshot (converted with $READER, default
                                                     # build/oomtrace-read)

For each file: loads the pickle with an Unpickler that refuses every global (the format is plain dicts,
lists, tuples, str, int, bool, None), then runs torch.cuda._memory_viz on it: segsum (the "stats" view,
which asserts that block sizes add up), trace (the text trace), memory and segments (flame graph lines;
flamegraph.pl is not fetched), trace_plot and segment_plot (the HTML pages). When CUDA is available it also
records a small real torch.cuda.memory._snapshot() and reports any key the real format has that ours lacks.

Prints "memviz ok FILE segments=N entries=M trace_plot=BYTES ..." per file, or "memviz FAIL FILE: error".
Exit status: 0 when every file passed, 1 otherwise.
"""
import os
import pickle
import subprocess
import sys
import tempfile
import traceback


class PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"the pickle references a global ({module}.{name}); it must not")


def load(path):
    if not path.endswith(".oomt"):
        with open(path, "rb") as f:
            return PlainUnpickler(f).load()
    reader = os.environ.get("READER", "build/oomtrace-read")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "memviz.pickle")
        subprocess.run([reader, "--format", "memviz", "-o", out, path], check=True)
        with open(out, "rb") as f:
            return PlainUnpickler(f).load()


def key_report(ours):
    """Keys of a real snapshot's segments, blocks and trace entries that ours lacks (CUDA only)."""
    try:
        import torch
        if not torch.cuda.is_available():
            return "real-format: no CUDA"
        torch.cuda.memory._record_memory_history(max_entries=1000)
        x = torch.empty(1 << 20, device="cuda")
        del x
        y = torch.empty(1 << 22, device="cuda")
        real = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        del y
    except Exception as e:  # an older torch, no history support: not this check's business
        return f"real-format: skipped ({type(e).__name__}: {e})"

    def keys(items):
        s = set()
        for it in items:
            s |= set(it)
        return s

    missing = []
    rs, os_ = real.get("segments", []), ours.get("segments", [])
    if rs and os_:
        missing += [f"segment.{k}" for k in sorted(keys(rs) - keys(os_))]
        rb = [b for s in rs for b in s.get("blocks", [])]
        ob = [b for s in os_ for b in s.get("blocks", [])]
        if rb and ob:
            missing += [f"block.{k}" for k in sorted(keys(rb) - keys(ob))]
    rt = [e for d in real.get("device_traces", []) for e in d if e.get("action") == "alloc"]
    ot = [e for d in ours.get("device_traces", []) for e in d if e.get("action") == "alloc"]
    if rt and ot:
        missing += [f"trace.{k}" for k in sorted(keys(rt) - keys(ot))]
    return "real-format: " + ("keys missing " + ",".join(missing) if missing else "same keys")


def check(path):
    from torch.cuda import _memory_viz as mv

    d = load(path)
    assert isinstance(d, dict) and "segments" in d and "device_traces" in d, "not a snapshot dict"
    nseg = len(d["segments"])
    nent = sum(len(t) for t in d["device_traces"])
    stats = mv.segsum(d)
    text = mv.trace(d)
    flame_mem = mv.memory(d, format_flamegraph=lambda lines: lines)
    flame_seg = mv.segments(d, format_flamegraph=lambda lines: lines)
    tp = mv.trace_plot(d)
    sp = mv.segment_plot(d)
    extra = key_report(d)
    print(f"memviz ok {path} segments={nseg} entries={nent} devices={len(d['device_traces'])} "
          f"stats={len(stats)} trace={len(text)} flame={flame_mem.count(chr(10))}/{flame_seg.count(chr(10))} "
          f"trace_plot={len(tp)} segment_plot={len(sp)} {extra}")


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    ok = True
    for path in argv[1:]:
        try:
            check(path)
        except Exception as e:
            ok = False
            print(f"memviz FAIL {path}: {type(e).__name__}: {e}")
            traceback.print_exc(file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
