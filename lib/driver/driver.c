/* Typed questions to the real driver (driver.h). The casts from ot_real's untyped pointers are written
 * here once, each to the function's type in cuda.h. */
#include "driver/driver.h"

#include <string.h>

#include "driver/cuda_api.h"
#include "driver/real.h"

#define REAL(name) ((__typeof__(&name))ot_real.name)

int ot_drv_devices;

int ot_drv_devices_probe(void)
{
    int n = 0;
    /* Before cuInit the driver says so, and the next query asks again. */
    if (!ot_real.cuDeviceGetCount || REAL(cuDeviceGetCount)(&n) != CUDA_SUCCESS || n < 1)
        return 0;
    __atomic_store_n(&ot_drv_devices, n == 1 ? OT_DEVICES_ONE : OT_DEVICES_SEVERAL, __ATOMIC_RELAXED);
    return n == 1;
}

void ot_drv_forked(void)
{
    __atomic_store_n(&ot_drv_devices, OT_DEVICES_UNKNOWN, __ATOMIC_RELAXED);
}

/* The thread's current context is ctx (the caller asked); its device is asked and kept for next time. */
int ot_drv_ctx_device_slow(uint64_t ctx)
{
    uint64_t gen = __atomic_load_n(&ot_ctx_gen, __ATOMIC_RELAXED);
    int dev = ot_drv_current_device();
    ot_self.ctx = ctx;
    ot_self.ctx_dev = dev;
    ot_self.ctx_gen = gen;
    return dev;
}

int ot_drv_primary_active(int dev)
{
    unsigned flags = 0;
    int active = 0;
    return ot_real.cuDevicePrimaryCtxGetState && REAL(cuDevicePrimaryCtxGetState)(dev, &flags, &active) == CUDA_SUCCESS &&
           active;
}

uint64_t ot_drv_primary_ctx(int dev)
{
    CUcontext c = NULL;
    if (!ot_real.cuDevicePrimaryCtxRetain || !ot_real.cuDevicePrimaryCtxRelease_v2 || !ot_drv_primary_active(dev) ||
        REAL(cuDevicePrimaryCtxRetain)(&c, dev) != CUDA_SUCCESS)
        return 0;
    REAL(cuDevicePrimaryCtxRelease_v2)(dev);
    return (uint64_t)(uintptr_t)c;
}

int ot_drv_has_context_query(void)
{
    return ot_real.cuCtxGetDevice != NULL;
}

int ot_drv_mem_info(size_t *free_bytes, size_t *total)
{
    return ot_real.cuMemGetInfo_v2 && REAL(cuMemGetInfo_v2)(free_bytes, total) == CUDA_SUCCESS ? 0 : -1;
}

static CUdevice device(int ordinal)
{
    CUdevice dev = ordinal;
    if (ot_real.cuDeviceGet)
        REAL(cuDeviceGet)(&dev, ordinal);
    return dev;
}

void ot_drv_device_name(int ordinal, char *name, size_t len)
{
    memset(name, 0, len);
    if (ot_real.cuDeviceGetName && REAL(cuDeviceGetName)(name, (int)len - 1, device(ordinal)) != CUDA_SUCCESS)
        name[0] = 0;
}

int ot_drv_device_uuid(int ordinal, unsigned char uuid[16])
{
    CUuuid u;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (ot_real.cuDeviceGetUuid_v2)
        r = REAL(cuDeviceGetUuid_v2)(&u, device(ordinal));
    else if (ot_real.cuDeviceGetUuid)
        r = ((__typeof__(&cuDeviceGetUuid_v2))ot_real.cuDeviceGetUuid)(&u, device(ordinal)); /* same type */
    if (r != CUDA_SUCCESS)
        return -1;
    memcpy(uuid, u.bytes, 16);
    return 0;
}

int ot_drv_default_pool(int ordinal, uint64_t *pool)
{
    CUmemoryPool p;
    if (!ot_real.cuDeviceGetDefaultMemPool || REAL(cuDeviceGetDefaultMemPool)(&p, (CUdevice)ordinal) != CUDA_SUCCESS)
        return -1;
    *pool = (uint64_t)(uintptr_t)p;
    return 0;
}

int ot_drv_pool_usage(uint64_t pool, uint64_t *reserved, uint64_t *used)
{
    if (!ot_real.cuMemPoolGetAttribute)
        return -1;
    CUmemoryPool p = (CUmemoryPool)(uintptr_t)pool;
    cuuint64_t v;
    int bad = 0;
    if (REAL(cuMemPoolGetAttribute)(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) == CUDA_SUCCESS)
        *reserved = v;
    else
        bad = 1;
    if (REAL(cuMemPoolGetAttribute)(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v) == CUDA_SUCCESS)
        *used = v;
    else
        bad = 1;
    return bad ? -1 : 0;
}

int ot_drv_range_from(uint64_t ptr, uint64_t *bytes)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!ot_real.cuMemGetAddressRange_v2 || REAL(cuMemGetAddressRange_v2)(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS)
        return -1;
    if (ptr < base || ptr - base >= size) /* a driver's answer that does not hold ptr is no answer */
        return -1;
    *bytes = base + size - ptr;
    return 0;
}
