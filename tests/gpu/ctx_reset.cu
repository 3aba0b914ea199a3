// A context's end on the real driver (walk 8 #28): which allocations cuCtxDestroy really frees, and a test
// harness's phases with cudaDeviceReset() between them. Built by nvcc (static runtime: the runtime reaches
// cuDevicePrimaryCtxReset through cuGetProcAddress) with the driver linked directly (-lcuda).
//
// Part 1, per kind: a created context, 2 GiB of one kind in it (written, so that it is resident), then
// cuCtxDestroy; the device's free memory before and after, less what the context itself took, says whether
// the driver took the 2 GiB back ("destroy frees KIND: yes|no"). The tracer must agree: the dump "kinds"
// (after all of them) holds exactly the kinds that said no. Part 2: three phases of 2 x 2 GiB cudaMalloc,
// each ended by cudaDeviceReset(), then 2 GiB: the dump "after-phases" must show a 4 GiB peak and 2 GiB
// live, not the phases' sum (14 GiB live before the fix).
//
//   nvcc -O2 -o ctx_reset tests/gpu/ctx_reset.cu -L$CUDA_HOME/lib64/stubs -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "../../include/oomtrace.h"
#include "gpu_check.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define SIZE (2 * GiB)

enum kind { K_MEM, K_PITCH, K_MANAGED, K_ARRAY, K_ASYNC, K_VMM, K_NONE };
static const char *const names[] = {"cuMemAlloc", "cuMemAllocPitch", "cuMemAllocManaged", "cuArrayCreate",
                                    "cuMemAllocAsync", "cuMemCreate", "nothing"};

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    DRV(cuMemGetInfo(&f, &t));
    return f;
}

/* What survives a kind's context, to free afterwards. */
static CUdeviceptr async_left;
static CUmemGenericAllocationHandle vmm_left;

/* Bytes the device got back when a context holding SIZE of kind k was destroyed, measured from the primary
 * context (current again after the destroy). */
static long long back_after_destroy(CUdevice dev, CUcontext prim, enum kind k)
{
    CUcontext c;
    DRV(cuCtxCreate(&c, NULL, 0, dev));
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUarray arr = 0;
    switch (k) {
    case K_MEM: DRV(cuMemAlloc(&p, SIZE)); break;
    case K_PITCH: DRV(cuMemAllocPitch(&p, &pitch, 64 * 1024, SIZE / (64 * 1024), 4)); break;
    case K_MANAGED: DRV(cuMemAllocManaged(&p, SIZE, CU_MEM_ATTACH_GLOBAL)); break;
    case K_ARRAY: {
        CUDA_ARRAY_DESCRIPTOR d;
        memset(&d, 0, sizeof d);
        d.Width = 16384;
        d.Height = SIZE / (16384 * 16);
        d.Format = CU_AD_FORMAT_FLOAT;
        d.NumChannels = 4;
        DRV(cuArrayCreate(&arr, &d));
        break;
    }
    case K_ASYNC: DRV(cuMemAllocAsync(&p, SIZE, NULL)); async_left = p; break;
    case K_VMM: {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        DRV(cuMemCreate(&vmm_left, SIZE, &prop, 0));
        break;
    }
    case K_NONE: break;
    }
    if (p)
        DRV(cuMemsetD8(p, 1, k == K_PITCH ? pitch * (SIZE / (64 * 1024)) : SIZE)); /* resident */
    DRV(cuCtxSynchronize());
    size_t held = free_now();
    DRV(cuCtxDestroy(c));
    DRV(cuCtxSetCurrent(prim));
    DRV(cuCtxSynchronize());
    return (long long)free_now() - (long long)held;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice dev;
    CUcontext prim;
    DRV(cuInit(0));
    DRV(cuDeviceGet(&dev, 0));
    DRV(cuDevicePrimaryCtxRetain(&prim, dev));
    DRV(cuCtxSetCurrent(prim));

    /* Part 1. A context's own memory comes back with it too: measured alone first. */
    long long own = back_after_destroy(dev, prim, K_NONE);
    for (int k = K_MEM; k < K_NONE; k++) {
        long long back = back_after_destroy(dev, prim, (enum kind)k) - own;
        printf("destroy frees %s: %s\n", names[k], back > (long long)(SIZE * 9 / 10) ? "yes" : "no");
        fprintf(stderr, "%s: %lld MiB back beyond the context's own %lld MiB\n", names[k], back / (long long)MiB,
                own / (long long)MiB);
    }
    oomtrace_dump_if_loaded("kinds"); /* live: what said no */
    if (async_left) {
        CUresult r = cuMemFreeAsync(async_left, NULL);
        printf("cuMemFreeAsync after its context's end: %s\n", r == CUDA_SUCCESS ? "ok" : "refused");
        cuCtxSynchronize();
    }
    if (vmm_left)
        DRV(cuMemRelease(vmm_left));

    /* Part 2: a harness's cases, each ended by cudaDeviceReset(). */
    for (int phase = 1; phase <= 3; phase++) {
        void *a = NULL, *b = NULL;
        RT(cudaMalloc(&a, SIZE));
        RT(cudaMalloc(&b, SIZE));
        RT(cudaMemset(a, 0, SIZE));
        RT(cudaMemset(b, 0, SIZE));
        RT(cudaDeviceSynchronize());
        RT(cudaDeviceReset());
        printf("phase %d: 2 x 2 GiB, then cudaDeviceReset\n", phase);
    }
    void *last = NULL;
    RT(cudaMalloc(&last, SIZE));
    RT(cudaMemset(last, 0, SIZE));
    RT(cudaDeviceSynchronize());
    oomtrace_dump_if_loaded("after-phases"); /* peak 4 GiB, live 2 GiB */
    printf("holding 2048 MiB after the phases\n");
    RT(cudaFree(last));
    printf("failures %d\n", failures);
    return failures ? 1 : 0;
}
