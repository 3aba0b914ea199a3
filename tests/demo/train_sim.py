"""A toy "training loop" for `make demo` on a machine without a GPU: it allocates through the stand-in
driver (tests/fakecuda, a SIMULATED 8 GiB device) the way a framework would - weights, optimizer state,
activations that grow with the sequence length - and runs out of memory when the sequence length
doubles. Nothing here touches a real GPU."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import oomtrace  # noqa: E402

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
_alloc = cuda.cuMemAlloc_v2
_alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
_free = cuda.cuMemFree_v2
_free.argtypes = [ctypes.c_uint64]


class OutOfMemory(RuntimeError):
    pass


def device_alloc(nbytes):
    p = ctypes.c_uint64()
    rc = _alloc(ctypes.byref(p), nbytes)
    if rc == 2:
        raise OutOfMemory(f"CUDA out of memory. Tried to allocate {nbytes / MiB:.2f} MiB")
    assert rc == 0, rc
    return p.value


def build_model(layers, width):
    return [device_alloc(width * width * 4) for _ in range(layers)]


def init_optimizer(params, width):
    # Adam keeps two moments per parameter.
    return [device_alloc(width * width * 4) for _ in params for _ in range(2)]


def forward(layers, batch, seq_len, width):
    return [device_alloc(batch * seq_len * width * 4) for _ in range(layers)]


def main():
    assert cuda.cuInit(0) == 0
    layers, width, batch = 8, 4096, 4
    params = build_model(layers, width)
    state = init_optimizer(params, width)
    seq_len = 512
    for step in range(10):
        oomtrace.mark(f"step {step} seq_len={seq_len}")
        acts = forward(layers, batch, seq_len, width)
        print(f"step {step}: seq_len={seq_len} ok")
        for a in acts:
            _free(a)
        seq_len *= 2
    return params, state


if __name__ == "__main__":
    try:
        main()
    except OutOfMemory as e:
        print(f"torch.OutOfMemoryError (simulated): {e}", file=sys.stderr)
        sys.exit(1)
