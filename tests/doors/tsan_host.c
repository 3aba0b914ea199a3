/* A threaded host built with ThreadSanitizer (tests/sh/tsan_host.sh, walk 8, #25): THREADS threads allocate
 * and free through call paths of different depths (new stacks for the tracer's table, which grows), then
 * all ask for more than the device at once (one out-of-memory snapshot each), then free what they hold.
 * Untraced, TSan reports nothing and it exits 0; traced, it must be the same. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 16
#define EACH 40

static CUcontext ctx;
static pthread_barrier_t together;
static int failed[THREADS];

static CUdeviceptr alloc_at(int depth, size_t size)
{
    if (depth > 0)
        return alloc_at(depth - 1, size + 4096); /* each depth a stack of its own */
    CUdeviceptr p = 0;
    if (cuMemAlloc_v2(&p, size) != CUDA_SUCCESS)
        return 0;
    return p;
}

static void *worker(void *arg)
{
    int me = (int)((int *)arg - failed);
    CUdeviceptr held[EACH];
    cuCtxSetCurrent(ctx);
    for (int i = 0; i < EACH; i++) {
        held[i] = alloc_at((me + i) % 12, 1 << 16);
        if (i % 2 && held[i]) {
            cuMemFree_v2(held[i]);
            held[i] = 0;
        }
    }
    pthread_barrier_wait(&together);
    CUdeviceptr big;
    failed[me] = cuMemAlloc_v2(&big, (size_t)4 << 30) == CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < EACH; i++)
        if (held[i])
            cuMemFree_v2(held[i]);
    return NULL;
}

int main(void)
{
    CUdevice dev;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
        return 2;
    pthread_barrier_init(&together, NULL, THREADS);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, &failed[i]);
    int n = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        n += failed[i];
    }
    printf("failed %d of %d\n", n, THREADS);
    return n == THREADS ? 0 : 1;
}
