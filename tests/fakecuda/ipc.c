/* fakecuda: IPC memory handles (cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle), and
 * cuMemGetAddressRange, the one question that tells an opened mapping's size. */
#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* IPC                                                                                              */

struct ipc_blob {
    char magic[8];
    uint64_t base, size;
    int32_t dev;
    uint32_t pid;
};
static const char ipc_magic[8] = "FKCUIPC";

static CUresult ipc_get(CUipcMemHandle *out, CUdeviceptr dptr)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct rec *r = map_get(&mem_map, dptr);
    /* Only cuMemAlloc-style memory can be shared this way; pool memory needs the pool export APIs. */
    int ok = r && (r->kind == R_MEM || r->kind == R_PITCH);
    struct ipc_blob b = {{0}, dptr, ok ? r->size : 0, ok ? r->dev : 0, (uint32_t)getpid()};
    unlock();
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(b.magic, ipc_magic, sizeof b.magic);
    CUipcMemHandle h;
    memset(&h, 0, sizeof h);
    memcpy(h.reserved, &b, sizeof b);
    *out = h;
    return CUDA_SUCCESS;
}

struct ipc_key {
    uint64_t base;
    uint32_t pid;
};

static int ipc_same(const struct rec *r, const void *arg)
{
    const struct ipc_key *k = arg;
    return r->ipc_base == k->base && r->ipc_pid == k->pid;
}

static CUresult ipc_open(CUdeviceptr *pdptr, const CUipcMemHandle *h, unsigned flags)
{
    struct ipc_blob b;
    if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&b, h->reserved, sizeof b);
    if (memcmp(b.magic, ipc_magic, sizeof b.magic) || !b.size)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(b.dev))
        return CUDA_ERROR_INVALID_DEVICE;
    struct ipc_key k = {b.base, b.pid};
    CUresult rc = CUDA_SUCCESS;
    lock();
    /* Opening the same allocation again returns the same address and counts one more open. */
    struct rec *r = map_find(&ipc_map, ipc_same, &k);
    if (r) {
        r->handle_refs++;
    } else {
        uint64_t a = region_take(&ipc_va, b.size, VA_ALIGN);
        r = a ? rec_new(R_IPC, a, b.dev, b.size) : NULL;
        if (!r || map_put(&ipc_map, r)) {
            free(r);
            r = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            r->ipc_base = b.base;
            r->ipc_pid = b.pid;
            r->handle_refs = 1;
        }
    }
    if (r)
        *pdptr = r->key;
    unlock();
    return rc;
}

static CUresult ipc_close(CUdeviceptr dptr)
{
    lock();
    struct rec *r = map_get(&ipc_map, dptr);
    if (!r) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (--r->handle_refs == 0)
        map_del(&ipc_map, r);
    else
        r = NULL;
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    enter();
    return ipc_get(pHandle, dptr);
}

API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    enter();
    return ipc_open(pdptr, &handle, Flags);
}

/* The pre-11.0 ABI, at its own address as on the real driver. */
API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    enter();
    return ipc_open(pdptr, &handle, Flags);
}

API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    enter();
    return ipc_close(dptr);
}


/* ---------------------------------------------------------------------------------------------- */
/* cuMemGetAddressRange                                                                             */

static int holds(const struct rec *r, const void *arg)
{
    uint64_t a = *(const uint64_t *)arg;
    return a >= r->key && a - r->key < r->size;
}

/* The allocation that holds dptr: device memory (cuMemAlloc, pitched, managed, a pool's), an IPC
 * mapping (the exporter's size, which its handle carries), or a VMM mapping. */
static CUresult address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    uint64_t a = dptr, base = 0, size = 0;
    lock();
    const struct rec *r = map_find(&mem_map, holds, &a);
    if (!r)
        r = map_find(&ipc_map, holds, &a);
    if (r) {
        base = r->key;
        size = r->size;
    } else {
        const struct mapping *m = mapping_at_locked(a);
        if (m) {
            base = m->base;
            size = m->size;
        }
    }
    unlock();
    if (!size)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    enter();
    if (refused("cuMemGetAddressRange_v2"))
        return CUDA_ERROR_INVALID_VALUE;
    return address_range(pbase, psize, dptr);
}
