"""PyTorch CUDA-graph capture: a small MLP's forward plus a 256 MiB temporary is captured with torch.cuda.graph
(its own private memory pool, whose segments are cudaMalloc'd while the capture is under way), replayed 5 times
with new inputs copied in, and a snapshot is taken while the graph and its pool are alive.

The tracer must not break the capture (no illegal calls on a capturing stream) and must count the private
pool's segments: tracked should equal memory_reserved() (CHECK line).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.manual_seed(0)
dev = torch.device("cuda")
model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(dev).eval()
static_x = torch.randn(256, 1024, device=dev)

with torch.no_grad():
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as torch.cuda.graph's docs ask
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # torch.cuda.graph does this on entry too
    before = torch.cuda.memory_reserved()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = model(static_x)
        tmp = torch.ones(64 * g.MiB, device=dev)  # 256 MiB, allocated inside the capture
        static_s = tmp.sum()
        del tmp
    torch.cuda.synchronize()
    g.out(f"captured: reserved grew by {torch.cuda.memory_reserved() - before} bytes")

    for i in range(5):
        static_x.copy_(torch.randn(256, 1024, device=dev))
        graph.replay()
        torch.cuda.synchronize()
        g.out(f"replay {i}: mean(y^2)={static_y.pow(2).mean().item():.5f} sum(ones)={static_s.item():.1f}")

g.check(allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved())
g.dump("graph alive")
del graph, static_y, static_s
torch.cuda.synchronize()
torch.cuda.empty_cache()
g.check(phase="after-graph-freed", reserved=torch.cuda.memory_reserved())
g.dump("graph freed")
