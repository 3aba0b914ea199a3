/* Smoke test of the stand-in driver (tests/fakecuda). It dlopens libcuda.so.1 (or argv[1]) the way a
 * CUDA runtime would and checks every family the fake simulates, plus the cuGetProcAddress rules.
 *
 *   gcc -Iinclude -I/usr/local/cuda/include tests/fakecuda_smoke.c -ldl -lpthread -o /tmp/smoke
 *   LD_LIBRARY_PATH=build/fake /tmp/smoke
 *
 * It sets the FAKECUDA_* variables itself, before the library's first call reads them. */
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#undef cuGetProcAddress

#define CHECK(c)                                                                                     \
    do {                                                                                             \
        if (!(c)) {                                                                                  \
            fprintf(stderr, "fakecuda_smoke.c:%d: check failed: %s\n", __LINE__, #c);                \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)
#define OK(call) CHECK((call) == CUDA_SUCCESS)
#define ERR(call, e) CHECK((call) == (e))

#define MiB (1ull << 20)
#define SENTINEL ((CUdeviceptr)0xdeadbeefull)

static void *lib;

static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "fakecuda_smoke: missing symbol %s\n", name);
        exit(1);
    }
    return p;
}

/* f_X is the library's X, typed after cuda.h's declaration of X. */
#define DECL(n) static __typeof__(&n) f_##n
#define LOAD(n) f_##n = (__typeof__(&n))sym(#n)

DECL(cuInit); DECL(cuDriverGetVersion); DECL(cuDeviceGetCount); DECL(cuDeviceGet); DECL(cuDeviceGetName);
DECL(cuDeviceGetUuid_v2); DECL(cuDeviceTotalMem_v2); DECL(cuDevicePrimaryCtxRetain);
DECL(cuDevicePrimaryCtxRelease_v2); DECL(cuCtxCreate_v4); DECL(cuCtxSetCurrent); DECL(cuCtxGetCurrent);
DECL(cuCtxGetDevice); DECL(cuCtxSynchronize); DECL(cuCtxDestroy_v2); DECL(cuStreamCreate);
DECL(cuStreamDestroy_v2); DECL(cuStreamSynchronize); DECL(cuGetErrorName); DECL(cuGetErrorString);
DECL(cuGetExportTable); DECL(cuMemGetInfo_v2); DECL(cuMemAlloc_v2); DECL(cuMemFree_v2); DECL(cuMemAllocPitch_v2);
DECL(cuMemAllocManaged); DECL(cuMemAllocAsync); DECL(cuMemFreeAsync); DECL(cuMemAllocFromPoolAsync);
DECL(cuDeviceGetDefaultMemPool); DECL(cuDeviceGetMemPool); DECL(cuDeviceSetMemPool); DECL(cuMemPoolCreate);
DECL(cuMemPoolDestroy); DECL(cuMemPoolTrimTo); DECL(cuMemPoolGetAttribute); DECL(cuMemPoolSetAttribute);
DECL(cuMemGetAllocationGranularity); DECL(cuMemCreate); DECL(cuMemRelease); DECL(cuMemRetainAllocationHandle);
DECL(cuMemAddressReserve); DECL(cuMemAddressFree); DECL(cuMemMap); DECL(cuMemUnmap); DECL(cuMemSetAccess);
DECL(cuMemExportToShareableHandle); DECL(cuMemImportFromShareableHandle);
DECL(cuMemGetAllocationPropertiesFromHandle); DECL(cuArrayCreate_v2); DECL(cuArray3DCreate_v2);
DECL(cuMipmappedArrayCreate); DECL(cuArrayDestroy); DECL(cuMipmappedArrayDestroy); DECL(cuMemAllocHost_v2);
DECL(cuMemHostAlloc); DECL(cuMemFreeHost); DECL(cuMemHostRegister_v2); DECL(cuMemHostUnregister);
DECL(cuMemHostGetDevicePointer_v2); DECL(cuIpcGetMemHandle); DECL(cuIpcOpenMemHandle_v2);
DECL(cuIpcCloseMemHandle); DECL(cuDeviceGraphMemTrim); DECL(cuGetProcAddress_v2);

