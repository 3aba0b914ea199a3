"""An IPC mapping's size on the real driver (walk 10, #8): the parent makes a 1 GiB CUDA tensor and sends it to a
spawned child through torch.multiprocessing, which opens the parent's allocation with cudaIpcOpenMemHandle (the
runtime reaches cuIpcOpenMemHandle through cuGetProcAddress). The child, traced like the parent (LD_PRELOAD is
inherited), writes a dump; its report must count the mapping as imported with the allocation's size (1 GiB,
from cuMemGetAddressRange), not as an unknown size. stdout: the tensor's sum as both processes see it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def child(q, done):
    t = q.get()
    g.out("child sees sum %d" % int(t.sum().item()))
    g.dump("ipc child")
    done.set()


if __name__ == "__main__":
    mp.set_start_method("spawn")
    t = torch.ones(g.GiB // 4, dtype=torch.float32, device="cuda")
    g.out("parent sum %d" % int(t.sum().item()))
    q, done = mp.Queue(), mp.Event()
    p = mp.Process(target=child, args=(q, done))
    p.start()
    q.put(t)
    done.wait(60)
    p.join(60)
    g.out("child exit %s" % p.exitcode)
