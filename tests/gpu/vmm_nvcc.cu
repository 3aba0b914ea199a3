// A plain CUDA C++ program built by nvcc with the static runtime (the default), so every runtime call reaches
// the driver through cuGetProcAddress, plus driver VMM calls linked directly (-lcuda).
//
// It holds known sizes of every kind oomtrace tracks, prints exactly what it holds (stdout, deterministic),
// asks for a snapshot with oomtrace_dump_if_loaded("measure"), then asks for more than the card has (cudaMalloc
// and cuMemCreate of 200 GiB) to trigger OOM snapshots, prints the errors, frees everything and exits 0.
//
//   nvcc -O2 -o vmm_nvcc tests/gpu/vmm_nvcc.cu -L$CUDA_HOME/lib64/stubs -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "../../include/oomtrace.h"
#include "gpu_check.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static unsigned long long used_now(void)
{
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        return 0;
    return (unsigned long long)(total_b - free_b);
}

int main(void)
{
    unsigned long long device_exact = 0; // cudaMalloc + async + pitch + vmm: sizes the program knows exactly
    unsigned long long array_est = 0;    // a CUDA array: oomtrace estimates it from the descriptor

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(0) != cudaSuccess) {
        printf("no usable CUDA device\n");
        return 1;
    }
    unsigned long long used0 = used_now();

    // 1. cudaMalloc of known sizes (one odd size).
    const size_t sizes[3] = {256 * MiB, 1 * GiB, 100 * MiB + 12345};
    void *p[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        RT(cudaMalloc(&p[i], sizes[i]));
        RT(cudaMemset(p[i], 0, sizes[i]));
        device_exact += sizes[i];
        printf("cudaMalloc %zu bytes\n", sizes[i]);
    }

    // 2. Stream-ordered allocation from the default pool.
    cudaStream_t st;
    RT(cudaStreamCreate(&st));
    void *pa = 0;
    const size_t async_sz = 128 * MiB;
    RT(cudaMallocAsync(&pa, async_sz, st));
    RT(cudaMemsetAsync(pa, 0, async_sz, st));
    RT(cudaStreamSynchronize(st));
    device_exact += async_sz;
    printf("cudaMallocAsync %zu bytes\n", async_sz);

    // 3. Pitched allocation: oomtrace records pitch * height.
    void *pp = 0;
    size_t pitch = 0;
    RT(cudaMallocPitch(&pp, &pitch, 1000, 1000));
    device_exact += (unsigned long long)pitch * 1000;
    printf("cudaMallocPitch width=1000 height=1000 pitch=%zu bytes=%zu\n", pitch, pitch * 1000);

    // 4. A 4096 x 4096 float CUDA array (64 MiB of texels).
    cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
    cudaArray_t arr = 0;
    RT(cudaMallocArray(&arr, &desc, 4096, 4096, 0));
    array_est = 4096ull * 4096 * 4;
    printf("cudaMallocArray 4096x4096 float texels=%llu bytes\n", array_est);

    // 5. Managed memory (small: never ask for much managed memory).
    void *pm = 0;
    const size_t managed_sz = 64 * MiB;
    RT(cudaMallocManaged(&pm, managed_sz, cudaMemAttachGlobal));
    if (pm)
        memset(pm, 1, managed_sz);
    printf("cudaMallocManaged %zu bytes\n", managed_sz);

    // 6. Pinned host memory.
    void *ph = 0;
    const size_t host_sz = 32 * MiB;
    RT(cudaHostAlloc(&ph, host_sz, cudaHostAllocDefault));
    printf("cudaHostAlloc %zu bytes\n", host_sz);

    // 7. Driver VMM: create a physical allocation, reserve a VA range, map it, grant access.
    CUdevice cudev = 0;
    DRV(cuDeviceGet(&cudev, 0));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = cudev;
    size_t gran = 0;
    DRV(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (gran == 0)
        gran = 2 * MiB;
    const size_t vmm_sz = ((192 * MiB + gran - 1) / gran) * gran;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    DRV(cuMemCreate(&h, vmm_sz, &prop, 0));
    DRV(cuMemAddressReserve(&va, vmm_sz, 0, 0, 0));
    DRV(cuMemMap(va, vmm_sz, 0, h, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    DRV(cuMemSetAccess(va, vmm_sz, &acc, 1));
    DRV(cuMemsetD8(va, 7, vmm_sz));
    DRV(cuCtxSynchronize());
    device_exact += vmm_sz;
    printf("cuMemCreate+cuMemMap %zu bytes (granularity %zu)\n", vmm_sz, gran);

    // oomtrace's tracked_bytes counts device categories 1-5: device, async, vmm, managed, array.
    printf("CHECK device_exact_bytes=%llu array_est_bytes=%llu device_total_bytes=%llu managed_bytes=%zu "
           "host_pinned_bytes=%zu tracked_expect_bytes=%llu live_expect_bytes=%llu\n",
           device_exact, array_est, device_exact + array_est, managed_sz, host_sz,
           device_exact + array_est + managed_sz, device_exact + array_est + managed_sz + host_sz);
    fprintf(stderr, "CHECK memgetinfo_used_delta=%llu\n", used_now() - used0);

    int rc = oomtrace_dump_if_loaded("measure");
    fprintf(stderr, "oomtrace_dump_if_loaded(\"measure\") -> %d\n", rc);

    // 8. More than the card has: each should fail with out-of-memory and leave a snapshot.
    void *big = 0;
    cudaError_t e = cudaMalloc(&big, 200 * GiB);
    printf("cudaMalloc(200 GiB) -> %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
    (void)cudaGetLastError();
    CUmemGenericAllocationHandle hbig = 0;
    CUresult r = cuMemCreate(&hbig, ((200 * GiB + gran - 1) / gran) * gran, &prop, 0);
    const char *rn = 0;
    cuGetErrorName(r, &rn);
    printf("cuMemCreate(200 GiB) -> %s\n", rn ? rn : "?");
    if (r == CUDA_SUCCESS)
        cuMemRelease(hbig);

    // 9. Free everything; a last snapshot shows what oomtrace still counts as live.
    DRV(cuMemUnmap(va, vmm_sz));
    DRV(cuMemRelease(h));
    DRV(cuMemAddressFree(va, vmm_sz));
    RT(cudaFreeHost(ph));
    RT(cudaFree(pm));
    RT(cudaFreeArray(arr));
    RT(cudaFree(pp));
    RT(cudaFreeAsync(pa, st));
    RT(cudaStreamSynchronize(st));
    RT(cudaStreamDestroy(st));
    for (int i = 0; i < 3; i++)
        RT(cudaFree(p[i]));
    printf("CHECK phase=after-free tracked_expect_bytes=0\n");
    rc = oomtrace_dump_if_loaded("after-free");
    fprintf(stderr, "oomtrace_dump_if_loaded(\"after-free\") -> %d\n", rc);
    printf("failures=%d\n", failures);
    return failures ? 1 : 0;
}
