/* Page-locked host memory and IPC imports. Pinned memory is host memory: it is recorded on device -1
 * and never enters a device's totals. Memory opened from another process's IPC handle is that process's;
 * it is reported as imported. */
#include "intercept/hooks.h"

static void after_host(CUresult r, uint16_t api, void *p, size_t bytes)
{
    struct ot_alloc_req q = {OT_NS_HOST, OT_CAT_HOST_PINNED, api, 0, -1, (uint64_t)(uintptr_t)p, bytes};
    ot_after_alloc(r, &q);
}

OT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    typedef CUresult (*fn)(void **, size_t);
    fn real = OT_REAL(cuMemAllocHost_v2, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(pp, bytesize);
    int err = errno;
    CUresult r = real(pp, bytesize);
    after_host(r, OT_API_cuMemAllocHost_v2, r == CUDA_SUCCESS ? *pp : NULL, bytesize);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    typedef CUresult (*fn)(void **, size_t, unsigned int);
    fn real = OT_REAL(cuMemHostAlloc, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(pp, bytesize, Flags);
    int err = errno;
    CUresult r = real(pp, bytesize, Flags);
    after_host(r, OT_API_cuMemHostAlloc, r == CUDA_SUCCESS ? *pp : NULL, bytesize);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    typedef CUresult (*fn)(void *, size_t, unsigned int);
    fn real = OT_REAL(cuMemHostRegister_v2, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(p, bytesize, Flags);
    int err = errno;
    CUresult r = real(p, bytesize, Flags);
    after_host(r, OT_API_cuMemHostRegister_v2, p, bytesize);
    ot_leave(err);
    return r;
}

static CUresult host_release(void *realp, uint16_t api, void *p)
{
    CUresult (*real)(void *) = (CUresult(*)(void *))realp;
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(p);
    int err = errno;
    struct ot_rec undo;
    int closed = p && ot_record_free_undoable(OT_NS_HOST, (uint64_t)(uintptr_t)p, api, &undo);
    ot_leave(err);
    CUresult r = real(p);
    if (OT_UNLIKELY(r != CUDA_SUCCESS) && closed)
        ot_record_unfree(&undo); /* refused: e.g. cuMemFreeHost of registered memory */
    return r;
}

OT_EXPORT CUresult cuMemFreeHost(void *p)
{
    return host_release(OT_REAL(cuMemFreeHost, void *), OT_API_cuMemFreeHost, p);
}

OT_EXPORT CUresult cuMemHostUnregister(void *p)
{
    return host_release(OT_REAL(cuMemHostUnregister, void *), OT_API_cuMemHostUnregister, p);
}

OT_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    typedef CUresult (*fn)(CUdeviceptr *, CUipcMemHandle, unsigned int);
    fn real = OT_REAL(cuIpcOpenMemHandle_v2, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(pdptr, handle, Flags);
    int err = errno;
    int dev = ot_current_device();
    CUresult r = real(pdptr, handle, Flags);
    if (r == CUDA_SUCCESS) {
        /* The exporter's allocation size is not in the handle; record one byte, flagged as estimated. */
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_IMPORTED, OT_API_cuIpcOpenMemHandle_v2,
                                 OT_REC_SIZE_ESTIMATED, dev, *pdptr, 1};
        ot_record_alloc(&q);
    }
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    typedef CUresult (*fn)(CUdeviceptr);
    fn real = OT_REAL(cuIpcCloseMemHandle, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(dptr);
    int err = errno;
    struct ot_rec undo;
    int closed = ot_record_free_undoable(OT_NS_DEVPTR, dptr, OT_API_cuIpcCloseMemHandle, &undo);
    ot_leave(err);
    CUresult r = real(dptr);
    if (OT_UNLIKELY(r != CUDA_SUCCESS) && closed)
        ot_record_unfree(&undo);
    return r;
}
