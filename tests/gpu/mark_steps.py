"""oomtrace.mark every step, with allocations that grow to a peak at step 5 and shrink after; run.sh sets
OOMTRACE_DUMP=exit, so the only snapshot is written at exit, and its report should name "step 5 ..." as the last
marker before the peak, with peak bytes = torch.cuda.max_memory_reserved() (each step's buffers are cudaMalloc'd
and, after empty_cache(), cudaFree'd, so the peak holds exactly the step-5 buffers).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402

dev = torch.device("cuda")
sizes_mib = [256, 512, 768, 1024, 1280, 2048, 768, 512, 256, 128]
peak_step = max(range(len(sizes_mib)), key=lambda i: sizes_mib[i])
for i, s in enumerate(sizes_mib):
    g.mark(f"step {i} size_mib={s}")
    buf = torch.empty(s * g.MiB, dtype=torch.uint8, device=dev)
    act = torch.empty(64 * g.MiB, dtype=torch.uint8, device=dev)
    buf.fill_(i)
    act.fill_(1)
    torch.cuda.synchronize()
    g.out(f"step {i} size_mib={s} reserved={torch.cuda.memory_reserved()}")
    del buf, act
    torch.cuda.empty_cache()
g.check(expected_peak_step=peak_step, expected_peak_marker=f"'step {peak_step} size_mib={sizes_mib[peak_step]}'",
        max_reserved=torch.cuda.max_memory_reserved(), reserved_at_exit=torch.cuda.memory_reserved())
