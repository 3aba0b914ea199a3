/* The stand-in driver's smoke test (tests/fakecuda): what its parts share. main.c loads the library and
 * checks devices, contexts, streams, errors, cuGetProcAddress and threads; memory.c device memory, pools,
 * arrays, pinned host memory and IPC; vmm.c virtual memory management. */
#ifndef FAKECUDA_SMOKE_H
#define FAKECUDA_SMOKE_H
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#undef cuGetProcAddress

#define CHECK(c)                                                                                     \
    do {                                                                                             \
        if (!(c)) {                                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                    \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)
#define OK(call) CHECK((call) == CUDA_SUCCESS)
#define ERR(call, e) CHECK((call) == (e))

#define MiB (1ull << 20)
#define SENTINEL ((CUdeviceptr)0xdeadbeefull)

/* Configuration of this run: 2 devices of 64 MiB, 4 MiB baseline, 2 MiB used by "other processes". */
#define CAP (64 * MiB)
#define LIMIT (CAP - 4 * MiB - 2 * MiB)

/* f_X is the library's X, typed after cuda.h's declaration of X (main.c loads them all). */
#define SMOKE_DRIVER_FUNCS(X)                                                                              \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)                  \
    X(cuDeviceGetUuid_v2) X(cuDeviceTotalMem_v2) X(cuDevicePrimaryCtxRetain)                               \
    X(cuDevicePrimaryCtxRelease_v2) X(cuCtxCreate_v4) X(cuCtxSetCurrent) X(cuCtxGetCurrent)                \
    X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuCtxDestroy_v2) X(cuStreamCreate) X(cuStreamDestroy_v2)       \
    X(cuStreamSynchronize) X(cuGetErrorName) X(cuGetErrorString) X(cuGetExportTable) X(cuMemGetInfo_v2)    \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocPitch_v2) X(cuMemAllocManaged) X(cuMemAllocAsync)         \
    X(cuMemFreeAsync) X(cuMemAllocFromPoolAsync) X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool)        \
    X(cuDeviceSetMemPool) X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemPoolTrimTo)                        \
    X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute) X(cuMemGetAllocationGranularity) X(cuMemCreate)      \
    X(cuMemRelease) X(cuMemRetainAllocationHandle) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap)  \
    X(cuMemUnmap) X(cuMemSetAccess) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)      \
    X(cuMemGetAllocationPropertiesFromHandle) X(cuArrayCreate_v2) X(cuArray3DCreate_v2)                    \
    X(cuMipmappedArrayCreate) X(cuArrayDestroy) X(cuMipmappedArrayDestroy) X(cuMemAllocHost_v2)            \
    X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostRegister_v2) X(cuMemHostUnregister)                      \
    X(cuMemHostGetDevicePointer_v2) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle_v2) X(cuIpcCloseMemHandle)   \
    X(cuDeviceGraphMemTrim) X(cuGetProcAddress_v2) X(cuMemGetAddressRange_v2)
#define SMOKE_DECL(n) extern __typeof__(&n) f_##n;
SMOKE_DRIVER_FUNCS(SMOKE_DECL)
#undef SMOKE_DECL
extern CUresult (*f_cuGetProcAddress)(const char *, void **, int, cuuint64_t);
extern CUresult (*f_cuMemAllocAsync_ptsz)(CUdeviceptr *, size_t, CUstream);
extern CUresult (*f_cuMemFreeAsync_ptsz)(CUdeviceptr, CUstream);
/* The stand-in's test hooks: capacity held on a device, pinned host bytes, live allocations. */
extern size_t (*used)(int);
extern size_t (*host_used)(void);
extern int (*live)(int);

size_t free_now(void);

void test_device_memory(void);
void test_pools(void);
void test_arrays(void);
void test_host(void);
void test_ipc(void);
void test_vmm(void);

#endif
