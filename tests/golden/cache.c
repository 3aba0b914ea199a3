/* Golden workload of a program whose device memory only grows: a cache that takes one allocation per
 * request and never gives any back (mode "cache"), until the device is full; the same cache beside a loop
 * that frees its scratch every step (mode "leak"); and one request larger than the whole device (mode
 * "big"). Built -g; run against the stand-in driver by tests/golden/run.sh. */
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
