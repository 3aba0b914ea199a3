/* Device memory: cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemFree. */
#include "intercept/hooks.h"

void *ot_real_slow(size_t off)
{
    ot_resolve();
    return *(void **)((char *)&ot_real + off);
}

int ot_pre_alloc(void)
{
    int dev = ot_current_device();
    ot_device_first_use(dev);
    return dev;
}

void ot_after_alloc(CUresult r, const struct ot_alloc_req *req)
{
    if (r == CUDA_SUCCESS) {
        ot_record_alloc(req);
        ot_after_first_alloc();
        ot_companion_poke(OT_POKE_ALLOC);
    } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        ot_after_first_alloc(); /* a process whose first allocation fails uses the device too */
        ot_record_failed(req, r);
        ot_companion_poke(OT_POKE_DRIVER_OOM);
    }
}

OT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    typedef CUresult (*fn)(CUdeviceptr *, size_t);
    fn real = OT_REAL(cuMemAlloc_v2, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(dptr, bytesize);
    int err = errno;
    int dev = ot_pre_alloc();
    CUresult r = real(dptr, bytesize);
    struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, dev,
                             r == CUDA_SUCCESS ? *dptr : 0, bytesize};
    ot_after_alloc(r, &q);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes)
{
    typedef CUresult (*fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    fn real = OT_REAL(cuMemAllocPitch_v2, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    int err = errno;
    int dev = ot_pre_alloc();
    CUresult r = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    /* The pitched size is what the device gave up; a failure asked for at least the unpadded size. */
    size_t bytes = r == CUDA_SUCCESS ? *pPitch * Height : WidthInBytes * Height;
    struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAllocPitch_v2, 0, dev,
                             r == CUDA_SUCCESS ? *dptr : 0, bytes};
    ot_after_alloc(r, &q);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    typedef CUresult (*fn)(CUdeviceptr *, size_t, unsigned int);
    fn real = OT_REAL(cuMemAllocManaged, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(dptr, bytesize, flags);
    int err = errno;
    int dev = ot_pre_alloc();
    CUresult r = real(dptr, bytesize, flags);
    struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_MANAGED, OT_API_cuMemAllocManaged, 0, dev,
                             r == CUDA_SUCCESS ? *dptr : 0, bytesize};
    ot_after_alloc(r, &q);
    ot_leave(err);
    return r;
}

/* Frees are recorded before the real call: once the driver has the address back, another thread may be
 * handed it, and its allocation must not be mistaken for this one. */
OT_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    typedef CUresult (*fn)(CUdeviceptr);
    fn real = OT_REAL(cuMemFree_v2, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(dptr);
    int err = errno;
    struct ot_rec undo;
    int closed = dptr && ot_record_free_undoable(OT_NS_DEVPTR, dptr, OT_API_cuMemFree_v2, &undo);
    ot_leave(err);
    CUresult r = real(dptr);
    if (OT_UNLIKELY(r != CUDA_SUCCESS) && closed)
        ot_record_unfree(&undo); /* refused: the memory is still allocated */
    return r;
}
