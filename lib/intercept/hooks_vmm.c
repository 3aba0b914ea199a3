/* Virtual memory management. cuMemCreate takes physical memory (keyed by its handle); mapping takes none.
 * The memory lives while a reference (create, retain) or a mapping remains, which is how NCCL's
 * retain-once, release-twice pattern ends in exactly one free. Address reservations are not memory and
 * are not wrapped at all. */
#include "common/defs.h"
#include "intercept/hook_call.h"
#include "record/rec.h"

OT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags)
{
    OT_HOOK_ENTER(cuMemCreate, (handle, size, prop, flags));
    int dev = 0;
    uint16_t rflags = 0;
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        dev = prop->location.id;
        ot_first_use(dev);
    } else if (prop) {
        dev = -1; /* host or host NUMA node: host memory, never a device's */
        rflags = OT_REC_HOST_LOCATION;
    }
    CUresult r = real(handle, size, prop, flags);
    struct ot_alloc_req q = {OT_NS_VMM, OT_CAT_VMM, OT_API_cuMemCreate, rflags, dev,
                             r == CUDA_SUCCESS ? (uint64_t)*handle : 0, size, 0};
    return ot_alloc_end(r, &q, err);
}

OT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    OT_HOOK_ENTER(cuMemRelease, (handle));
    OT_FREE_CALL(ot_vmm_release((uint64_t)handle, &undo), real(handle));
}

OT_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    OT_HOOK_ENTER(cuMemRetainAllocationHandle, (handle, addr));
    CUresult r = real(handle, addr);
    if (r == CUDA_SUCCESS)
        ot_vmm_retain((uint64_t)*handle);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags)
{
    OT_HOOK_ENTER(cuMemMap, (ptr, size, offset, handle, flags));
    CUresult r = real(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS)
        ot_vmm_map(ptr, size, offset, (uint64_t)handle);
    ot_leave(err);
    return r;
}

OT_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    OT_HOOK_ENTER(cuMemUnmap, (ptr, size));
    OT_FREE_CALL(ot_vmm_unmap(ptr, size, &undo), real(ptr, size));
}

/* Imported memory belongs to the exporting process: reported, never counted as this process's own. Its
 * size is not known until it is mapped. */
OT_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                  CUmemAllocationHandleType shHandleType)
{
    OT_HOOK_ENTER(cuMemImportFromShareableHandle, (handle, osHandle, shHandleType));
    int dev = ot_drv_current_device();
    CUresult r = real(handle, osHandle, shHandleType);
    if (r == CUDA_SUCCESS) {
        struct ot_alloc_req q = {OT_NS_VMM, OT_CAT_IMPORTED, OT_API_cuMemImportFromShareableHandle,
                                 OT_REC_SIZE_ESTIMATED, dev, (uint64_t)*handle, 1, 0};
        ot_record_alloc(&q);
    }
    ot_leave(err);
    return r;
}
