"""Framework layer (issue 11): PyTorch fragmentation. The device is filled with 1 GiB tensors, all freed (the
caching allocator keeps their segments), then 600 MiB tensors are placed inside those cached segments, one
each, and a 2 GiB request fails: free memory is scattered as 424 MiB holes, no driver call can give 2 GiB.

Expected of the tracer: the fatal framework-oom snapshot with PyTorch's request (2 GiB), the allocator's
segments and blocks (reserved far above allocated, largest free block 424 MiB), and the driver OOM(s) of the
same failure listed as its probes. The OOM is not caught (exit status 1, torch's message on stderr)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402

free, total = torch.cuda.mem_get_info()
n = free // g.GiB - 1  # leaves less than 2 GiB free on the device
big = [torch.empty(g.GiB, dtype=torch.uint8, device="cuda") for _ in range(n)]
g.err(f"filled with {n} x 1 GiB")
del big  # segments stay cached
small = [torch.empty(600 * g.MiB, dtype=torch.uint8, device="cuda") for _ in range(n)]
torch.cuda.synchronize()
g.err(f"allocated {torch.cuda.memory_allocated()} reserved {torch.cuda.memory_reserved()}")
g.out("600 MiB tensors placed in the cached 1 GiB segments")
g.check(request_bytes=2 * g.GiB)
g.check(stream=sys.stderr, allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved())
x = torch.empty(2 * g.GiB, dtype=torch.uint8, device="cuda")
g.out("UNEXPECTED: the 2 GiB request succeeded")
