/* Device memory: cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemFree. */
#include "common/defs.h"
#include "intercept/hook_call.h"
#include "record/rec.h"
#include "runtime/companion.h"
#include "runtime/init.h"
#include "snapshot/snapshot.h"

void *ot_real_slow(size_t off)
{
    ot_resolve();
    return *(void **)((char *)&ot_real + off);
}

/* The device's used memory before this process's first tracked allocation on it: what the context,
 * modules and other processes already held. Asked once per device, before the real call. */
void ot_first_use(int dev)
{
    if (!ot_record_baseline_claim(dev))
        return;
    size_t free_b = 0, total_b = 0;
    int known = ot_drv_mem_info(&free_b, &total_b) == 0 && total_b >= free_b;
    ot_record_baseline_set(dev, known, total_b - free_b);
}

/* ot_after_alloc's rare half: a refused allocation; out of memory is recorded, with its snapshot. */
void ot_after_alloc_failed(CUresult r, const struct ot_alloc_req *req)
{
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        ot_after_first_alloc(); /* a process whose first allocation fails uses the device too */
        const struct trace_failure mine = ot_record_failure(req, r);
        ot_snapshot_trigger_failure(OT_TRIGGER_OOM, ot_api_name(req->api), &mine);
        ot_companion_poke(OT_POKE_DRIVER_OOM);
    }
}

OT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    OT_HOOK_ENTER(cuMemAlloc_v2, (dptr, bytesize));
    uint64_t ctx;
    int dev = ot_pre_alloc_in(&ctx);
    CUresult r = OT_STAGE_CALL(OT_ST_DRIVER_ALLOC, real(dptr, bytesize));
    struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, dev,
                             r == CUDA_SUCCESS ? *dptr : 0, bytesize, ctx};
    return ot_alloc_end(r, &q, err);
}

OT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes)
{
    OT_HOOK_ENTER(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    uint64_t ctx;
    int dev = ot_pre_alloc_in(&ctx);
    CUresult r = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    /* The pitched size is what the device gave up; a failure asked for at least the unpadded size. */
    size_t bytes = r == CUDA_SUCCESS ? *pPitch * Height : WidthInBytes * Height;
    struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAllocPitch_v2, 0, dev,
                             r == CUDA_SUCCESS ? *dptr : 0, bytes, ctx};
    return ot_alloc_end(r, &q, err);
}

OT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    OT_HOOK_ENTER(cuMemAllocManaged, (dptr, bytesize, flags));
    uint64_t ctx;
    int dev = ot_pre_alloc_in(&ctx);
    CUresult r = real(dptr, bytesize, flags);
    struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_MANAGED, OT_API_cuMemAllocManaged, 0, dev,
                             r == CUDA_SUCCESS ? *dptr : 0, bytesize, ctx};
    return ot_alloc_end(r, &q, err);
}

/* Frees are recorded before the real call: once the driver has the address back, another thread may be
 * handed it, and its allocation must not be mistaken for this one. */
OT_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    OT_HOOK_ENTER(cuMemFree_v2, (dptr));
    OT_FREE_CALL(if (dptr) ot_record_free(OT_NS_DEVPTR, dptr, OT_API_cuMemFree_v2, &undo), OT_STAGE_CALL(OT_ST_DRIVER_FREE, real(dptr)));
}