static CUresult (*f_cuGetProcAddress)(const char *, void **, int, cuuint64_t);
static CUresult (*f_cuMemAllocAsync_ptsz)(CUdeviceptr *, size_t, CUstream);
static CUresult (*f_cuMemFreeAsync_ptsz)(CUdeviceptr, CUstream);
static size_t (*used)(int);
static size_t (*host_used)(void);
static int (*live)(int);

static void load_all(void)
{
    LOAD(cuInit); LOAD(cuDriverGetVersion); LOAD(cuDeviceGetCount); LOAD(cuDeviceGet); LOAD(cuDeviceGetName);
    LOAD(cuDeviceGetUuid_v2); LOAD(cuDeviceTotalMem_v2); LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuDevicePrimaryCtxRelease_v2); LOAD(cuCtxCreate_v4); LOAD(cuCtxSetCurrent); LOAD(cuCtxGetCurrent);
    LOAD(cuCtxGetDevice); LOAD(cuCtxSynchronize); LOAD(cuCtxDestroy_v2); LOAD(cuStreamCreate);
    LOAD(cuStreamDestroy_v2); LOAD(cuStreamSynchronize); LOAD(cuGetErrorName); LOAD(cuGetErrorString);
    LOAD(cuGetExportTable); LOAD(cuMemGetInfo_v2); LOAD(cuMemAlloc_v2); LOAD(cuMemFree_v2); LOAD(cuMemAllocPitch_v2);
    LOAD(cuMemAllocManaged); LOAD(cuMemAllocAsync); LOAD(cuMemFreeAsync); LOAD(cuMemAllocFromPoolAsync);
    LOAD(cuDeviceGetDefaultMemPool); LOAD(cuDeviceGetMemPool); LOAD(cuDeviceSetMemPool); LOAD(cuMemPoolCreate);
    LOAD(cuMemPoolDestroy); LOAD(cuMemPoolTrimTo); LOAD(cuMemPoolGetAttribute); LOAD(cuMemPoolSetAttribute);
    LOAD(cuMemGetAllocationGranularity); LOAD(cuMemCreate); LOAD(cuMemRelease); LOAD(cuMemRetainAllocationHandle);
    LOAD(cuMemAddressReserve); LOAD(cuMemAddressFree); LOAD(cuMemMap); LOAD(cuMemUnmap); LOAD(cuMemSetAccess);
    LOAD(cuMemExportToShareableHandle); LOAD(cuMemImportFromShareableHandle);
    LOAD(cuMemGetAllocationPropertiesFromHandle); LOAD(cuArrayCreate_v2); LOAD(cuArray3DCreate_v2);
    LOAD(cuMipmappedArrayCreate); LOAD(cuArrayDestroy); LOAD(cuMipmappedArrayDestroy); LOAD(cuMemAllocHost_v2);
    LOAD(cuMemHostAlloc); LOAD(cuMemFreeHost); LOAD(cuMemHostRegister_v2); LOAD(cuMemHostUnregister);
    LOAD(cuMemHostGetDevicePointer_v2); LOAD(cuIpcGetMemHandle); LOAD(cuIpcOpenMemHandle_v2);
    LOAD(cuIpcCloseMemHandle); LOAD(cuDeviceGraphMemTrim); LOAD(cuGetProcAddress_v2);
    f_cuGetProcAddress = (CUresult(*)(const char *, void **, int, cuuint64_t))sym("cuGetProcAddress");
    f_cuMemAllocAsync_ptsz = (CUresult(*)(CUdeviceptr *, size_t, CUstream))sym("cuMemAllocAsync_ptsz");
    f_cuMemFreeAsync_ptsz = (CUresult(*)(CUdeviceptr, CUstream))sym("cuMemFreeAsync_ptsz");
    used = (size_t(*)(int))sym("fakecuda_used_bytes");
    host_used = (size_t(*)(void))sym("fakecuda_host_bytes");
    live = (int (*)(int))sym("fakecuda_live_count");
}

