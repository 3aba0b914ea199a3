/* The C side of issue 16's table: cuMemAllocAsync + cuMemFreeAsync pairs (4 KiB, one stream, a warm pool)
 * called directly through the driver API, as a C program that allocates per request does. Loops of 20,000
 * pairs; prints one JSON line with the minimum over the timed loops (ns per pair). Built and run by
 * tests/gpu/bench_alloc_pair.sh:  cc -O2 -I$CUDA_HOME/include alloc_pair.c -lcuda */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAIRS 20000

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "alloc_pair: %s failed (%d)\n", what, (int)r);
        exit(2);
    }
}

static double loop(CUstream s)
{
    CUdeviceptr p;
    double t0 = now_ns();
    for (int i = 0; i < PAIRS; i++) {
        check(cuMemAllocAsync(&p, 4096, s), "cuMemAllocAsync");
        check(cuMemFreeAsync(p, s), "cuMemFreeAsync");
    }
    return (now_ns() - t0) / PAIRS;
}

int main(int argc, char **argv)
{
    int loops = argc > 1 ? atoi(argv[1]) : 8;
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    loop(s); /* warm */
    double best = 1e30;
    printf("{\"case\": \"c_async\", \"unit\": \"ns/pair\", \"loops\": [");
    for (int i = 0; i < loops; i++) {
        double v = loop(s);
        best = v < best ? v : best;
        printf("%s%.1f", i ? ", " : "", v);
    }
    check(cuStreamSynchronize(s), "cuStreamSynchronize");
    printf("], \"min\": %.1f, \"traced\": %s}\n", best, getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "liboomtrace") ? "true" : "false");
    return 0;
}
