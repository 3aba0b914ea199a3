/* fakecuda: device memory (cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemFree, cuMemGetInfo). */
#include <sys/time.h>
#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* Device memory                                                                                    */

/* Hands out a fresh address on dev and records it. The caller has charged the capacity already. */
CUresult mem_new_locked(int dev, size_t size, enum rec_kind kind, struct pool *p, CUdeviceptr *out)
{
    uint64_t a = region_take(&devs[dev].va, size, VA_ALIGN);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct rec *r = rec_new(kind, a, dev, size);
    if (!r || map_put(&mem_map, r)) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->pool = p;
    devs[dev].live++;
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult mem_alloc(int dev, size_t charged, size_t size, enum rec_kind kind, CUdeviceptr *out)
{
    lock();
    CUresult rc = charge(dev, charged);
    if (rc == CUDA_SUCCESS && (rc = mem_new_locked(dev, size, kind, NULL, out)) != CUDA_SUCCESS)
        uncharge(dev, charged);
    unlock();
    return rc;
}

static CUresult alloc_plain(CUdeviceptr *dptr, size_t size, enum rec_kind kind)
{
    int dev;
    CUresult rc;
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cur_dev(&dev)))
        return rc;
    return mem_alloc(dev, size, size, kind, dptr);
}

void pool_delete_locked(struct pool *p)
{
    uncharge(p->dev, p->reserved);
    if (devs[p->dev].cur_pool == p)
        devs[p->dev].cur_pool = &default_pools[p->dev];
    pools[p->id] = NULL;
    free(p);
}

static void pool_put_used_locked(struct pool *p, size_t n)
{
    p->used -= n;
    if (p->destroyed && p->used == 0)
        pool_delete_locked(p);
}

CUresult mem_free(CUdeviceptr dptr)
{
    if (!dptr)
        return CUDA_SUCCESS; /* free(NULL) semantics, as the real driver */
    lock();
    struct rec *r = map_get(&mem_map, dptr);
    if (!r) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    map_del(&mem_map, r);
    /* A timer's signal whose handler runs while the driver holds its lock, as it may on the real driver: what a
     * handler that calls exit() then must not wait for (tests/sh/signal_chain.sh). The wait is a plain loop, so
     * the signal interrupts the driver's own code, not a system call. */
    if (cfg.alarm_in_free) {
        struct itimerval once = {{0, 0}, {0, 100}};
        setitimer(ITIMER_REAL, &once, NULL);
        for (volatile unsigned long spin = 0; spin < 20000000ul; spin++)
            ;
    }
    devs[r->dev].live--;
    if (r->kind == R_POOLMEM)
        pool_put_used_locked(r->pool, r->size);
    else
        uncharge(r->dev, r->size);
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

static CUresult mem_alloc_pitch(CUdeviceptr *dptr, size_t *ppitch, size_t width, size_t height, unsigned elem)
{
    int dev;
    size_t pitch, bytes;
    CUresult rc;
    if (!dptr || !ppitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cur_dev(&dev)))
        return rc;
    if (round_up(width, VA_ALIGN, &pitch) || __builtin_mul_overflow(pitch, height, &bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr p;
    if ((rc = mem_alloc(dev, bytes, bytes, R_PITCH, &p)))
        return rc;
    *dptr = p;
    *ppitch = pitch;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------- */
/* Exported API: memory                                                                             */

API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    int dev;
    CUresult rc;
    enter();
    if ((rc = cur_dev(&dev)))
        return rc;
    lock();
    size_t fr = limit_bytes() - devs[dev].used;
    unlock();
    if (free_bytes)
        *free_bytes = fr;
    if (total_bytes)
        *total_bytes = cfg.capacity;
    return CUDA_SUCCESS;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    enter();
    return alloc_plain(dptr, bytesize, R_MEM);
}

API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    enter();
    return mem_free(dptr);
}

API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                unsigned int ElementSizeBytes)
{
    enter();
    return mem_alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    enter();
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_plain(dptr, bytesize, R_MANAGED);
}

