/* Virtual memory management. cuMemCreate takes physical memory (keyed by its handle); mapping takes none.
 * The memory lives while a reference (create, retain) or a mapping remains, which is how NCCL's
 * retain-once, release-twice pattern ends in exactly one free. Address reservations are not memory and
 * are not wrapped at all. */
#include "intercept/hooks.h"

OT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags)
{
    typedef CUresult (*fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    fn real = OT_REAL(cuMemCreate, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(handle, size, prop, flags);
    int err = errno;
    int dev = 0;
    uint16_t rflags = 0;
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        dev = prop->location.id;
        ot_device_first_use(dev);
    } else if (prop) {
        dev = -1; /* host or host NUMA node: host memory, never a device's */
        rflags = OT_REC_HOST_LOCATION;
    }
    CUresult r = real(handle, size, prop, flags);
    struct ot_alloc_req q = {OT_NS_VMM, OT_CAT_VMM, OT_API_cuMemCreate, rflags, dev,
                             r == CUDA_SUCCESS ? (uint64_t)*handle : 0, size};
    ot_after_alloc(r, &q);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    typedef CUresult (*fn)(CUmemGenericAllocationHandle);
    fn real = OT_REAL(cuMemRelease, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(handle);
    int err = errno;
    ot_vmm_release((uint64_t)handle);
    ot_leave(err);
    return real(handle);
}

OT_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    typedef CUresult (*fn)(CUmemGenericAllocationHandle *, void *);
    fn real = OT_REAL(cuMemRetainAllocationHandle, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(handle, addr);
    int err = errno;
    CUresult r = real(handle, addr);
    if (r == CUDA_SUCCESS)
        ot_vmm_retain((uint64_t)*handle);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags)
{
    typedef CUresult (*fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    fn real = OT_REAL(cuMemMap, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(ptr, size, offset, handle, flags);
    int err = errno;
    CUresult r = real(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS)
        ot_vmm_map(ptr, size, offset, (uint64_t)handle);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    typedef CUresult (*fn)(CUdeviceptr, size_t);
    fn real = OT_REAL(cuMemUnmap, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(ptr, size);
    int err = errno;
    ot_vmm_unmap(ptr, size);
    ot_leave(err);
    return real(ptr, size);
}

/* Imported memory belongs to the exporting process: reported, never counted as this process's own. Its
 * size is not known until it is mapped. */
OT_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                  CUmemAllocationHandleType shHandleType)
{
    typedef CUresult (*fn)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    fn real = OT_REAL(cuMemImportFromShareableHandle, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ot_enter())
        return real(handle, osHandle, shHandleType);
    int err = errno;
    int dev = ot_current_device();
    CUresult r = real(handle, osHandle, shHandleType);
    if (r == CUDA_SUCCESS) {
        struct ot_alloc_req q = {OT_NS_VMM, OT_CAT_IMPORTED, OT_API_cuMemImportFromShareableHandle,
                                 OT_REC_SIZE_ESTIMATED, dev, (uint64_t)*handle, 1};
        ot_record_alloc(&q);
    }
    ot_leave(err);
    return r;
}
