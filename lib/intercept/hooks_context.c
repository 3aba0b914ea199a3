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

/* Each end has two ABIs (the pre-11.0 one without _v2, which static cudart still asks for): one body each,
 * the real function passed in, the event the same (the report speaks of the door, not its ABI). */
typedef CUresult (*ctx_fn)(CUcontext);
typedef CUresult (*dev_fn)(CUdevice);

static CUresult destroy(ctx_fn realp, CUcontext ctx)
{
    OT_HOOK_START(ctx_fn, realp, (ctx));
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

static CUresult reset(dev_fn realp, CUdevice dev)
{
    OT_HOOK_START(dev_fn, realp, (dev));
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
static CUresult release(dev_fn realp, CUdevice dev)
{
    OT_HOOK_START(dev_fn, realp, (dev));
    uint64_t c = ot_drv_primary_ctx(dev);
    CUresult r = real(dev);
    if (r == CUDA_SUCCESS && c && !ot_drv_primary_active(dev)) {
        ot_drv_ctx_gen_next();
        ot_record_ctx_end(c, dev, OT_API_cuDevicePrimaryCtxRelease_v2);
    }
    ot_leave(err);
    return r;
}

#define OT_CTX_END(name, type, arg, body)                                                              \
    OT_EXPORT CUresult name(type arg)                                                                  \
    {                                                                                                  \
        return body(OT_REAL(name, __typeof__(&name)), arg);                                            \
    }
OT_CTX_END(cuCtxDestroy_v2, CUcontext, ctx, destroy)
OT_CTX_END(cuCtxDestroy, CUcontext, ctx, destroy)
OT_CTX_END(cuDevicePrimaryCtxReset_v2, CUdevice, dev, reset)
OT_CTX_END(cuDevicePrimaryCtxReset, CUdevice, dev, reset)
OT_CTX_END(cuDevicePrimaryCtxRelease_v2, CUdevice, dev, release)
OT_CTX_END(cuDevicePrimaryCtxRelease, CUdevice, dev, release)
