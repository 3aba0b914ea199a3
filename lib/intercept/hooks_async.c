/* Stream-ordered memory: cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync, each with its
 * per-thread-default-stream (_ptsz) twin, which is a distinct driver function with its own wrapper. A free
 * returns memory to its pool, not to the device; the snapshot measures what the pools still hold. */
#include "common/defs.h"
#include "intercept/hook_call.h"
#include "record/rec.h"

static inline __attribute__((always_inline)) CUresult alloc_async(void *realp, uint16_t api, CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    OT_HOOK_START(__typeof__(&cuMemAllocAsync), realp, (dptr, bytesize, s));
    int dev = ot_pre_alloc();
    CUresult r = OT_STAGE_CALL(OT_ST_DRIVER_ALLOC, real(dptr, bytesize, s));
    struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_ASYNC, api, 0, dev, r == CUDA_SUCCESS ? *dptr : 0, bytesize, 0};
    return ot_alloc_end(r, &q, err);
}

static CUresult alloc_pool(void *realp, uint16_t api, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                           CUstream s)
{
    OT_HOOK_START(__typeof__(&cuMemAllocFromPoolAsync), realp, (dptr, bytesize, pool, s));
    int dev = ot_pre_alloc();
    CUresult r = OT_STAGE_CALL(OT_ST_DRIVER_ALLOC, real(dptr, bytesize, pool, s));
    if (r == CUDA_SUCCESS)
        ot_pool_seen((uint64_t)(uintptr_t)pool, dev);
    struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_ASYNC, api, 0, dev, r == CUDA_SUCCESS ? *dptr : 0, bytesize, 0};
    return ot_alloc_end(r, &q, err);
}

/* A refused free (a bad stream, say) is undone. */
static inline __attribute__((always_inline)) CUresult free_async(void *realp, uint16_t api, CUdeviceptr dptr, CUstream s)
{
    OT_HOOK_START(__typeof__(&cuMemFreeAsync), realp, (dptr, s));
    OT_FREE_CALL(if (dptr) ot_record_free(OT_NS_DEVPTR, dptr, api, &undo), OT_STAGE_CALL(OT_ST_DRIVER_FREE, real(dptr, s)));
}

OT_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(OT_REAL(cuMemAllocAsync, void *), OT_API_cuMemAllocAsync, dptr, bytesize, hStream);
}

OT_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(OT_REAL(cuMemAllocAsync_ptsz, void *), OT_API_cuMemAllocAsync_ptsz, dptr, bytesize,
                       hStream);
}

OT_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream)
{
    return alloc_pool(OT_REAL(cuMemAllocFromPoolAsync, void *), OT_API_cuMemAllocFromPoolAsync, dptr, bytesize,
                      pool, hStream);
}

OT_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream hStream)
{
    return alloc_pool(OT_REAL(cuMemAllocFromPoolAsync_ptsz, void *), OT_API_cuMemAllocFromPoolAsync_ptsz, dptr,
                      bytesize, pool, hStream);
}

OT_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(OT_REAL(cuMemFreeAsync, void *), OT_API_cuMemFreeAsync, dptr, hStream);
}

OT_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(OT_REAL(cuMemFreeAsync_ptsz, void *), OT_API_cuMemFreeAsync_ptsz, dptr, hStream);
}
