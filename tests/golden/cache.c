/* Golden workload (tests/golden/run.sh, against the stand-in driver, built -g) of a program whose device memory
 * only grows, and of requests that do not fit: the modes are listed at main. */
#include "oomtrace.h"

#include <cuda.h>
#include <stdio.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static CUdeviceptr entries[64];
static int nentries;

static __attribute__((noinline)) int cache_put(size_t bytes)
{
    if (nentries == 64 || cuMemAlloc(&entries[nentries], bytes) != CUDA_SUCCESS)
        return -1;
    nentries++;
    return 0;
}

static __attribute__((noinline)) int scratch(void)
{
    CUdeviceptr p;
    if (cuMemAlloc(&p, 64 * MiB) != CUDA_SUCCESS)
        return -1;
    return cuMemFree(p) == CUDA_SUCCESS ? 0 : -1;
}

static __attribute__((noinline)) CUdeviceptr load_weights(size_t bytes)
{
    CUdeviceptr p = 0;
    return cuMemAlloc(&p, bytes) == CUDA_SUCCESS ? p : 0;
}

/* Modes: "cache", a cache that takes one allocation per request and never gives any back, until the device is
 * full; "leak", the same cache beside a loop that frees its scratch every step; "marked", the cache with a marker
 * per step (a leak between markers with no free at all, and no caching allocator on the stack); "big", one
 * request larger than the whole device; "pool", memory freed into the default stream-ordered pool, which the
 * pool keeps, then a plain allocation that the pool's idle memory would have covered; "short", a plain request
 * that does not fit while one site holds more than it is short. */
int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "cache";
    CUcontext ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 2;
    if (strcmp(mode, "big") == 0) {
        CUdeviceptr x;
        if (!load_weights(300 * MiB) || !load_weights(100 * MiB))
            return 3;
        if (cuMemAlloc(&x, 3072 * MiB) == CUDA_SUCCESS) /* more than the 1 GiB device */
            return 4;
        fprintf(stderr, "the 3 GiB request failed\n");
        return 1;
    }
    if (strcmp(mode, "pool") == 0) {
        CUdeviceptr p[32], x;
        for (int i = 0; i < 32; i++)
            if (cuMemAllocAsync(&p[i], 24 * MiB, 0) != CUDA_SUCCESS)
                return 3;
        for (int i = 0; i < 32; i += 2) /* half given back: the pool keeps their 384 MiB reserved */
            cuMemFreeAsync(p[i], 0);
        cuStreamSynchronize(0);
        if (cuMemAlloc(&x, 400 * MiB) == CUDA_SUCCESS) /* 256 MiB free, 640 MiB with the pool's */
            return 4;
        fprintf(stderr, "the 400 MiB request failed\n");
        return 1;
    }
    if (strcmp(mode, "short") == 0) {
        CUdeviceptr x;
        if (!load_weights(300 * MiB) || cache_put(100 * MiB))
            return 3;
        if (cuMemAlloc(&x, 700 * MiB) == CUDA_SUCCESS) /* 624 MiB free: 76 MiB short */
            return 4;
        fprintf(stderr, "the 700 MiB request failed\n");
        return 1;
    }
    if (strcmp(mode, "marked") == 0) {
        char label[32];
        for (int step = 0; step < 64; step++) {
            snprintf(label, sizeof(label), "step %d", step);
            oomtrace_mark_if_loaded(label);
            if (cache_put(64 * MiB)) {
                fprintf(stderr, "out of memory at step %d\n", step);
                return 1;
            }
        }
        return 0;
    }
    if (!load_weights(strcmp(mode, "leak") == 0 ? 200 * MiB : 300 * MiB))
        return 3;
    for (int request = 0; request < 64; request++) {
        if (strcmp(mode, "leak") == 0 ? scratch() || cache_put(32 * MiB) : cache_put(128 * MiB)) {
            fprintf(stderr, "out of memory at request %d\n", request);
            return 1;
        }
    }
    return 0;
}
