/* fakecuda: devices, contexts and streams, and their entry points. */
#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* Contexts and streams                                                                             */

static uint64_t next_serial = 1; /* contexts, streams, arrays, VMM handles */

/* The current context of this thread. Until the thread sets one, it behaves as if device 0's primary
 * context were current, so tests need no setup; after cuCtxSetCurrent(NULL) it has none. */
static __thread int tl_ctx_set;
static __thread uint64_t tl_ctx;

/* The device of the calling thread's current context. Caller holds no lock (only thread-locals). */
CUresult cur_dev(int *dev)
{
    int d = 0;
    if (tl_ctx_set) {
        if (!tl_ctx)
            return CUDA_ERROR_INVALID_CONTEXT;
        d = handle_dev(tl_ctx);
    }
    if (!dev_ok(d))
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = d;
    return CUDA_SUCCESS;
}

/* Primary contexts' references (cuDevicePrimaryCtxRetain minus Release), under lock(). */
static int prim_refs[MAX_DEVICES];
/* Device 0's primary context was used by a thread that never set one: it stays active, as if retained
 * once, until a reset (so that a retain and its release never end it). */
static atomic_int prim_implicit;

/* The context that something made now belongs to, as a handle (0: none). */
uint64_t cur_ctx(void)
{
    if (tl_ctx_set)
        return tl_ctx;
    if (!cfg.ndev)
        return 0;
    atomic_store(&prim_implicit, 1);
    return mk_handle(TAG_CTX, 0, 0);
}

static uint64_t primary_ctx(int dev) { return mk_handle(TAG_CTX, 0, dev); }

static int of_ctx(const struct rec *r, const void *arg) { return r->ctx == *(const uint64_t *)arg; }

/* A context ends (destroyed, or a primary context reset): what was made in it goes back, as the real
 * driver does (cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemAllocHost/cuMemHostAlloc, host
 * registrations, arrays, opened IPC handles). Pool memory and cuMemCreate's belong to no context and
 * stay. Caller holds lock(). */
static void ctx_end_locked(uint64_t ctx)
{
    struct rec *r, *nx;
    for (r = map_take_all(&mem_map, of_ctx, &ctx); r; r = nx) {
        nx = r->next;
        devs[r->dev].live--;
        uncharge(r->dev, r->size);
        free(r);
    }
    for (r = map_take_all(&array_map, of_ctx, &ctx); r; r = nx) {
        nx = r->next;
        devs[r->dev].live--;
        uncharge(r->dev, r->size);
        free(r);
    }
    for (r = map_take_all(&host_map, of_ctx, &ctx); r; r = nx) {
        nx = r->next;
        if (r->kind == R_HOST) {
            host_bytes -= r->size;
            free((void *)(uintptr_t)r->key);
        }
        free(r);
    }
    for (r = map_take_all(&ipc_map, of_ctx, &ctx); r; r = nx) {
        nx = r->next;
        free(r);
    }
}

static int ctx_decode(CUcontext ctx, int *dev)
{
    uint64_t h = (uint64_t)(uintptr_t)ctx;
    if (!handle_is(h, TAG_CTX) || !dev_ok(handle_dev(h)))
        return -1;
    *dev = handle_dev(h);
    return 0;
}

/* The device a stream belongs to; the null and special streams belong to the current context. */
CUresult stream_dev(CUstream s, int *dev)
{
    uint64_t h = (uint64_t)(uintptr_t)s;
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return cur_dev(dev);
    if (!handle_is(h, TAG_STREAM) || !dev_ok(handle_dev(h)))
        return CUDA_ERROR_INVALID_HANDLE;
    *dev = handle_dev(h);
    return CUDA_SUCCESS;
}

uint64_t new_serial_locked(void) { return next_serial++; }

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    uint64_t h = mk_handle(TAG_CTX, new_serial_locked(), dev);
    unlock();
    tl_ctx_set = 1;
    tl_ctx = h;
    *pctx = (CUcontext)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------- */
/* Exported API: devices, contexts, streams                                                         */

API CUresult cuInit(unsigned int flags)
{
    enter();
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    return cfg.ndev ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

API CUresult cuDriverGetVersion(int *driverVersion)
{
    enter();
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = cfg.driver_version;
    return CUDA_SUCCESS;
}

/* How often the device questions were asked, written at exit to FAKECUDA_CALLS (a test of who asks them: an
 * allocation in a one-device process asks neither, tests/sh/device_query.sh). */
static unsigned long n_get_count, n_ctx_get_device;

__attribute__((destructor)) static void calls_report(void)
{
    const char *path = getenv("FAKECUDA_CALLS");
    FILE *f = path && *path ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "cuDeviceGetCount %lu\ncuCtxGetDevice %lu\n", __atomic_load_n(&n_get_count, __ATOMIC_RELAXED),
                __atomic_load_n(&n_ctx_get_device, __ATOMIC_RELAXED));
        fclose(f);
    }
}

