/* A context's end: cuCtxDestroy, cuDevicePrimaryCtxReset (what cudaDeviceReset does) and the last
 * cuDevicePrimaryCtxRelease free every allocation made in the context (cuMemAlloc, cuMemAllocPitch,
 * cuMemAllocManaged, pinned host memory, arrays, opened IPC handles). Stream-ordered pool memory and
 * cuMemCreate's belong to no context and stay (the driver's cuCtxDestroy documentation says so). The real
 * call comes first and its result is returned untouched; on success the context's allocations leave the
 * live set as one event. */
#include "common/defs.h"
#include "intercept/hook_call.h"
#include "record/record.h"

/* The device of a context that is not current, when this thread last allocated in it; else -1 (the
 * recorder then takes the device of what the context held). */
static int known_device(uint64_t ctx)
{
    return ctx && ctx == ot_self.ctx ? ot_self.ctx_dev : -1;
}

OT_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    OT_HOOK_ENTER(cuCtxDestroy_v2, (ctx));
    uint64_t c = (uint64_t)(uintptr_t)ctx;
    int dev = known_device(c);
    CUresult r = real(ctx);
    if (r == CUDA_SUCCESS) {
        ot_drv_ctx_gen_next(); /* a new context may be given this handle now */
        ot_record_ctx_end(c, dev, OT_API_cuCtxDestroy_v2);
    }
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    OT_HOOK_ENTER(cuDevicePrimaryCtxReset_v2, (dev));
    uint64_t c = ot_drv_primary_ctx(dev); /* 0: not active, nothing can have been made in it */
    CUresult r = real(dev);
    if (r == CUDA_SUCCESS && c) {
        ot_drv_ctx_gen_next();
        ot_record_ctx_end(c, dev, OT_API_cuDevicePrimaryCtxReset_v2);
    }
    ot_leave(err);
    return r;
}

/* Only the last release ends the context: the driver says so by reporting it inactive after the call. */
OT_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    OT_HOOK_ENTER(cuDevicePrimaryCtxRelease_v2, (dev));
    uint64_t c = ot_drv_primary_ctx(dev);
    CUresult r = real(dev);
    if (r == CUDA_SUCCESS && c && !ot_drv_primary_active(dev)) {
        ot_drv_ctx_gen_next();
        ot_record_ctx_end(c, dev, OT_API_cuDevicePrimaryCtxRelease_v2);
    }
    ot_leave(err);
    return r;
}
