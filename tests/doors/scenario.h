/* The allocation scenario every door runs, so that each door's snapshot can be checked against the same
 * exact numbers (tests/test_doors.c). With a 1 GiB device:
 *   load_weights      256 MiB
 *   make_activations  128 MiB x 2      -> 512 MiB live: the peak
 *   free both activations              -> 256 MiB
 *   grow_cache        192 MiB          -> 448 MiB
 *   request_too_big   700 MiB          -> CUDA_ERROR_OUT_OF_MEMORY (576 MiB free)
 * The functions are exported (-rdynamic) and never inlined, so the snapshot's dump-time names find them. */
#ifndef DOORS_SCENARIO_H
#define DOORS_SCENARIO_H
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define MiB (1024ull * 1024)

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

#define NOINLINE __attribute__((noinline, visibility("default")))

NOINLINE CUdeviceptr load_weights(alloc_fn a)
{
    CUdeviceptr p = 0;
    if (a(&p, 256 * MiB) != CUDA_SUCCESS)
        exit(10);
    return p;
}

NOINLINE CUdeviceptr make_activations(alloc_fn a)
{
    CUdeviceptr p = 0;
    if (a(&p, 128 * MiB) != CUDA_SUCCESS)
        exit(11);
    return p;
}

NOINLINE CUdeviceptr grow_cache(alloc_fn a)
{
    CUdeviceptr p = 0;
    if (a(&p, 192 * MiB) != CUDA_SUCCESS)
        exit(12);
    return p;
}

NOINLINE CUresult request_too_big(alloc_fn a, CUdeviceptr *out)
{
    CUresult r = a(out, 700 * MiB);
    __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
    return r;
}

/* Returns the process exit status: 0 when every call behaved as untraced. */
static int run_scenario(alloc_fn a, free_fn f)
{
    CUdeviceptr w = load_weights(a);
    CUdeviceptr b[2];
    volatile int two = 2; /* not unrolled: one call site, two allocations, one merged site */
    for (int i = 0; i < two; i++)
        b[i] = make_activations(a);
    if (f(b[0]) != CUDA_SUCCESS || f(b[1]) != CUDA_SUCCESS)
        return 13;
    CUdeviceptr c = grow_cache(a);
    CUdeviceptr sentinel = 0xdeadbeef, d = sentinel;
    CUresult r = request_too_big(a, &d);
    if (r != CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "expected CUDA_ERROR_OUT_OF_MEMORY, got %d\n", (int)r);
        return 14;
    }
    if (d != sentinel) { /* the out-parameter must be untouched, as untraced */
        fprintf(stderr, "out-parameter changed on failure\n");
        return 15;
    }
    if (f(c) != CUDA_SUCCESS || f(w) != CUDA_SUCCESS)
        return 16;
    return 0;
}

/* A context on device 0, through whichever function pointers the door produced. */
typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*ctx_retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*ctx_set_fn)(CUcontext);

static int make_context(init_fn init, ctx_retain_fn retain, ctx_set_fn set)
{
    CUcontext ctx;
    if (init(0) != CUDA_SUCCESS || retain(&ctx, 0) != CUDA_SUCCESS || set(ctx) != CUDA_SUCCESS)
        return 20;
    return 0;
}
#endif