API CUresult cuDeviceGetCount(int *count)
{
    enter();
    __atomic_fetch_add(&n_get_count, 1, __ATOMIC_RELAXED);
    if (cfg.count_refused)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = cfg.ndev;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    enter();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    enter();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "Fake CUDA Device %d (simulated)", dev);
    return CUDA_SUCCESS;
}

static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
    enter();
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    static const unsigned char base[16] = {0xfa, 0xce, 0xc0, 0xda, 0x00, 0x00, 0x40, 0x00,
                                           0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    memcpy(uuid->bytes, base, sizeof base);
    uuid->bytes[5] = (char)dev;
    uuid->bytes[15] = (char)(0x5a ^ dev);
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return device_uuid(uuid, dev); }
API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return device_uuid(uuid, dev); }

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    enter();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = cfg.capacity;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    enter();
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    int v = 0; /* unlisted attributes read as 0 */
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = 0x10 + dev; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
    default: break;
    }
    *pi = v;
    return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    enter();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    prim_refs[dev]++;
    unlock();
    *pctx = (CUcontext)(uintptr_t)primary_ctx(dev);
    return CUDA_SUCCESS;
}

/* The last release resets the primary context, as the real driver's does. A release without a retain is
 * accepted and changes nothing (older tests release what they never retained). */
static CUresult prim_release(CUdevice dev)
{
    enter();
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    if (prim_refs[dev] > 0 && --prim_refs[dev] == 0 && !(dev == 0 && atomic_load(&prim_implicit)))
        ctx_end_locked(primary_ctx(dev));
    unlock();
    return CUDA_SUCCESS;
}

/* What cudaDeviceReset does: the primary context's memory goes back and its references are dropped. */
static CUresult prim_reset(CUdevice dev)
{
    enter();
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    prim_refs[dev] = 0;
    if (dev == 0)
        atomic_store(&prim_implicit, 0);
    ctx_end_locked(primary_ctx(dev));
    unlock();
    return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    enter();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    *active = prim_refs[dev] > 0 || (dev == 0 && atomic_load(&prim_implicit));
    unlock();
    *flags = 0;
    return CUDA_SUCCESS;
}

API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    enter();
    return ctx_create(pctx, dev);
}

API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    (void)params, (void)flags;
    enter();
    return ctx_create(pctx, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
    int dev;
    enter();
    if (ctx_decode(ctx, &dev))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_ctx_set && tl_ctx == (uint64_t)(uintptr_t)ctx)
        tl_ctx = 0;
    lock();
    ctx_end_locked((uint64_t)(uintptr_t)ctx);
    unlock();
    return CUDA_SUCCESS;
}

/* Both ABIs of each end do the same to memory, as the real driver's do; each is its own exported function,
 * at its own address, as there (a tracer must route each). */
#define ENDS(name, type, arg, body)                                                                     \
    API CUresult name(type arg)                                                                        \
    {                                                                                                  \
        return body(arg);                                                                              \
    }
ENDS(cuCtxDestroy, CUcontext, ctx, ctx_destroy)
ENDS(cuCtxDestroy_v2, CUcontext, ctx, ctx_destroy)
ENDS(cuDevicePrimaryCtxRelease, CUdevice, dev, prim_release)
ENDS(cuDevicePrimaryCtxRelease_v2, CUdevice, dev, prim_release)
ENDS(cuDevicePrimaryCtxReset, CUdevice, dev, prim_reset)
ENDS(cuDevicePrimaryCtxReset_v2, CUdevice, dev, prim_reset)

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    int dev;
    enter();
    if (ctx && ctx_decode(ctx, &dev))
        return CUDA_ERROR_INVALID_CONTEXT;
    tl_ctx_set = 1;
    tl_ctx = (uint64_t)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    enter();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = tl_ctx_set ? tl_ctx : (cfg.ndev ? mk_handle(TAG_CTX, 0, 0) : 0);
    *pctx = (CUcontext)(uintptr_t)h;
    return CUDA_SUCCESS;
}

API CUresult cuCtxGetDevice(CUdevice *device)
{
    int dev;
    CUresult rc;
    enter();
    __atomic_fetch_add(&n_ctx_get_device, 1, __ATOMIC_RELAXED);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cur_dev(&dev)))
        return rc;
    *device = dev;
    return CUDA_SUCCESS;
}

API CUresult cuCtxSynchronize(void)
{
    int dev;
    enter();
    return cur_dev(&dev);
}

API CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    int dev;
    CUresult rc;
    enter();
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cur_dev(&dev)))
        return rc;
    lock();
    uint64_t h = mk_handle(TAG_STREAM, new_serial_locked(), dev);
    unlock();
    *phStream = (CUstream)(uintptr_t)h;
    return CUDA_SUCCESS;
}

API CUresult cuStreamDestroy_v2(CUstream hStream)
{
    uint64_t h = (uint64_t)(uintptr_t)hStream;
    enter();
    return handle_is(h, TAG_STREAM) && dev_ok(handle_dev(h)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_sync(CUstream s)
{
    int dev;
    enter();
    return stream_dev(s, &dev);
}

API CUresult cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream); }
API CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream); }

