"""Framework layer (issue 11): a CUDA graph's private memory pool. A small MLP plus a 256 MiB temporary is
captured with torch.cuda.graph, replayed, and oomtrace.dump() is called while the graph lives. Expected: the
dump's allocator segments include ones in a private pool (pool id not 0, flag "private pool")."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda().eval()
x = torch.randn(256, 1024, device="cuda")
with torch.no_grad():
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tmp = torch.empty(256 * g.MiB, dtype=torch.uint8, device="cuda")
        y = model(x)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
private = [s for s in torch.cuda.memory._snapshot()["segments"] if tuple(s.get("segment_pool_id", (0, 0))) != (0, 0)]
g.out(f"graph replayed; y.sum={float(y.sum()):.2f}")
g.check(stream=sys.stderr, private_segments=len(private), private_bytes=sum(s["total_size"] for s in private))
g.dump("graph pool")
