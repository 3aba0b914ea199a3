/* Smoke test of the stand-in driver (tests/fakecuda). It dlopens libcuda.so.1 (or argv[1]) the way a
 * CUDA runtime would and checks every family the fake simulates, plus the cuGetProcAddress rules.
 *
 *   d=tests/fakecuda_smoke
 *   gcc -Iinclude -I/usr/local/cuda/include $d/main.c $d/memory.c $d/vmm.c -ldl -lpthread -o /tmp/smoke
 *   LD_LIBRARY_PATH=build/fake /tmp/smoke
 *
 * It sets the FAKECUDA_* variables itself, before the library's first call reads them. */
#include "smoke.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

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

#define SMOKE_DEF(n) __typeof__(&n) f_##n;
SMOKE_DRIVER_FUNCS(SMOKE_DEF)
#undef SMOKE_DEF
CUresult (*f_cuGetProcAddress)(const char *, void **, int, cuuint64_t);
CUresult (*f_cuMemAllocAsync_ptsz)(CUdeviceptr *, size_t, CUstream);
CUresult (*f_cuMemFreeAsync_ptsz)(CUdeviceptr, CUstream);
size_t (*used)(int);
size_t (*host_used)(void);
int (*live)(int);

static void load_all(void)
{
#define SMOKE_LOAD(n) f_##n = (__typeof__(&n))sym(#n);
    SMOKE_DRIVER_FUNCS(SMOKE_LOAD)
#undef SMOKE_LOAD
    f_cuGetProcAddress = (CUresult(*)(const char *, void **, int, cuuint64_t))sym("cuGetProcAddress");
    f_cuMemAllocAsync_ptsz = (CUresult(*)(CUdeviceptr *, size_t, CUstream))sym("cuMemAllocAsync_ptsz");
    f_cuMemFreeAsync_ptsz = (CUresult(*)(CUdeviceptr, CUstream))sym("cuMemFreeAsync_ptsz");
    used = (size_t(*)(int))sym("fakecuda_used_bytes");
    host_used = (size_t(*)(void))sym("fakecuda_host_bytes");
    live = (int (*)(int))sym("fakecuda_live_count");
}

size_t free_now(void)
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
        {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease", 7000},
        {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000},
        {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset", 7000},
        {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 11000},
        {"cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", 11020},
        {"cuDeviceGetMemPool", "cuDeviceGetMemPool", 11020}, {"cuDeviceSetMemPool", "cuDeviceSetMemPool", 11020},
        {"cuDeviceGraphMemTrim", "cuDeviceGraphMemTrim", 11040}, {"cuCtxCreate", "cuCtxCreate_v2", 3020},
        {"cuCtxCreate", "cuCtxCreate_v4", 12050}, {"cuCtxDestroy", "cuCtxDestroy", 2000},
        {"cuCtxDestroy", "cuCtxDestroy_v2", 4000},
        {"cuCtxSetCurrent", "cuCtxSetCurrent", 4000}, {"cuCtxGetCurrent", "cuCtxGetCurrent", 4000},
        {"cuCtxGetDevice", "cuCtxGetDevice", 2000}, {"cuCtxSynchronize", "cuCtxSynchronize", 2000},
        {"cuStreamCreate", "cuStreamCreate", 2000}, {"cuStreamDestroy", "cuStreamDestroy_v2", 4000},
        {"cuStreamSynchronize", "cuStreamSynchronize", 2000}, {"cuMemGetInfo", "cuMemGetInfo_v2", 3020},
        {"cuMemFree", "cuMemFree_v2", 3020}, {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020},
        {"cuMemAllocManaged", "cuMemAllocManaged", 6000}, {"cuMemAllocHost", "cuMemAllocHost_v2", 3020},
        {"cuMemHostAlloc", "cuMemHostAlloc", 2020}, {"cuMemFreeHost", "cuMemFreeHost", 2000},
        {"cuMemHostRegister", "cuMemHostRegister_v2", 6050}, {"cuMemHostUnregister", "cuMemHostUnregister", 4000},
        {"cuMemHostGetDevicePointer", "cuMemHostGetDevicePointer_v2", 3020},
        {"cuMemGetAddressRange", "cuMemGetAddressRange_v2", 3020},
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
        {"cuIpcGetMemHandle", "cuIpcGetMemHandle", 4010}, {"cuIpcOpenMemHandle", "cuIpcOpenMemHandle", 4010},
        {"cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", 11000},
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
        /* Just below its first version a name is not found, unless an older ABI of it answers there. */
        int older = 0;
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            older |= j != i && strcmp(all[j].base, all[i].base) == 0 && all[j].ver > 0 && all[j].ver < all[i].ver;
        if (all[i].ver > 2000 && !older)
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
