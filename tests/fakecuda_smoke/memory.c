/* The stand-in driver's smoke test: device memory, stream-ordered pools, arrays, pinned host memory, IPC. */
#include "smoke.h"

void test_device_memory(void)
{
    CUdeviceptr a, b, c, p = SENTINEL;
    size_t pitch = 777;

    CHECK(used(0) == 0 && live(0) == 0);
    CHECK(free_now() == LIMIT);
    OK(f_cuMemGetInfo_v2(NULL, NULL));
    ERR(f_cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemAlloc_v2(&a, 1000));
    OK(f_cuMemAlloc_v2(&b, 3 * MiB));
    CHECK(a % 512 == 0 && b % 512 == 0 && a != b && a != 0);
    CHECK(used(0) == 1000 + 3 * MiB && live(0) == 2);
    CHECK(free_now() == LIMIT - 1000 - 3 * MiB);

    /* OOM leaves the out-parameter alone and takes nothing. */
    ERR(f_cuMemAlloc_v2(&p, LIMIT), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(p == SENTINEL && used(0) == 1000 + 3 * MiB && live(0) == 2);
    OK(f_cuMemAlloc_v2(&c, LIMIT - 1000 - 3 * MiB)); /* exactly what is left */
    CHECK(free_now() == 0);
    ERR(f_cuMemAlloc_v2(&p, 1), CUDA_ERROR_OUT_OF_MEMORY);
    ERR(f_cuMemAllocPitch_v2(&p, &pitch, 64, 1, 4), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(p == SENTINEL && pitch == 777);
    OK(f_cuMemFree_v2(c));

    /* Frees: bad pointer, interior pointer, double free, NULL. */
    ERR(f_cuMemFree_v2(a + 512), CUDA_ERROR_INVALID_VALUE);
    ERR(f_cuMemFree_v2(0x1234), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemFree_v2(a));
    ERR(f_cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemFree_v2(0));
    OK(f_cuMemAlloc_v2(&c, 1000));
    CHECK(c != a); /* addresses are never reused */
    OK(f_cuMemFree_v2(c));
    OK(f_cuMemFree_v2(b));
    CHECK(used(0) == 0 && live(0) == 0);

    /* Pitch: width rounded up to 512, pitch * height taken. */
    ERR(f_cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemAllocPitch_v2(&a, &pitch, 1000, 10, 4));
    CHECK(pitch == 1024 && used(0) == 10240);
    OK(f_cuMemFree_v2(a));

    /* Managed memory takes capacity too. */
    ERR(f_cuMemAllocManaged(&p, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemAllocManaged(&a, 5 * MiB, CU_MEM_ATTACH_GLOBAL));
    CHECK(used(0) == 5 * MiB && live(0) == 1);
    OK(f_cuMemFree_v2(a));
    CHECK(used(0) == 0 && live(0) == 0);

    /* Device 1 has its own capacity and its own address range. */
    CUcontext c1, c0;
    CUdeviceptr d1;
    OK(f_cuCtxGetCurrent(&c0));
    OK(f_cuDevicePrimaryCtxRetain(&c1, 1));
    OK(f_cuCtxSetCurrent(c1));
    OK(f_cuMemAlloc_v2(&d1, 2 * MiB));
    CHECK(used(1) == 2 * MiB && used(0) == 0 && live(1) == 1);
    OK(f_cuCtxSetCurrent(c0));
    OK(f_cuMemAlloc_v2(&a, 2 * MiB));
    CHECK(a >> 40 != d1 >> 40);
    OK(f_cuMemFree_v2(d1)); /* a free needs no particular current device */
    OK(f_cuMemFree_v2(a));
    CHECK(used(1) == 0 && live(1) == 0 && used(0) == 0);
}

static cuuint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr)
{
    cuuint64_t v = 12345;
    OK(f_cuMemPoolGetAttribute(pool, attr, &v));
    return v;
}

void test_pools(void)
{
    CUstream s, bad = (CUstream)(uintptr_t)0x777;
    CUmemoryPool def, cur, mine;
    CUdeviceptr a, b, p = SENTINEL;

    OK(f_cuStreamCreate(&s, 0));
    OK(f_cuDeviceGetDefaultMemPool(&def, 0));
    OK(f_cuDeviceGetMemPool(&cur, 0));
    CHECK(def == cur);
    ERR(f_cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    ERR(f_cuMemAllocAsync(&p, 0, s), CUDA_ERROR_INVALID_VALUE);
    ERR(f_cuMemAllocAsync(&p, 4096, bad), CUDA_ERROR_INVALID_HANDLE);

    /* Growth in 2 MiB steps is what the device is charged. */
    OK(f_cuMemAllocAsync(&a, 1 * MiB, s));
    CHECK(used(0) == 2 * MiB && live(0) == 1);
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 1 * MiB);
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * MiB);
    OK(f_cuMemAllocAsync_ptsz(&b, 1 * MiB + MiB / 2, NULL));
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 2 * MiB + MiB / 2);
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4 * MiB && used(0) == 4 * MiB);

    /* A free keeps the memory reserved; a trim gives it back. */
    OK(f_cuMemFreeAsync(a, s));
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 1 * MiB + MiB / 2);
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4 * MiB && used(0) == 4 * MiB && live(0) == 1);
    OK(f_cuStreamSynchronize(s));
    CHECK(used(0) == 4 * MiB);
    OK(f_cuMemPoolTrimTo(def, 0));
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * MiB && used(0) == 2 * MiB);
    OK(f_cuMemFreeAsync_ptsz(b, NULL));
    ERR(f_cuMemFreeAsync(b, s), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemPoolTrimTo(def, 3 * MiB)); /* keeps at least 3 MiB, in whole steps: nothing to do */
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * MiB);
    OK(f_cuMemPoolTrimTo(def, 0));
    CHECK(used(0) == 0 && live(0) == 0);
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 4 * MiB);
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 2 * MiB + MiB / 2);
    cuuint64_t zero = 0, one = 1;
    ERR(f_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 0);
    OK(f_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &one));
    CHECK(pool_attr(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 1);

    /* Growth that does not fit fails without trimming and without touching the out-parameter. */
    OK(f_cuMemAllocAsync(&a, 1 * MiB, s));
    OK(f_cuMemFreeAsync(a, s)); /* 2 MiB stay reserved, unused */
    OK(f_cuMemAlloc_v2(&b, LIMIT - 2 * MiB - 1 * MiB));
    ERR(f_cuMemAllocAsync(&p, 3 * MiB, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(p == SENTINEL);
    OK(f_cuMemAllocAsync(&a, 2 * MiB, s)); /* fits in what the pool holds */
    OK(f_cuMemFreeAsync(a, s));
    OK(f_cuMemFree_v2(b));
    OK(f_cuMemPoolTrimTo(def, 0));
    CHECK(used(0) == 0);

    /* An explicit pool on device 1, with a maximum size; destroyed while in use. */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 1;
    props.maxSize = 4 * MiB;
    OK(f_cuMemPoolCreate(&mine, &props));
    ERR(f_cuMemAllocFromPoolAsync(&p, 5 * MiB, mine, s), CUDA_ERROR_OUT_OF_MEMORY);
    OK(f_cuMemAllocFromPoolAsync(&a, 3 * MiB, mine, s));
    CHECK(used(1) == 4 * MiB && used(0) == 0 && live(1) == 1);
    ERR(f_cuDeviceSetMemPool(0, mine), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuDeviceSetMemPool(1, mine));
    OK(f_cuDeviceGetMemPool(&cur, 1));
    CHECK(cur == mine);
    OK(f_cuMemPoolDestroy(mine));
    OK(f_cuDeviceGetMemPool(&cur, 1));
    CHECK(cur != mine);
    ERR(f_cuMemAllocFromPoolAsync(&p, 1024, mine, s), CUDA_ERROR_INVALID_VALUE);
    CHECK(used(1) == 4 * MiB); /* held until the last allocation goes */
    OK(f_cuMemFreeAsync(a, s));
    CHECK(used(1) == 0 && live(1) == 0);
    OK(f_cuDeviceGraphMemTrim(0));
    OK(f_cuStreamDestroy_v2(s));
    ERR(f_cuStreamDestroy_v2(bad), CUDA_ERROR_INVALID_HANDLE);
}


void test_arrays(void)
{
    CUarray a, b;
    CUmipmappedArray m;
    CUDA_ARRAY_DESCRIPTOR d2 = {100, 50, CU_AD_FORMAT_FLOAT, 4};
    CUDA_ARRAY3D_DESCRIPTOR d3 = {10, 20, 30, CU_AD_FORMAT_HALF, 2, 0};
    CUDA_ARRAY3D_DESCRIPTOR dm = {64, 64, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};

    OK(f_cuArrayCreate_v2(&a, &d2));
    CHECK(used(0) == 100 * 50 * 4 * 4 && live(0) == 1);
    OK(f_cuArray3DCreate_v2(&b, &d3));
    CHECK(used(0) == 80000 + 10 * 20 * 30 * 2 * 2);
    OK(f_cuMipmappedArrayCreate(&m, &dm, 3));
    CHECK(used(0) == 80000 + 24000 + 4096 + 1024 + 256 && live(0) == 3);
    ERR(f_cuArrayDestroy((CUarray)m), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuArrayDestroy(a));
    ERR(f_cuArrayDestroy(a), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuArrayDestroy(b));
    OK(f_cuMipmappedArrayDestroy(m));
    CHECK(used(0) == 0 && live(0) == 0);
    d2.NumChannels = 3;
    ERR(f_cuArrayCreate_v2(&a, &d2), CUDA_ERROR_INVALID_VALUE);
}

void test_host(void)
{
    void *p, *q;
    CUdeviceptr dp;
    size_t h0 = host_used();

    ERR(f_cuMemAllocHost_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemAllocHost_v2(&p, 10000));
    memset(p, 0xab, 10000); /* real memory */
    OK(f_cuMemHostAlloc(&q, 5000, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CHECK(host_used() == h0 + 15000 && used(0) == 0);
    OK(f_cuMemHostGetDevicePointer_v2(&dp, (char *)q + 10, 0));
    CHECK(dp == (CUdeviceptr)(uintptr_t)q + 10);
    OK(f_cuMemFreeHost(p));
    OK(f_cuMemFreeHost(q));
    ERR(f_cuMemFreeHost(q), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemFreeHost(NULL));
    CHECK(host_used() == h0);

    char *buf = malloc(1 << 16);
    OK(f_cuMemHostRegister_v2(buf, 1 << 16, 0));
    ERR(f_cuMemHostRegister_v2(buf + 4096, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(f_cuMemHostGetDevicePointer_v2(&dp, buf, 0));
    CHECK(dp == (CUdeviceptr)(uintptr_t)buf && host_used() == h0);
    OK(f_cuMemHostUnregister(buf));
    ERR(f_cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    ERR(f_cuMemHostUnregister(NULL), CUDA_ERROR_INVALID_VALUE);
    free(buf);
}

void test_ipc(void)
{
    CUdeviceptr a, o1, o2, p = SENTINEL;
    CUipcMemHandle h, junk;

    OK(f_cuMemAlloc_v2(&a, 3 * MiB));
    OK(f_cuIpcGetMemHandle(&h, a));
    ERR(f_cuIpcGetMemHandle(&h, a + 512), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuIpcOpenMemHandle_v2(&o1, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    OK(f_cuIpcOpenMemHandle_v2(&o2, h, 0));
    CHECK(o1 == o2 && o1 != a && used(0) == 3 * MiB && live(0) == 1);
    /* The opened mapping's range is the exporter's allocation's, as the allocation's own is. */
    CUdeviceptr base = 0;
    size_t size = 0;
    OK(f_cuMemGetAddressRange_v2(&base, &size, a + 512));
    CHECK(base == a && size == 3 * MiB);
    OK(f_cuMemGetAddressRange_v2(&base, &size, o1 + 1));
    CHECK(base == o1 && size == 3 * MiB);
    ERR(f_cuMemGetAddressRange_v2(&base, &size, o1 + 3 * MiB), CUDA_ERROR_NOT_FOUND);
    memset(&junk, 0, sizeof junk);
    ERR(f_cuIpcOpenMemHandle_v2(&p, junk, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK(p == SENTINEL);
    OK(f_cuIpcCloseMemHandle(o1));
    OK(f_cuIpcCloseMemHandle(o1));
    ERR(f_cuIpcCloseMemHandle(o1), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemFree_v2(a));
    CHECK(used(0) == 0);
}
