"""JAX: a 4096 x 4096 matmul, a snapshot while the arrays are alive, results rounded.

run.sh runs it twice: with JAX's default preallocation (XLA's BFC allocator takes ~75% of the card at start, so
the report's tracked bytes should be ~0.75 x total in one or a few big allocations) and with
XLA_PYTHON_CLIENT_PREALLOCATE=false (allocations on demand: tracked ~ bytes_in_use / pool_bytes).
memory_stats() numbers go to stderr as CHECK lines (the limit depends on what is free when JAX starts).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

g.out(f"XLA_PYTHON_CLIENT_PREALLOCATE={os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE', '(default)')}")
dev = jax.devices()[0]
g.out(f"backend={jax.default_backend()} platform={dev.platform}")

ones = jnp.ones((4096, 4096), jnp.float32)
y = (ones @ ones).block_until_ready()  # every element is exactly 4096
a = jax.random.normal(jax.random.key(0), (4096, 4096), jnp.float32)
b = jnp.matmul(a, a.T, precision=jax.lax.Precision.HIGHEST) / 4096.0
diag_mean = float(jnp.mean(jnp.diag(b)))
g.out(f"ones@ones: y[0,0]={float(y[0, 0]):.1f} y[-1,-1]={float(y[-1, -1]):.1f}")
g.out(f"a@a.T/4096: mean(diag)={diag_mean:.3f} shape={b.shape}")

stats = dev.memory_stats() or {}
keys = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "bytes_reserved", "pool_bytes", "largest_alloc_size")
g.check(stream=sys.stderr, **{k: stats[k] for k in keys if k in stats})
g.dump("measure")
del ones, y, a, b
