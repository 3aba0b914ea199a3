"""Framework layer (issue 11): JAX with its default preallocation (75% of the device taken at start), 1 GiB
arrays kept until XLA's own allocator refuses (RESOURCE_EXHAUSTED): no driver call fails. Expected: exactly
one fatal framework-oom snapshot, with JAX's memory_stats (bytes_in_use, bytes_limit, largest free block),
the preallocation settings, and the live arrays grouped (float32 (256, 1024, 1024) x N). Not caught: exit 1."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

g.out("jax devices:", [d.platform for d in jax.devices()])
held = []
for i in range(1000):
    held.append(jnp.full((256, 1024, 1024), float(i), dtype=jnp.float32))
    held[-1].block_until_ready()
g.out("UNEXPECTED: no OOM")
