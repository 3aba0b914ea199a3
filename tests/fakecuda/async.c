/* fakecuda: stream-ordered allocation (cuMemAllocAsync, cuMemFreeAsync) and its memory pools. */
#include <time.h>

#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* Stream-ordered allocation                                                                        */

static struct pool *pool_get_locked(CUmemoryPool h)
{
    uint64_t v = (uint64_t)(uintptr_t)h;
    if (!handle_is(v, TAG_POOL) || handle_serial(v) >= npools)
        return NULL;
    struct pool *p = pools[handle_serial(v)];
    return p && !p->destroyed ? p : NULL;
}

static CUmemoryPool pool_handle(const struct pool *p)
{
    return (CUmemoryPool)(uintptr_t)mk_handle(TAG_POOL, p->id, p->dev);
}

static CUresult pool_alloc_locked(struct pool *p, size_t size, CUdeviceptr *out)
{
    size_t want = p->used + size, res = p->reserved, grow = 0;
    CUresult rc;
    if (want < p->used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (want > p->reserved) {
        if (round_up(want, POOL_CHUNK, &res) || (p->max_size && res > p->max_size))
            return CUDA_ERROR_OUT_OF_MEMORY;
        grow = res - p->reserved;
        if ((rc = charge(p->dev, grow)))
            return rc;
    }
    if ((rc = mem_new_locked(p->dev, size, R_POOLMEM, p, out))) {
        uncharge(p->dev, grow);
        return rc;
    }
    p->reserved = res;
    p->used = want;
    if (res > p->reserved_high)
        p->reserved_high = res;
    if (want > p->used_high)
        p->used_high = want;
    return CUDA_SUCCESS;
}

/* FAKECUDA_ASYNC_NS: the time a real driver's stream-ordered allocation takes (~1 us on the H200 inside
 * PyTorch), spent on the fake's own lines (4 KB), so that a bench sees what a tracer can overlap with it. */
static void async_delay(void)
{
    static char scratch[4096]; /* (not thread-local: a thread's static TLS comes out of its stack) */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 0;; i = (i + 64) & 4095) {
        __atomic_store_n(&scratch[i], (char)i, __ATOMIC_RELAXED);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec >= cfg.async_ns)
            return;
    }
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream s)
{
    int dev;
    CUresult rc;
    if (cfg.async_ns)
        async_delay();
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = stream_dev(s, &dev)))
        return rc;
    lock();
    rc = pool_alloc_locked(devs[dev].cur_pool, size, dptr);
    unlock();
    return rc;
}

static CUresult alloc_from_pool_async(CUdeviceptr *dptr, size_t size, CUmemoryPool h, CUstream s)
{
    int dev;
    CUresult rc;
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = stream_dev(s, &dev)))
        return rc;
    lock();
    struct pool *p = pool_get_locked(h);
    rc = p ? pool_alloc_locked(p, size, dptr) : CUDA_ERROR_INVALID_VALUE;
    unlock();
    return rc;
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
    int dev;
    CUresult rc;
    if ((rc = stream_dev(s, &dev)))
        return rc;
    return mem_free(dptr);
}

static CUresult pool_create(CUmemoryPool *out, const CUmemPoolProps *props)
{
    if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_NOT_SUPPORTED; /* host and managed pools are not simulated */
    if (!dev_ok(props->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    struct pool *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = props->location.id;
    p->props = *props;
    p->max_size = props->maxSize;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    lock();
    int bad = add_pool_locked(p);
    unlock();
    if (bad) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = pool_handle(p);
    return CUDA_SUCCESS;
}

static CUresult pool_destroy(CUmemoryPool h)
{
    lock();
    struct pool *p = pool_get_locked(h);
    if (!p || p->is_default) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* As in the real driver, a pool with live allocations goes away when the last one is freed. */
    p->destroyed = 1;
    if (devs[p->dev].cur_pool == p)
        devs[p->dev].cur_pool = &default_pools[p->dev];
    if (p->used == 0)
        pool_delete_locked(p);
    unlock();
    return CUDA_SUCCESS;
}

static CUresult pool_trim(CUmemoryPool h, size_t keep)
{
    lock();
    struct pool *p = pool_get_locked(h);
    if (!p) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t keep_min = p->used > keep ? p->used : keep, target;
    if (round_up(keep_min, POOL_CHUNK, &target) == 0 && target < p->reserved) {
        uncharge(p->dev, p->reserved - target);
        p->reserved = target;
    }
    unlock();
    return CUDA_SUCCESS;
}

static CUresult pool_get_attr(CUmemoryPool h, CUmemPool_attribute attr, void *value)
{
    CUresult rc = CUDA_SUCCESS;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct pool *p = pool_get_locked(h);
    if (!p) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->release_threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE; break;
    }
    unlock();
    return rc;
}

static CUresult pool_set_attr(CUmemoryPool h, CUmemPool_attribute attr, const void *value)
{
    CUresult rc = CUDA_SUCCESS;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct pool *p = pool_get_locked(h);
    if (!p) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(const int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        /* Stored and reported only: the fake never releases pool memory on synchronisation. */
        p->release_threshold = *(const cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        /* The driver only accepts 0, which resets the watermark to the current value. */
        if (*(const cuuint64_t *)value != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            p->reserved_high = p->reserved;
        else
            p->used_high = p->used;
        break;
    default: rc = CUDA_ERROR_INVALID_VALUE; break;
    }
    unlock();
    return rc;
}

API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    enter();
    return alloc_async(dptr, bytesize, hStream);
}

API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    enter();
    return alloc_async(dptr, bytesize, hStream);
}

API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    enter();
    return free_async(dptr, hStream);
}

API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    enter();
    return free_async(dptr, hStream);
}

API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    enter();
    return alloc_from_pool_async(dptr, bytesize, pool, hStream);
}

API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    enter();
    return alloc_from_pool_async(dptr, bytesize, pool, hStream);
}

API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    enter();
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = pool_handle(&default_pools[dev]);
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    enter();
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    CUmemoryPool h = pool_handle(devs[dev].cur_pool);
    unlock();
    *pool = h;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    enter();
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    struct pool *p = pool_get_locked(pool);
    int ok = p && p->dev == dev;
    if (ok)
        devs[dev].cur_pool = p;
    unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    enter();
    return pool_create(pool, poolProps);
}

API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    enter();
    return pool_destroy(pool);
}

API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    enter();
    return pool_trim(pool, minBytesToKeep);
}

API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    enter();
    return pool_get_attr(pool, attr, value);
}

API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    enter();
    return pool_set_attr(pool, attr, value);
}

API CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    enter();
    return dev_ok(device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

