/* fakecuda: virtual memory management: physical allocations, reservations, mappings, shareable handles. */
#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* Virtual memory management                                                                        */

static int loc_is_host(CUmemLocationType t)
{
    return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult check_location(const CUmemLocation *loc)
{
    if (loc->type == CU_MEM_LOCATION_TYPE_DEVICE)
        return dev_ok(loc->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    return loc_is_host(loc->type) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static struct rec *phys_get_locked(CUmemGenericAllocationHandle h)
{
    struct rec *r = map_get(&phys_map, h);
    return r && r->handle_refs > 0 ? r : NULL;
}

/* Physical memory is freed once no handle reference and no mapping is left. */
static void phys_maybe_free_locked(struct rec *r)
{
    if (r->handle_refs > 0 || r->map_refs > 0)
        return;
    map_del(&phys_map, r);
    if (!r->imported) {
        if (r->dev >= 0) {
            uncharge(r->dev, r->size);
            devs[r->dev].live--;
        } else {
            host_bytes -= r->size;
        }
    }
    free(r);
}

/* Records a physical allocation; charges it unless it is imported. */
static CUresult phys_new_locked(size_t size, const CUmemAllocationProp *prop, int imported,
                                CUmemGenericAllocationHandle *out)
{
    int dev = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    CUresult rc;
    if (!imported && dev >= 0 && (rc = charge(dev, size)))
        return rc;
    uint64_t h = mk_handle(TAG_VMM, new_serial_locked(), dev < 0 ? 0xFF : dev);
    struct rec *r = rec_new(R_PHYS, h, dev, size);
    if (!r || map_put(&phys_map, r)) {
        if (!imported && dev >= 0)
            uncharge(dev, size);
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->prop = *prop;
    r->imported = imported;
    r->handle_refs = 1;
    if (!imported) {
        if (dev >= 0)
            devs[dev].live++;
        else
            host_bytes += size;
    }
    *out = h;
    return CUDA_SUCCESS;
}

static CUresult vmm_create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                           unsigned long long flags)
{
    CUresult rc;
    if (!handle || !prop || flags || !size || size % cfg.granularity)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->type == CU_MEM_ALLOCATION_TYPE_MANAGED)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_location(&prop->location)))
        return rc;
    CUmemGenericAllocationHandle h;
    lock();
    rc = phys_new_locked(size, prop, 0, &h);
    unlock();
    if (rc == CUDA_SUCCESS)
        *handle = h;
    return rc;
}

static CUresult vmm_release(CUmemGenericAllocationHandle h)
{
    lock();
    struct rec *r = phys_get_locked(h);
    if (!r) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    r->handle_refs--;
    phys_maybe_free_locked(r);
    unlock();
    return CUDA_SUCCESS;
}

struct mapping *mapping_at_locked(uint64_t a)
{
    for (struct mapping *m = mappings; m; m = m->next)
        if (a >= m->base && a - m->base < m->size)
            return m;
    return NULL;
}

static CUresult vmm_retain(CUmemGenericAllocationHandle *handle, void *addr)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct mapping *m = mapping_at_locked((uint64_t)(uintptr_t)addr);
    if (!m) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    m->phys->handle_refs++;
    *handle = m->phys->key;
    unlock();
    return CUDA_SUCCESS;
}

