/* The golden tests' workload (tests/golden/run.sh): a toy training loop through the stand-in driver, with
 * exact sizes, so that every number in the reports is known. Built -g, exported (-rdynamic), never inlined.
 *
 *   load_weights       GOLDEN_WEIGHTS_MIB MiB (default 256)
 *   steps 0..4         marker "step N"; step 0 also takes 64 MiB from the default stream-ordered pool and
 *                      frees it (the pool keeps it reserved); forward: one (N+1)*32 MiB activation, freed at
 *                      the end of the step; accumulate_loss: 4 KiB kept alive every step (a leak, like
 *                      `total_loss += loss`)
 *   step 5             marker "step 5"; forward: 2 x 192 MiB (one call site): the peak
 *   then, by mode:     oom    attention_scores asks for 240 MiB: CUDA_ERROR_OUT_OF_MEMORY, exit 0
 *                      exit   frees and exits 0
 *                      crash  dies of SIGSEGV (with OOMTRACE_DUMP=crash a flush file remains); term: SIGTERM
 *
 * With FAKECUDA_CAPACITY=1G and FAKECUDA_OTHER_USED=128M (limit 896 MiB) and 256 MiB of weights, the
 * failure finds 192 MiB - 20 KiB free, 64 MiB reserved by the pool. */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oomtrace.h"

#define MiB (1024ull * 1024)
#define NOINLINE __attribute__((noinline, visibility("default")))

static void need(CUresult r, int code)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "workload: CUresult %d (exit %d)\n", (int)r, code);
        exit(code);
    }
}

NOINLINE CUdeviceptr load_weights(size_t bytes)
{
    CUdeviceptr p = 0;
    need(cuMemAlloc_v2(&p, bytes), 10);
    return p;
}

NOINLINE void pool_scratch(size_t bytes)
{
    CUdeviceptr p = 0;
    need(cuMemAllocAsync(&p, bytes, NULL), 11);
    need(cuMemFreeAsync(p, NULL), 12);
    need(cuStreamSynchronize(NULL), 13);
}

NOINLINE CUdeviceptr forward(size_t bytes)
{
    CUdeviceptr p = 0;
    need(cuMemAlloc_v2(&p, bytes), 14);
    return p;
}

NOINLINE CUdeviceptr accumulate_loss(void)
{
    CUdeviceptr p = 0;
    need(cuMemAlloc_v2(&p, 4096), 15);
    return p;
}

NOINLINE CUresult attention_scores(size_t bytes, CUdeviceptr *out)
{
    CUresult r = cuMemAlloc_v2(out, bytes);
    __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
    return r;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "oom";
    const char *w = getenv("GOLDEN_WEIGHTS_MIB");
    size_t weights = (w && *w ? strtoull(w, NULL, 10) : 256) * MiB;
    CUcontext ctx;
    need(cuInit(0), 2);
    need(cuDevicePrimaryCtxRetain(&ctx, 0), 3);
    need(cuCtxSetCurrent(ctx), 4);

    CUdeviceptr wp = load_weights(weights);
    CUdeviceptr loss[8];
    char label[64];
    for (int step = 0; step < 5; step++) {
        snprintf(label, sizeof label, "step %d", step);
        oomtrace_mark_if_loaded(label);
        if (step == 0)
            pool_scratch(64 * MiB);
        CUdeviceptr act = forward((size_t)(step + 1) * 32 * MiB);
        loss[step] = accumulate_loss();
        need(cuMemFree_v2(act), 16);
    }
    oomtrace_mark_if_loaded("step 5");
    CUdeviceptr big[2];
    volatile int two = 2; /* not unrolled: one call site, two allocations */
    for (int i = 0; i < two; i++)
        big[i] = forward(192 * MiB);
    if (strcmp(mode, "crash") == 0 || strcmp(mode, "term") == 0) /* one line: the goldens' line numbers stay */
        raise(mode[0] == 'c' ? SIGSEGV : SIGTERM);
    if (strcmp(mode, "oom") == 0) {
        CUdeviceptr s = 0;
        CUresult r = attention_scores(240 * MiB, &s);
        if (r != CUDA_ERROR_OUT_OF_MEMORY) {
            fprintf(stderr, "workload: expected CUDA_ERROR_OUT_OF_MEMORY, got %d\n", (int)r);
            return 20;
        }
    }
    for (int i = 0; i < 2; i++)
        need(cuMemFree_v2(big[i]), 17);
    for (int step = 0; step < 5; step++)
        need(cuMemFree_v2(loss[step]), 18);
    need(cuMemFree_v2(wp), 19);
    return 0;
}
