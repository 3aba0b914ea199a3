/* Golden workload of call sites that reach the allocation through one helper: grab() called from two lines
 * of main and from load(), so three sites whose innermost frame reads "grab (helper.c:N)". Reports tell them
 * apart by the first caller that differs, and --diff matches each with its own (HELPER_EXTRA_MIB grows the
 * weights). Built -g; run against the stand-in driver by tests/golden/run.sh. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define MiB ((size_t)1 << 20)

static __attribute__((noinline)) CUdeviceptr grab(size_t bytes)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, bytes) != CUDA_SUCCESS)
        return 0;
    return p;
}

static __attribute__((noinline)) CUdeviceptr load(size_t bytes)
{
    return grab(bytes);
}

int main(void)
{
    const char *x = getenv("HELPER_EXTRA_MIB");
    size_t extra = (x && *x ? strtoull(x, NULL, 10) : 0) * MiB;
    CUcontext ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 2;
    CUdeviceptr weights = grab(256 * MiB + extra);
    CUdeviceptr acts = grab(128 * MiB);
    CUdeviceptr table = load(64 * MiB);
    if (!weights || !acts || !table)
        return 3;
    if (grab(2048 * MiB)) /* too big for the 1 GiB device: the out-of-memory snapshot */
        return 4;
    cuMemFree(weights);
    cuMemFree(acts);
    cuMemFree(table);
    return 0;
}