/* Configuration of this run: 2 devices of 64 MiB, 4 MiB baseline, 2 MiB used by "other processes". */
#define CAP (64 * MiB)
#define LIMIT (CAP - 4 * MiB - 2 * MiB)

static size_t free_now(void)
{
    size_t fr = 0, total = 0;
    OK(f_cuMemGetInfo_v2(&fr, &total));
    CHECK(total == CAP);
    return fr;
}

static void test_devices(void)
{
    int v, n;
    CUdevice d;
    char name[64];
    CUuuid u0, u1, u0b;
    size_t total;

    ERR(f_cuInit(1), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuInit(0));
    OK(f_cuDriverGetVersion(&v));
    CHECK(v == 12080);
    OK(f_cuDeviceGetCount(&n));
    CHECK(n == 2);
    OK(f_cuDeviceGet(&d, 1));
    CHECK(d == 1);
    ERR(f_cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    OK(f_cuDeviceGetName(name, sizeof name, 1));
    CHECK(strcmp(name, "Fake CUDA Device 1 (simulated)") == 0);
    OK(f_cuDeviceGetUuid_v2(&u0, 0));
    OK(f_cuDeviceGetUuid_v2(&u1, 1));
    OK(((CUresult(*)(CUuuid *, CUdevice))sym("cuDeviceGetUuid"))(&u0b, 0));
    CHECK(memcmp(&u0, &u0b, sizeof u0) == 0 && memcmp(&u0, &u1, sizeof u0) != 0);
    OK(f_cuDeviceTotalMem_v2(&total, 1));
    CHECK(total == CAP);
}

static void test_contexts(void)
{
    CUcontext c, prim1, made;
    CUdevice d;

    OK(f_cuCtxGetCurrent(&c));
    CHECK(c != NULL); /* device 0's primary context until the thread picks one */
    OK(f_cuCtxGetDevice(&d));
    CHECK(d == 0);
    OK(f_cuDevicePrimaryCtxRetain(&prim1, 1));
    OK(f_cuCtxSetCurrent(prim1));
    OK(f_cuCtxGetDevice(&d));
    CHECK(d == 1);
    OK(f_cuCtxGetCurrent(&c));
    CHECK(c == prim1);
    OK(f_cuCtxSetCurrent(NULL));
    ERR(f_cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    CUdeviceptr p = SENTINEL;
    ERR(f_cuMemAlloc_v2(&p, 4096), CUDA_ERROR_INVALID_CONTEXT);
    CHECK(p == SENTINEL);
    ERR(f_cuCtxSetCurrent((CUcontext)(uintptr_t)0x1234), CUDA_ERROR_INVALID_CONTEXT);
    OK(f_cuCtxCreate_v4(&made, NULL, 0, 0)); /* becomes current */
    OK(f_cuCtxGetDevice(&d));
    CHECK(d == 0);
    OK(f_cuCtxSynchronize());
    OK(f_cuCtxDestroy_v2(made));
    OK(f_cuDevicePrimaryCtxRetain(&c, 0));
    OK(f_cuCtxSetCurrent(c));
    OK(f_cuDevicePrimaryCtxRelease_v2(1));
}

static void test_device_memory(void)
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

static void test_pools(void)
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

static void test_vmm(void)
{
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h, h2, imp, hh;
    CUdeviceptr va, va2;
    size_t gran;

    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    OK(f_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran == 2 * MiB);

    ERR(f_cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    ERR(f_cuMemCreate(&h, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemCreate(&h, 4 * MiB, &prop, 0));
    CHECK(h != 0 && used(0) == 4 * MiB && live(0) == 1);

    /* Reserving address space takes no capacity. */
    OK(f_cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    CHECK(va % gran == 0 && used(0) == 4 * MiB);
    ERR(f_cuMemMap(va + 6 * MiB, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* runs past the range */
    OK(f_cuMemMap(va, 4 * MiB, 0, h, 0));
    ERR(f_cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlaps */
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(f_cuMemSetAccess(va, 4 * MiB, &acc, 1));
    OK(f_cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 100)));
    CHECK(h2 == h);
    CUmemAllocationProp got;
    OK(f_cuMemGetAllocationPropertiesFromHandle(&got, h));
    CHECK(got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == 0);

    /* Released twice (create + retain) but still mapped: the memory stays. */
    OK(f_cuMemRelease(h));
    OK(f_cuMemRelease(h));
    ERR(f_cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CHECK(used(0) == 4 * MiB && live(0) == 1);
    ERR(f_cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    ERR(f_cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);        /* half a mapping */
    OK(f_cuMemUnmap(va, 4 * MiB));
    CHECK(used(0) == 0 && live(0) == 0);
    ERR(f_cuMemUnmap(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE);

    /* Export and import: the import charges nothing, and outlives the exporter's handle. */
    OK(f_cuMemCreate(&h, 2 * MiB, &prop, 0));
    int fd = -1;
    OK(f_cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd >= 0);
    OK(f_cuMemImportFromShareableHandle(&imp, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    CHECK(imp != h && used(0) == 2 * MiB && live(0) == 1);
    OK(f_cuMemGetAllocationPropertiesFromHandle(&got, imp));
    CHECK(got.location.id == 0 && got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    OK(f_cuMemRelease(h));
    CHECK(used(0) == 0 && live(0) == 0);
    OK(f_cuMemMap(va + 2 * MiB, 2 * MiB, 0, imp, 0));
    OK(f_cuMemRelease(imp));
    OK(f_cuMemUnmap(va + 2 * MiB, 2 * MiB));
    CHECK(used(0) == 0);

    /* Export needs the handle type to have been requested. */
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    OK(f_cuMemCreate(&h, 2 * MiB, &prop, 0));
    ERR(f_cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemRelease(h));

    /* Host-located physical memory takes no device capacity. */
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
    size_t host0 = host_used();
    OK(f_cuMemCreate(&hh, 2 * MiB, &prop, 0));
    CHECK(used(0) == 0 && used(1) == 0 && host_used() == host0 + 2 * MiB && live(0) == 0);
    OK(f_cuMemRelease(hh));
    CHECK(host_used() == host0);

    /* Device 1, and OOM. */
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 1;
    hh = 42;
    ERR(f_cuMemCreate(&hh, 64 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(hh == 42);
    OK(f_cuMemCreate(&hh, 2 * MiB, &prop, 0));
    CHECK(used(1) == 2 * MiB && live(1) == 1);
    OK(f_cuMemRelease(hh));
    CHECK(used(1) == 0 && live(1) == 0);
    prop.location.id = 9;
    ERR(f_cuMemCreate(&hh, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);

    OK(f_cuMemAddressFree(va, 8 * MiB));
    ERR(f_cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemAddressReserve(&va2, 2 * MiB, 0, 0, 0));
    CHECK(va2 != va);
    OK(f_cuMemAddressFree(va2, 2 * MiB));
}

static void test_arrays(void)
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

static void test_host(void)
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

static void test_ipc(void)
{
    CUdeviceptr a, o1, o2, p = SENTINEL;
    CUipcMemHandle h, junk;

    OK(f_cuMemAlloc_v2(&a, 3 * MiB));
    OK(f_cuIpcGetMemHandle(&h, a));
    ERR(f_cuIpcGetMemHandle(&h, a + 512), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuIpcOpenMemHandle_v2(&o1, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    OK(f_cuIpcOpenMemHandle_v2(&o2, h, 0));
    CHECK(o1 == o2 && o1 != a && used(0) == 3 * MiB && live(0) == 1);
    memset(&junk, 0, sizeof junk);
    ERR(f_cuIpcOpenMemHandle_v2(&p, junk, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK(p == SENTINEL);
    OK(f_cuIpcCloseMemHandle(o1));
    OK(f_cuIpcCloseMemHandle(o1));
    ERR(f_cuIpcCloseMemHandle(o1), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemFree_v2(a));
    CHECK(used(0) == 0);
}

static void test_misc(void)
{
    const void *t1 = NULL, *t2 = NULL;
    const char *s;
    CUuuid id;

    memset(&id, 7, sizeof id);
    /* Refused, so that the CUDA runtime fails cleanly instead of calling into a table nobody filled. */
    t1 = t2 = &id;
    ERR(f_cuGetExportTable(&t1, &id), CUDA_ERROR_NOT_SUPPORTED);
    CHECK(t1 == NULL);
    ERR(f_cuGetExportTable(&t2, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
    OK(f_cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(strcmp(s, "out of memory") == 0);
    ERR(f_cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    CHECK(s == NULL);
}

static void *proc(const char *name, int ver, cuuint64_t flags, CUresult want_rc,
                  CUdriverProcAddressQueryResult want_status)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
    CUresult rc = f_cuGetProcAddress_v2(name, &fn, ver, flags, &st);
    if (rc != want_rc || st != want_status) {
        fprintf(stderr, "cuGetProcAddress_v2(%s, %d, %llu) = %d status %d\n", name, ver,
                (unsigned long long)flags, rc, st);
        exit(1);
    }
    return fn;
}

static void test_get_proc_address(void)
{
    const cuuint64_t PTDS = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, LEG = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    const CUresult S = CUDA_SUCCESS, NF = CUDA_ERROR_NOT_FOUND;
    const CUdriverProcAddressQueryResult OKS = CU_GET_PROC_ADDRESS_SUCCESS,
                                         NOSYM = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
                                         OLD = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    void *fn;

    CHECK(proc("cuMemAlloc", 3020, 0, S, OKS) == sym("cuMemAlloc_v2"));
    CHECK(proc("cuMemAlloc", 12080, 0, S, OKS) == sym("cuMemAlloc_v2"));
    CHECK(proc("cuMemAllocAsync", 11020, PTDS, S, OKS) == sym("cuMemAllocAsync_ptsz"));
    CHECK(proc("cuMemAllocAsync", 11020, 0, S, OKS) == sym("cuMemAllocAsync"));
    CHECK(proc("cuMemAllocAsync", 11020, LEG, S, OKS) == sym("cuMemAllocAsync"));
    CHECK(proc("cuMemAlloc", 12000, PTDS, S, OKS) == sym("cuMemAlloc_v2")); /* no twin: the default */
    CHECK(proc("cuGetProcAddress", 11030, 0, S, OKS) == sym("cuGetProcAddress"));
    CHECK(proc("cuGetProcAddress", 12000, 0, S, OKS) == sym("cuGetProcAddress_v2"));
    CHECK(proc("cuDeviceGetUuid", 11040, 0, S, OKS) == sym("cuDeviceGetUuid_v2"));
    CHECK(proc("cuDeviceGetUuid", 11000, 0, S, OKS) == sym("cuDeviceGetUuid"));
    CHECK(proc("", 0, 0, NF, NOSYM) == NULL);
    CHECK(proc("cuNoSuchThing", 12000, 0, NF, NOSYM) == NULL);
    CHECK(proc("cuMemAllocAsync", 11000, 0, NF, OLD) == NULL);
    CHECK(proc("cuMemAlloc", 2000, 0, NF, OLD) == NULL); /* the 32-bit v1 ABI is not simulated */
    CHECK(proc("cuMemAlloc", 12090, 0, CUDA_ERROR_INVALID_VALUE, NOSYM) == NULL); /* newer than the driver */
    ERR(f_cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, NULL), CUDA_SUCCESS);
    ERR(f_cuGetProcAddress_v2("cuMemAlloc", NULL, 12000, 0, NULL), CUDA_ERROR_INVALID_VALUE);

    /* The 4-argument entry point follows the same rules. */
    ERR(f_cuGetProcAddress("cuMemFreeAsync", &fn, 11020, PTDS), CUDA_SUCCESS);
    CHECK(fn == sym("cuMemFreeAsync_ptsz"));
    ERR(f_cuGetProcAddress("cuMemAllocAsync", &fn, 11000, 0), CUDA_ERROR_NOT_FOUND);

    /* Every exported entry point is reachable under its documented name. */
    static const struct {
        const char *base, *exported;
        int ver;
    } all[] = {
        {"cuInit", "cuInit", 2000}, {"cuDriverGetVersion", "cuDriverGetVersion", 2020},
        {"cuGetErrorName", "cuGetErrorName", 6000}, {"cuGetErrorString", "cuGetErrorString", 6000},
        {"cuGetExportTable", "cuGetExportTable", 3000}, {"cuDeviceGetCount", "cuDeviceGetCount", 2000},
        {"cuDeviceGet", "cuDeviceGet", 2000}, {"cuDeviceGetName", "cuDeviceGetName", 2000},
        {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020}, {"cuDeviceGetAttribute", "cuDeviceGetAttribute", 2000},
        {"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000},
        {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000},
        {"cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", 11020},
        {"cuDeviceGetMemPool", "cuDeviceGetMemPool", 11020}, {"cuDeviceSetMemPool", "cuDeviceSetMemPool", 11020},
        {"cuDeviceGraphMemTrim", "cuDeviceGraphMemTrim", 11040}, {"cuCtxCreate", "cuCtxCreate_v2", 3020},
        {"cuCtxCreate", "cuCtxCreate_v4", 12050}, {"cuCtxDestroy", "cuCtxDestroy_v2", 4000},
        {"cuCtxSetCurrent", "cuCtxSetCurrent", 4000}, {"cuCtxGetCurrent", "cuCtxGetCurrent", 4000},
        {"cuCtxGetDevice", "cuCtxGetDevice", 2000}, {"cuCtxSynchronize", "cuCtxSynchronize", 2000},
        {"cuStreamCreate", "cuStreamCreate", 2000}, {"cuStreamDestroy", "cuStreamDestroy_v2", 4000},
        {"cuStreamSynchronize", "cuStreamSynchronize", 2000}, {"cuMemGetInfo", "cuMemGetInfo_v2", 3020},
        {"cuMemFree", "cuMemFree_v2", 3020}, {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020},
        {"cuMemAllocManaged", "cuMemAllocManaged", 6000}, {"cuMemAllocHost", "cuMemAllocHost_v2", 3020},
        {"cuMemHostAlloc", "cuMemHostAlloc", 2020}, {"cuMemFreeHost", "cuMemFreeHost", 2000},
        {"cuMemHostRegister", "cuMemHostRegister_v2", 6050}, {"cuMemHostUnregister", "cuMemHostUnregister", 4000},
        {"cuMemHostGetDevicePointer", "cuMemHostGetDevicePointer_v2", 3020},
        {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020},
        {"cuMemPoolCreate", "cuMemPoolCreate", 11020}, {"cuMemPoolDestroy", "cuMemPoolDestroy", 11020},
        {"cuMemPoolTrimTo", "cuMemPoolTrimTo", 11020}, {"cuMemPoolGetAttribute", "cuMemPoolGetAttribute", 11020},
        {"cuMemPoolSetAttribute", "cuMemPoolSetAttribute", 11020},
        {"cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity", 10020},
        {"cuMemCreate", "cuMemCreate", 10020}, {"cuMemRelease", "cuMemRelease", 10020},
        {"cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle", 11000},
        {"cuMemAddressReserve", "cuMemAddressReserve", 10020}, {"cuMemAddressFree", "cuMemAddressFree", 10020},
        {"cuMemMap", "cuMemMap", 10020}, {"cuMemUnmap", "cuMemUnmap", 10020},
        {"cuMemSetAccess", "cuMemSetAccess", 10020},
        {"cuMemExportToShareableHandle", "cuMemExportToShareableHandle", 10020},
        {"cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle", 10020},
        {"cuMemGetAllocationPropertiesFromHandle", "cuMemGetAllocationPropertiesFromHandle", 10020},
        {"cuArrayCreate", "cuArrayCreate_v2", 3020}, {"cuArray3DCreate", "cuArray3DCreate_v2", 3020},
        {"cuArrayDestroy", "cuArrayDestroy", 2000}, {"cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 5000},
        {"cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", 5000},
        {"cuIpcGetMemHandle", "cuIpcGetMemHandle", 4010}, {"cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", 11000},
        {"cuIpcCloseMemHandle", "cuIpcCloseMemHandle", 4010},
        {"cuStreamSynchronize", "cuStreamSynchronize_ptsz", -1}, {"cuMemFreeAsync", "cuMemFreeAsync", 11020},
        {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", -11020},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        int ver = all[i].ver < 0 ? (all[i].ver == -1 ? 12000 : -all[i].ver) : all[i].ver;
        cuuint64_t fl = all[i].ver < 0 ? PTDS : 0;
        if (proc(all[i].base, ver, fl, S, OKS) != sym(all[i].exported)) {
            fprintf(stderr, "%s does not resolve to %s\n", all[i].base, all[i].exported);
            exit(1);
        }
        if (all[i].ver > 2000 && strcmp(all[i].exported, "cuCtxCreate_v4") != 0) /* v4 has v2 below it */
            proc(all[i].base, (all[i].ver == 3020 ? 3010 : all[i].ver - 10), 0, NF, OLD);
    }
}

/* Threads: each starts on device 0, and the books balance under contention. */
static void *worker(void *arg)
{
    CUdevice d;
    CUdeviceptr p[16];
    OK(f_cuCtxGetDevice(&d));
    CHECK(d == 0);
    if (arg) {
        CUcontext c1;
        OK(f_cuDevicePrimaryCtxRetain(&c1, 1));
        OK(f_cuCtxSetCurrent(c1));
    }
    for (int round = 0; round < 2000; round++) {
        for (int i = 0; i < 16; i++)
            OK(f_cuMemAlloc_v2(&p[i], 4096 + (size_t)i));
        for (int i = 0; i < 16; i++)
            OK(f_cuMemFree_v2(p[i]));
        OK(f_cuMemAllocAsync(&p[0], 1000, NULL));
        OK(f_cuMemFreeAsync(p[0], NULL));
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[8];
    CUcontext c1, c0;
    OK(f_cuCtxGetCurrent(&c0));
    OK(f_cuDevicePrimaryCtxRetain(&c1, 1));
    OK(f_cuCtxSetCurrent(c1)); /* does not leak into new threads */
    for (int i = 0; i < 8; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (i & 1) ? (void *)1 : NULL) == 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    OK(f_cuCtxSetCurrent(c0));
    CUmemoryPool p0, p1;
    OK(f_cuDeviceGetMemPool(&p0, 0));
    OK(f_cuDeviceGetMemPool(&p1, 1));
    OK(f_cuMemPoolTrimTo(p0, 0));
    OK(f_cuMemPoolTrimTo(p1, 0));
    CHECK(used(0) == 0 && used(1) == 0 && live(0) == 0 && live(1) == 0);
}

int main(int argc, char **argv)
{
    setenv("FAKECUDA_DEVICES", "2", 1);
    setenv("FAKECUDA_CAPACITY", "64M", 1);
    setenv("FAKECUDA_BASELINE", "4MiB", 1);
    setenv("FAKECUDA_OTHER_USED", "2097152", 1);
    setenv("FAKECUDA_GRANULARITY", "2M", 1);
    setenv("FAKECUDA_DRIVER_VERSION", "12080", 1);
    lib = dlopen(argc > 1 ? argv[1] : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "fakecuda_smoke: %s\n", dlerror());
        return 1;
    }
    load_all();
    test_devices();
    test_contexts();
    test_device_memory();
    test_pools();
    test_vmm();
    test_arrays();
    test_host();
    test_ipc();
    test_misc();
    test_get_proc_address();
    test_threads();
    printf("fakecuda smoke: all checks passed\n");
    return 0;
}