static CUresult vmm_reserve(CUdeviceptr *ptr, size_t size, size_t alignment)
{
    if (!ptr || !size || size % cfg.granularity || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > cfg.granularity ? alignment : cfg.granularity;
    struct resv *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    lock();
    uint64_t a = region_take(&vmm_va, size, align);
    if (a) {
        r->base = a;
        r->size = size;
        r->next = resvs;
        resvs = r;
    }
    unlock();
    if (!a) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = a;
    return CUDA_SUCCESS;
}

static CUresult vmm_address_free(CUdeviceptr ptr, size_t size)
{
    lock();
    struct resv **pp = &resvs;
    while (*pp && !((*pp)->base == ptr && (*pp)->size == size))
        pp = &(*pp)->next;
    struct resv *r = *pp;
    int busy = 0;
    for (struct mapping *m = mappings; r && m; m = m->next)
        busy |= m->base >= r->base && m->base - r->base < r->size;
    /* Freeing a range that still has mappings is refused, so the mapped memory is not leaked silently. */
    if (!r || busy) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pp = r->next;
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

static CUresult vmm_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                        unsigned long long flags)
{
    uint64_t g = cfg.granularity;
    if (flags || !size || size % g || ptr % g || offset % g || ptr + size < ptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct mapping *nm = calloc(1, sizeof *nm);
    if (!nm)
        return CUDA_ERROR_OUT_OF_MEMORY;
    lock();
    struct rec *r = phys_get_locked(h);
    struct resv *rv = resvs;
    while (rv && !(ptr >= rv->base && ptr - rv->base < rv->size))
        rv = rv->next;
    int ok = r && offset <= r->size && size <= r->size - offset && rv && size <= rv->size - (ptr - rv->base);
    for (struct mapping *m = mappings; ok && m; m = m->next)
        ok = !(ptr < m->base + m->size && m->base < ptr + size);
    if (!ok) {
        unlock();
        free(nm);
        return CUDA_ERROR_INVALID_VALUE;
    }
    nm->base = ptr;
    nm->size = size;
    nm->phys = r;
    nm->next = mappings;
    mappings = nm;
    r->map_refs++;
    unlock();
    return CUDA_SUCCESS;
}

/* Removes every mapping inside [ptr, ptr+size); a mapping only partly inside makes the call fail. */
static CUresult vmm_unmap(CUdeviceptr ptr, size_t size)
{
    uint64_t end = ptr + size;
    if (!size || end < ptr)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    int inside = 0;
    for (struct mapping *m = mappings; m; m = m->next) {
        int overlaps = m->base < end && ptr < m->base + m->size;
        int contained = m->base >= ptr && m->base + m->size <= end;
        if (overlaps && !contained) {
            unlock();
            return CUDA_ERROR_INVALID_VALUE;
        }
        inside += contained;
    }
    if (!inside) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct mapping **pp = &mappings, *dead = NULL;
    while (*pp) {
        struct mapping *m = *pp;
        if (m->base >= ptr && m->base + m->size <= end) {
            *pp = m->next;
            m->phys->map_refs--;
            phys_maybe_free_locked(m->phys);
            m->next = dead;
            dead = m;
        } else {
            pp = &m->next;
        }
    }
    unlock();
    while (dead) {
        struct mapping *nx = dead->next;
        free(dead);
        dead = nx;
    }
    return CUDA_SUCCESS;
}

/* What an exported allocation carries: enough to import it in this or another process. It is the
 * payload of a CUmemFabricHandle, and the first bytes of the memfd given out as a POSIX fd. */
struct export_blob {
    char magic[8];
    uint64_t size;
    int32_t loc_type, loc_id;
    uint32_t handle_types, pid;
    uint64_t handle;
};
static const char export_magic[8] = "FKCUEXP";

static CUresult vmm_export(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                           unsigned long long flags)
{
    if (!out || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && type != CU_MEM_HANDLE_TYPE_FABRIC)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct export_blob b;
    memset(&b, 0, sizeof b);
    lock();
    struct rec *r = phys_get_locked(h);
    /* The driver only exports to a handle type requested when the memory was created. */
    int ok = r && (r->prop.requestedHandleTypes & type);
    if (ok) {
        memcpy(b.magic, export_magic, sizeof b.magic);
        b.size = r->size;
        b.loc_type = r->prop.location.type;
        b.loc_id = r->prop.location.id;
        b.handle_types = r->prop.requestedHandleTypes;
        b.pid = (uint32_t)getpid();
        b.handle = h;
    }
    unlock();
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        CUmemFabricHandle fh;
        memset(&fh, 0, sizeof fh);
        memcpy(fh.data, &b, sizeof b);
        memcpy(out, &fh, sizeof fh);
        return CUDA_SUCCESS;
    }
    /* A real descriptor, so the caller may close it or pass it over a socket like the real one. */
    int fd = memfd_create("fakecuda-export", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    if (pwrite(fd, &b, sizeof b, 0) != (ssize_t)sizeof b) {
        close(fd);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

static CUresult vmm_import(CUmemGenericAllocationHandle *handle, void *os_handle, CUmemAllocationHandleType type)
{
    struct export_blob b;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        int fd = (int)(intptr_t)os_handle;
        if (pread(fd, &b, sizeof b, 0) != (ssize_t)sizeof b)
            return CUDA_ERROR_INVALID_VALUE;
    } else if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        if (!os_handle)
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(&b, os_handle, sizeof b);
    } else {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (memcmp(b.magic, export_magic, sizeof b.magic) || !b.size)
        return CUDA_ERROR_INVALID_VALUE;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = (CUmemAllocationHandleType)b.handle_types;
    prop.location.type = (CUmemLocationType)b.loc_type;
    prop.location.id = b.loc_id;
    if (prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE && !dev_ok(prop.location.id))
        return CUDA_ERROR_INVALID_DEVICE; /* exported from a device this process does not see */
    CUmemGenericAllocationHandle h;
    lock();
    CUresult rc = phys_new_locked(b.size, &prop, 1, &h);
    unlock();
    if (rc == CUDA_SUCCESS)
        *handle = h;
    return rc;
}

static CUresult vmm_get_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct rec *r = phys_get_locked(h);
    if (r)
        *prop = r->prop;
    unlock();
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                           CUmemAllocationGranularity_flags option)
{
    CUresult rc;
    enter();
    if (!granularity || !prop ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_location(&prop->location)))
        return rc;
    *granularity = cfg.granularity;
    return CUDA_SUCCESS;
}

API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                         unsigned long long flags)
{
    enter();
    return vmm_create(handle, size, prop, flags);
}

API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    enter();
    if (refused("cuMemRelease"))
        return CUDA_ERROR_INVALID_VALUE;
    return vmm_release(handle);
}

API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    enter();
    return vmm_retain(handle, addr);
}

API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                 unsigned long long flags)
{
    (void)addr, (void)flags;
    enter();
    return vmm_reserve(ptr, size, alignment); /* the address hint is only a hint; it is ignored */
}

API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    enter();
    return vmm_address_free(ptr, size);
}

API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                      unsigned long long flags)
{
    enter();
    return vmm_map(ptr, size, offset, handle, flags);
}

API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    enter();
    if (refused("cuMemUnmap"))
        return CUDA_ERROR_INVALID_VALUE;
    return vmm_unmap(ptr, size);
}

API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    enter();
    return ptr && size && (desc || !count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

API CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                          CUmemAllocationHandleType handleType, unsigned long long flags)
{
    enter();
    return vmm_export(shareableHandle, handle, handleType, flags);
}

API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                            CUmemAllocationHandleType shHandleType)
{
    enter();
    return vmm_import(handle, osHandle, shHandleType);
}

API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    enter();
    return vmm_get_props(prop, handle);
}

