"""A real PyTorch training loop whose sequence length doubles each step until the card runs out of memory.

Model: embedding + 8 x nn.TransformerEncoderLayer(d_model=2048, nhead=16, ff=8192) + linear head, AdamW, fp32
weights (TF32 matmuls for speed). Parameters ~0.54 G -> weights + grads + 2 AdamW moments ~8.6 GB.
Activations kept for backward are ~16*d floats + dropout masks per token per layer (~143 KB), i.e. ~1.15 MB per
token for 8 layers, plus logits / log-softmax / their grad (3 x vocab x 4 B ~ 0.4 MB per token):
  batch 8, seq 8192  ->  65 k tokens -> ~110 GB (may fit on a 141 GB H200)
  batch 8, seq 16384 -> 131 k tokens -> ~210 GB (cannot fit)
and even at a third of that estimate seq 65536 (the cap: 8 steps) needs > 160 GB, so the loop always OOMs.

The OOM is NOT caught: the process must die with torch.OutOfMemoryError exactly as it does untraced.
--segments-at-oom catches it once, prints the caching allocator's segments (what is cudaMalloc'd at that
moment) and its peaks, asks oomtrace for a snapshot right there, and re-raises.

stdout: one line per completed step (step, seq_len, loss to 3 decimals, memory_allocated/reserved in bytes).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--segments-at-oom", action="store_true")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=512)
p.add_argument("--steps", type=int, default=8, help="cap: at most this many steps (seq doubles each)")
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--vocab", type=int, default=32768)
args = p.parse_args()

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
dev = torch.device("cuda")


class LM(nn.Module):
    def __init__(self, vocab, d, layers, heads):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)))


with dev:  # initialise the ~0.54 G parameters on the GPU, not on the CPU
    model = LM(args.vocab, args.d_model, args.layers, args.heads)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
nparams = sum(t.numel() for t in model.parameters())
g.out(f"model params={nparams} d_model={args.d_model} layers={args.layers} vocab={args.vocab} batch={args.batch}")
g.check(param_bytes=nparams * 4)


def train():
    L = args.seq
    for i in range(args.steps):
        g.mark(f"step {i} seq_len={L}")
        x = torch.randint(0, args.vocab, (args.batch, L), device=dev)
        y = torch.randint(0, args.vocab, (args.batch, L), device=dev)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, args.vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        lv = loss.item()
        del x, y, logits, loss
        g.out(f"step {i} seq_len={L} loss={lv:.3f} allocated={torch.cuda.memory_allocated()} "
              f"reserved={torch.cuda.memory_reserved()} max_reserved={torch.cuda.max_memory_reserved()}")
        L *= 2
    g.out(f"reached the cap of {args.steps} steps without running out of memory")


if not args.segments_at_oom:
    train()
else:
    try:
        train()
    except torch.OutOfMemoryError:
        segs = torch.cuda.memory_snapshot()
        seg_total = sum(s.get("total_size", 0) for s in segs)
        seg_alloc = sum(s.get("allocated_size", 0) for s in segs)
        g.check(segments=len(segs), segments_total_bytes=seg_total, segments_allocated_bytes=seg_alloc,
                reserved=torch.cuda.memory_reserved(), max_reserved=torch.cuda.max_memory_reserved(),
                allocated=torch.cuda.memory_allocated(), max_allocated=torch.cuda.max_memory_allocated())
        g.dump("segments-at-oom")
        raise
