/* Page-locked host memory and IPC imports. Pinned memory is host memory: it is recorded on device -1
 * and never enters a device's totals. Memory opened from another process's IPC handle is that process's;
 * it is reported as imported. */
#include "common/defs.h"
#include "intercept/hook_call.h"
#include "record/rec.h"

/* Pinned memory is the current context's: its end unpins (and, for the driver's own, frees) it. */
static uint64_t current_ctx(void)
{
    uint64_t ctx;
    ot_drv_current(&ctx);
    return ctx;
}

static void after_host(CUresult r, uint16_t api, void *p, size_t bytes, uint64_t ctx)
{
    struct ot_alloc_req q = {OT_NS_HOST, OT_CAT_HOST_PINNED, api, 0, -1, (uint64_t)(uintptr_t)p, bytes, ctx};
    ot_after_alloc(r, &q);
}

OT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    OT_HOOK_ENTER(cuMemAllocHost_v2, (pp, bytesize));
    uint64_t ctx = current_ctx();
    CUresult r = real(pp, bytesize);
    after_host(r, OT_API_cuMemAllocHost_v2, r == CUDA_SUCCESS ? *pp : NULL, bytesize, ctx);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    OT_HOOK_ENTER(cuMemHostAlloc, (pp, bytesize, Flags));
    uint64_t ctx = current_ctx();
    CUresult r = real(pp, bytesize, Flags);
    after_host(r, OT_API_cuMemHostAlloc, r == CUDA_SUCCESS ? *pp : NULL, bytesize, ctx);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    OT_HOOK_ENTER(cuMemHostRegister_v2, (p, bytesize, Flags));
    uint64_t ctx = current_ctx();
    CUresult r = real(p, bytesize, Flags);
    after_host(r, OT_API_cuMemHostRegister_v2, p, bytesize, ctx);
    ot_leave(err);
    return r;
}

/* A refused release (cuMemFreeHost of registered memory, say) is undone. */
static CUresult host_release(void *realp, uint16_t api, void *p)
{
    OT_HOOK_START(__typeof__(&cuMemFreeHost), realp, (p));
    OT_FREE_CALL(if (p) ot_record_free(OT_NS_HOST, (uint64_t)(uintptr_t)p, api, &undo), real(p));
}

OT_EXPORT CUresult cuMemFreeHost(void *p)
{
    return host_release(OT_REAL(cuMemFreeHost, void *), OT_API_cuMemFreeHost, p);
}

OT_EXPORT CUresult cuMemHostUnregister(void *p)
{
    return host_release(OT_REAL(cuMemHostUnregister, void *), OT_API_cuMemHostUnregister, p);
}

/* Both ABIs (the pre-11.0 one without _v2 has its own address); recorded alike. */
typedef CUresult (*ipc_open_fn)(CUdeviceptr *, CUipcMemHandle, unsigned int);
static CUresult ipc_open(ipc_open_fn realp, CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    OT_HOOK_START(ipc_open_fn, realp, (pdptr, handle, Flags));
    uint64_t ctx;
    int dev = ot_drv_current(&ctx);
    CUresult r = real(pdptr, handle, Flags);
    if (r == CUDA_SUCCESS) {
        /* The exporter's size is not in the handle, but the driver knows the mapping's range. Where it
         * cannot say, one byte flagged as estimated stands for it (the reader says "size not known"). The
         * mapping is the current context's: its end closes it. */
        uint64_t bytes = 0;
        int known = ot_drv_range_from(*pdptr, &bytes) == 0 && bytes;
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_IMPORTED, OT_API_cuIpcOpenMemHandle_v2,
                                 known ? 0 : OT_REC_SIZE_ESTIMATED, dev, *pdptr, known ? bytes : 1, ctx};
        ot_record_alloc(&q);
    }
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return ipc_open(OT_REAL(cuIpcOpenMemHandle_v2, ipc_open_fn), pdptr, handle, Flags);
}

OT_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    return ipc_open(OT_REAL(cuIpcOpenMemHandle, ipc_open_fn), pdptr, handle, Flags);
}

OT_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    OT_HOOK_ENTER(cuIpcCloseMemHandle, (dptr));
    OT_FREE_CALL(ot_record_free(OT_NS_DEVPTR, dptr, OT_API_cuIpcCloseMemHandle, &undo), real(dptr));
}
