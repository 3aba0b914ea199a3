/* CUDA arrays. The driver does not say how much an array takes; the size is computed from the descriptor
 * (elements x channels x bytes per channel, every mip level) and marked as estimated. */
#include "common/defs.h"
#include "intercept/hook_call.h"
#include "record/rec.h"

static uint64_t format_bytes(CUarray_format f)
{
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    default:
        return 4;
    }
}

static uint64_t dim(size_t v)
{
    return v ? v : 1;
}

static uint64_t array3d_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    uint64_t total = 0, w = dim(d->Width), h = dim(d->Height), depth = dim(d->Depth);
    int layered = (d->Flags & CUDA_ARRAY3D_LAYERED) != 0;
    for (unsigned l = 0; l < (levels ? levels : 1); l++) {
        total += w * h * depth * d->NumChannels * format_bytes(d->Format);
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : 1;
        if (!layered)
            depth = depth > 1 ? depth / 2 : 1;
    }
    return total ? total : 1;
}

static void after_array(CUresult r, uint16_t api, int dev, uint64_t ctx, uint64_t handle, uint64_t bytes)
{
    struct ot_alloc_req q = {OT_NS_ARRAY, OT_CAT_ARRAY, api, OT_REC_SIZE_ESTIMATED, dev, handle, bytes, ctx};
    ot_after_alloc(r, &q);
}

OT_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    OT_HOOK_ENTER(cuArrayCreate_v2, (pHandle, pAllocateArray));
    uint64_t ctx;
    int dev = ot_pre_alloc_in(&ctx);
    CUresult r = real(pHandle, pAllocateArray);
    uint64_t bytes = 1;
    if (pAllocateArray) {
        const CUDA_ARRAY_DESCRIPTOR *d = pAllocateArray;
        bytes = dim(d->Width) * dim(d->Height) * d->NumChannels * format_bytes(d->Format);
    }
    after_array(r, OT_API_cuArrayCreate_v2, dev, ctx, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0, bytes);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    OT_HOOK_ENTER(cuArray3DCreate_v2, (pHandle, pAllocateArray));
    uint64_t ctx;
    int dev = ot_pre_alloc_in(&ctx);
    CUresult r = real(pHandle, pAllocateArray);
    uint64_t bytes = pAllocateArray ? array3d_bytes(pAllocateArray, 1) : 1;
    after_array(r, OT_API_cuArray3DCreate_v2, dev, ctx, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0, bytes);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pDesc,
                                          unsigned int numMipmapLevels)
{
    OT_HOOK_ENTER(cuMipmappedArrayCreate, (pHandle, pDesc, numMipmapLevels));
    uint64_t ctx;
    int dev = ot_pre_alloc_in(&ctx);
    CUresult r = real(pHandle, pDesc, numMipmapLevels);
    uint64_t bytes = pDesc ? array3d_bytes(pDesc, numMipmapLevels) : 1;
    after_array(r, OT_API_cuMipmappedArrayCreate, dev, ctx, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                bytes);
    ot_leave(err);
    return r;
}

/* A refused destroy (a mipmapped array given to cuArrayDestroy, say) is undone. */
static CUresult destroy(void *realp, uint16_t api, void *h)
{
    OT_HOOK_START(CUresult(*)(void *), realp, (h));
    OT_FREE_CALL(if (h) ot_record_free(OT_NS_ARRAY, (uint64_t)(uintptr_t)h, api, &undo), real(h));
}

OT_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    return destroy(OT_REAL(cuArrayDestroy, void *), OT_API_cuArrayDestroy, hArray);
}

OT_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return destroy(OT_REAL(cuMipmappedArrayDestroy, void *), OT_API_cuMipmappedArrayDestroy, hMipmappedArray);
}
