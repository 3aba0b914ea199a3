"""IPC-opened memory's size (walk 10, #8). The parent shares a 256 MiB CUDA tensor with a spawned child
(PyTorch's CUDA IPC: cudaIpcOpenMemHandle in the child, the driver's cuIpcOpenMemHandle); the child, traced too
(it inherits LD_PRELOAD), reads it and dumps a snapshot ("ipc-open"). Its report should read "imported 256 MiB"
on the Devices line and imported.size_unknown 0 in JSON (the size from cuMemGetAddressRange): never "imported
1 B", nor "size not known" unless the driver refused the question.

stdout: deterministic facts only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

N = 64 << 20  # float32 elements: 256 MiB, a block of its own in PyTorch's caching allocator


def child(q, done):
    t = q.get()
    g.out(f"child sum {float(t[:1024].sum()):.1f}")
    g.dump("ipc-open")
    del t
    done.set()


if __name__ == "__main__":
    import torch
    import torch.multiprocessing as mp

    mp.set_start_method("spawn")
    q, done = mp.Queue(), mp.Event()
    x = torch.ones(N, device="cuda")
    p = mp.Process(target=child, args=(q, done))
    p.start()
    q.put(x)
    done.wait(100)
    p.join(100)
    g.out(f"child exit {p.exitcode}")
    g.check(imported_bytes=N * 4, imported_unknown=0)
