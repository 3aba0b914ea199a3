/* fakecuda: pinned host memory (cuMemAllocHost, cuMemHostAlloc, cuMemHostRegister). */
#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* Pinned host memory                                                                               */

struct range {
    uint64_t base;
    size_t size;
};

static int host_overlaps(const struct rec *r, const void *arg)
{
    const struct range *q = arg;
    return q->base < r->key + r->size && r->key < q->base + q->size;
}

static int host_contains(const struct rec *r, const void *arg)
{
    uint64_t p = *(const uint64_t *)arg;
    return p >= r->key && p - r->key < r->size;
}

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
    void *p;
    if (!pp || !size || (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    if (posix_memalign(&p, HOST_ALIGN, size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct rec *r = rec_new(R_HOST, (uint64_t)(uintptr_t)p, -1, size);
    lock();
    int bad = !r || map_put(&host_map, r);
    if (!bad)
        host_bytes += size;
    unlock();
    if (bad) {
        free(r);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

static CUresult host_free(void *p)
{
    if (!p)
        return CUDA_SUCCESS; /* free(NULL) semantics, as the real driver */
    lock();
    struct rec *r = map_get(&host_map, (uint64_t)(uintptr_t)p);
    if (!r || r->kind != R_HOST) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    map_del(&host_map, r);
    host_bytes -= r->size;
    unlock();
    free(r);
    free(p);
    return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t size, unsigned flags)
{
    if (!p || !size || (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    struct range q = {(uint64_t)(uintptr_t)p, size};
    if (q.base + size < q.base)
        return CUDA_ERROR_INVALID_VALUE;
    struct rec *r = rec_new(R_HOSTREG, q.base, -1, size);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_SUCCESS;
    lock();
    if (map_find(&host_map, host_overlaps, &q))
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (map_put(&host_map, r))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    unlock();
    if (rc)
        free(r);
    return rc;
}

static CUresult host_unregister(void *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct rec *r = map_get(&host_map, (uint64_t)(uintptr_t)p);
    if (!r || r->kind != R_HOSTREG) {
        unlock();
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    map_del(&host_map, r);
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

static CUresult host_get_device_pointer(CUdeviceptr *pdptr, void *p, unsigned flags)
{
    if (!pdptr || !p || flags)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uint64_t)(uintptr_t)p;
    lock();
    struct rec *r = map_get(&host_map, a);
    if (!r)
        r = map_find(&host_map, host_contains, &a);
    unlock();
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = a; /* unified addressing: the device sees pinned memory at its host address */
    return CUDA_SUCCESS;
}

API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    enter();
    return host_alloc(pp, bytesize, 0);
}

API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    enter();
    return host_alloc(pp, bytesize, Flags);
}

API CUresult cuMemFreeHost(void *p)
{
    enter();
    return host_free(p);
}

API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    enter();
    return host_register(p, bytesize, Flags);
}

API CUresult cuMemHostUnregister(void *p)
{
    enter();
    return host_unregister(p);
}

API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    enter();
    return host_get_device_pointer(pdptr, p, Flags);
}

