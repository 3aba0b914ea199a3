"""Issue 12: a transformers GPT-2 (config built from code, no download) trained at a batch too big. Expected:
the breakdown (parameters, gradients, AdamW state, activations) and this file's train_step line lead the
report. Skipped (exit 0, one line) when transformers is not installed."""
import sys

import torch

from gpucommon import out

try:
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError:
    out("skipped: transformers is not installed")
    sys.exit(0)

torch.manual_seed(0)
cfg = GPT2Config(n_layer=24, n_embd=1600, n_head=25, n_positions=1024, vocab_size=50257)
model = GPT2LMHeadModel(cfg).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)


def train_step(batch):
    loss = model(input_ids=batch, labels=batch).loss  # LINE:train_step
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


out("gpt2 %d layers" % cfg.n_layer)
for bs in (1, 2, 64, 256):
    train_step(torch.randint(0, cfg.vocab_size, (bs, 1024), device="cuda"))
    out("batch %d fits" % bs)
