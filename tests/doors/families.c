/* Every allocation family of the driver, reached as cudart reaches it (cuGetProcAddress_v2 from dlsym,
 * then flags 0, or 2 for the _ptsz twins), with some names taken by plain dlsym on the handle as JAX
 * does. Each sub-command exercises one family and calls dump("label") at known points; the test
 * (tests/e2e/test_families.c) checks every snapshot against the exact numbers in the comments here.
 * The program checks the driver's side itself (fakecuda_used_bytes, ...), so a snapshot that disagrees
 * is the tracer's error, not the scenario's. It prints "key value" lines (handles, addresses) that the
 * test compares with the snapshot's records.
 *
 *   families device|async|vmm|import|import-v1|import-unsized|arrays|host
 *
 * Run with the stand-in driver (FAKECUDA_CAPACITY=1G, granularity 2 MiB: the defaults). */
#include <unistd.h>

#include "drv.h"

static size_t (*used)(int);
static size_t (*host_used)(void);
static int (*live)(int);

static void hooks(void)
{
    used = (size_t(*)(int))drv_sym("fakecuda_used_bytes");
    host_used = (size_t(*)(void))drv_sym("fakecuda_host_bytes");
    live = (int (*)(int))drv_sym("fakecuda_live_count");
}

static void put(const char *key, unsigned long long v)
{
    printf("%s 0x%llx\n", key, v);
}

/* ---- device: cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemFree ---- */

static int cmd_device(void)
{
    GET(alloc, cuMemAlloc_v2, "cuMemAlloc", 3020, 0);
    GET(pitch, cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0);
    GET(mfree, cuMemFree_v2, "cuMemFree", 3020, 0);
    SYM(managed, cuMemAllocManaged);

    CUdeviceptr a, p, m;
    size_t pp = 0;
    OK(alloc(&a, 3 * MiB + 1000));
    OK(pitch(&p, &pp, 1000, 300, 4)); /* pitch 1024: 307200 bytes taken, not 300000 */
    CHECK(pp == 1024);
    OK(managed(&m, 5 * MiB, CU_MEM_ATTACH_GLOBAL));
    CHECK(used(0) == 3 * MiB + 1000 + 307200 + 5 * MiB && live(0) == 3);
    put("alloc", a);
    put("pitch", p);
    put("managed", m);
    dump("device-live"); /* device 3 MiB+1000+307200, managed 5 MiB: all of it the peak */

    OK(mfree(a));
    OK(mfree(p));
    CHECK(used(0) == 5 * MiB && live(0) == 1);
    dump("device-freed"); /* managed 5 MiB live; the peak keeps all three */
    OK(mfree(m));
    return 0;
}

/* ---- async: the default pool and a created one, each function and its _ptsz twin ---- */

static int cmd_async(void)
{
    /* The _ptsz twins are typed as their defaults: same arguments, another entry point. */
    GET(aa, cuMemAllocAsync, "cuMemAllocAsync", 11020, 0);
    GET(aa_pt, cuMemAllocAsync, "cuMemAllocAsync", 11020, PTDS);
    GET(fa, cuMemFreeAsync, "cuMemFreeAsync", 11020, 0);
    GET(fa_pt, cuMemFreeAsync, "cuMemFreeAsync", 11020, PTDS);
    GET(ap, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0);
    GET(ap_pt, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, PTDS);
    GET(pool_create, cuMemPoolCreate, "cuMemPoolCreate", 11020, 0);
    GET(pool_destroy, cuMemPoolDestroy, "cuMemPoolDestroy", 11020, 0);
    GET(pool_trim, cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020, 0);
    CHECK((void *)aa != (void *)aa_pt && (void *)fa != (void *)fa_pt && (void *)ap != (void *)ap_pt);

    /* The default pool: 3 MiB + 1 MiB, one 2 MiB-rounded reservation of 4 MiB. */
    CUdeviceptr a1, a2, p1, p2;
    OK(aa(&a1, 3 * MiB, NULL));
    OK(aa_pt(&a2, 1 * MiB, NULL));
    /* A created pool: 5 MiB + 6 MiB, reserved 6 MiB then 12 MiB. */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    OK(pool_create(&pool, &props));
    OK(ap(&p1, 5 * MiB, pool, NULL));
    OK(ap_pt(&p2, 6 * MiB, pool, NULL));
    CHECK(used(0) == 16 * MiB && live(0) == 4);
    put("pool", (unsigned long long)(uintptr_t)pool);
    put("a1", a1);
    put("a2", a2);
    put("p1", p1);
    put("p2", p2);
    dump("async-live"); /* live 15 MiB; pools: default 4/4 MiB, created 12/11 MiB (reserved/used) */

    OK(fa(a1, NULL));
    OK(fa_pt(p2, NULL));
    CHECK(used(0) == 16 * MiB && live(0) == 2); /* freed memory stays in its pool */
    dump("async-freed"); /* live 6 MiB; pools: default 4/1 MiB, created 12/5 MiB */

    OK(pool_trim(pool, 0));
    CHECK(used(0) == 10 * MiB);
    dump("async-trimmed"); /* created pool 6/5 MiB */

    /* Two failures, each through a different entry point: each writes its own snapshot. */
    CUdeviceptr x = 0xdeadbeef;
    CHECK(aa(&x, 2 * GiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY && x == 0xdeadbeef);
    CHECK(ap_pt(&x, 1 * GiB, pool, NULL) == CUDA_ERROR_OUT_OF_MEMORY && x == 0xdeadbeef);
    CHECK(used(0) == 10 * MiB);

    OK(fa(a2, NULL));
    OK(fa_pt(p1, NULL));
    OK(pool_destroy(pool));
    return 0;
}

/* ---- vmm: cuMemCreate on the device and on the host, NCCL's and PyTorch's patterns ---- */

struct vmm {
    __typeof__(&cuMemCreate) create;
    __typeof__(&cuMemRelease) release;
    __typeof__(&cuMemRetainAllocationHandle) retain;
    __typeof__(&cuMemMap) map;
    __typeof__(&cuMemUnmap) unmap;
    __typeof__(&cuMemSetAccess) access;
    __typeof__(&cuMemAddressReserve) reserve;
    __typeof__(&cuMemAddressFree) addr_free;
};

/* As PyTorch's expandable segments ask for them (cudaGetDriverEntryPointByVersion, 12000). */
static void vmm_load(struct vmm *v)
{
    v->create = (__typeof__(v->create))drv_get("cuMemCreate", 12000, 0);
    v->release = (__typeof__(v->release))drv_get("cuMemRelease", 12000, 0);
    v->retain = (__typeof__(v->retain))drv_get("cuMemRetainAllocationHandle", 12000, 0);
    v->map = (__typeof__(v->map))drv_get("cuMemMap", 12000, 0);
    v->unmap = (__typeof__(v->unmap))drv_get("cuMemUnmap", 12000, 0);
    v->access = (__typeof__(v->access))drv_get("cuMemSetAccess", 12000, 0);
    v->reserve = (__typeof__(v->reserve))drv_get("cuMemAddressReserve", 12000, 0);
    v->addr_free = (__typeof__(v->addr_free))drv_get("cuMemAddressFree", 12000, 0);
}

static CUmemAllocationProp prop_at(CUmemLocationType type, int id, CUmemAllocationHandleType handles)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = id;
    p.requestedHandleTypes = handles;
    return p;
}

static void set_access(const struct vmm *v, CUdeviceptr va, size_t size)
{
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    OK(v->access(va, size, &d, 1));
}

static int cmd_vmm(void)
{
    struct vmm v;
    vmm_load(&v);
    CUmemAllocationProp dev = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_HANDLE_TYPE_NONE);
    CUmemAllocationProp host = prop_at(CU_MEM_LOCATION_TYPE_HOST, 0, CU_MEM_HANDLE_TYPE_NONE);

    /* Address space is not memory: a 64 MiB reservation takes nothing. */
    CUdeviceptr spare;
    OK(v.reserve(&spare, 64 * MiB, 0, 0, 0));
    CUmemGenericAllocationHandle hd, hh;
    OK(v.create(&hd, 4 * MiB, &dev, 0));
    OK(v.create(&hh, 2 * MiB, &host, 0)); /* host memory: device -1, never device 0's */
    CHECK(used(0) == 4 * MiB && host_used() == 2 * MiB && live(0) == 1);
    put("hd", hd);
    put("hh", hh);
    dump("vmm-created");

    /* NCCL: create, reserve, map, set access; to free: retain from the address, release, unmap,
     * release. The retain and the first release cancel; the memory goes at the second release. */
    CUdeviceptr va;
    OK(v.reserve(&va, 4 * MiB, 0, 0, 0));
    OK(v.map(va, 4 * MiB, 0, hd, 0));
    set_access(&v, va, 4 * MiB);
    put("va", va);
    dump("vmm-mapped");
    CUmemGenericAllocationHandle hr;
    OK(v.retain(&hr, (void *)(uintptr_t)va));
    CHECK(hr == hd);
    OK(v.release(hr));
    CHECK(used(0) == 4 * MiB);
    dump("nccl-released-once"); /* still 4 MiB: one reference and one mapping left */
    OK(v.unmap(va, 4 * MiB));
    CHECK(used(0) == 4 * MiB); /* still referenced */
    OK(v.release(hd));
    CHECK(used(0) == 0);
    OK(v.addr_free(va, 4 * MiB));
    dump("nccl-freed");

    /* PyTorch expandable segments: one big reservation, 2 MiB segments created and mapped one by one
     * as the segment grows, each unmapped then released as it shrinks. */
    CUdeviceptr seg;
    OK(v.reserve(&seg, 16 * MiB, 0, 0, 0));
    CUmemGenericAllocationHandle h[3];
    for (int i = 0; i < 3; i++) {
        OK(v.create(&h[i], 2 * MiB, &dev, 0));
        OK(v.map(seg + (CUdeviceptr)i * 2 * MiB, 2 * MiB, 0, h[i], 0));
        set_access(&v, seg + (CUdeviceptr)i * 2 * MiB, 2 * MiB);
    }
    CHECK(used(0) == 6 * MiB && live(0) == 3);
    put("seg", seg);
    put("h0", h[0]);
    put("h1", h[1]);
    put("h2", h[2]);
    dump("expandable-grown"); /* 6 MiB in three handles, three mappings */
    for (int i = 2; i >= 1; i--) {
        OK(v.unmap(seg + (CUdeviceptr)i * 2 * MiB, 2 * MiB));
        OK(v.release(h[i]));
    }
    CHECK(used(0) == 2 * MiB);
    dump("expandable-shrunk"); /* 2 MiB: h0 */
    OK(v.unmap(seg, 2 * MiB));
    OK(v.release(h[0]));
    OK(v.addr_free(seg, 16 * MiB));
    CHECK(used(0) == 0);

    /* The CUDA samples' order: release right after mapping; the mapping keeps the memory, and the
     * unmap is what frees it. */
    CUmemGenericAllocationHandle hs;
    CUdeviceptr sva;
    OK(v.reserve(&sva, 2 * MiB, 0, 0, 0));
    OK(v.create(&hs, 2 * MiB, &dev, 0));
    OK(v.map(sva, 2 * MiB, 0, hs, 0));
    OK(v.release(hs));
    CHECK(used(0) == 2 * MiB);
    put("hs", hs);
    dump("map-then-release"); /* 2 MiB, held by the mapping alone */
    OK(v.unmap(sva, 2 * MiB));
    CHECK(used(0) == 0);
    OK(v.addr_free(sva, 2 * MiB));

    /* A device-located cuMemCreate that does not fit: the snapshot names it. */
    CUmemGenericAllocationHandle big = 0xdeadbeef;
    CHECK(v.create(&big, 2 * GiB, &dev, 0) == CUDA_ERROR_OUT_OF_MEMORY && big == 0xdeadbeef);

    OK(v.release(hh));
    OK(v.addr_free(spare, 64 * MiB));
    CHECK(host_used() == 0 && used(0) == 0);
    dump("vmm-end"); /* nothing left */
    return 0;
}

/* ---- import: a VMM export imported back, and an IPC handle opened; the exporter holds the memory ---- */

static int ipc_v1;      /* cuIpcOpenMemHandle's pre-11.0 ABI, which cudart asks for too */
static int ipc_unsized; /* the driver refuses to tell the opened mapping's range */

static int cmd_import(void)
{
    struct vmm v;
    vmm_load(&v);
    /* JAX takes these with plain dlsym on the handle. */
    SYM(export, cuMemExportToShareableHandle);
    SYM(import, cuMemImportFromShareableHandle);
    SYM(alloc, cuMemAlloc_v2);
    SYM(mfree, cuMemFree_v2);
    GET(ipc_get, cuIpcGetMemHandle, "cuIpcGetMemHandle", 4010, 0);
    GET(ipc_open, cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle", ipc_v1 ? 4010 : 11000, 0);
    GET(ipc_close, cuIpcCloseMemHandle, "cuIpcCloseMemHandle", 4010, 0);

    CUmemAllocationProp dev = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle h, hi;
    OK(v.create(&h, 4 * MiB, &dev, 0));
    int fd = -1;
    OK(export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    OK(import(&hi, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    CUdeviceptr d, o;
    CUipcMemHandle ih;
    OK(alloc(&d, 8 * MiB));
    OK(ipc_get(&ih, d));
    if (ipc_unsized)
        ((void (*)(const char *))drv_sym("fakecuda_refuse_next"))("cuMemGetAddressRange_v2");
    OK(ipc_open(&o, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHECK(used(0) == 12 * MiB && live(0) == 2); /* the import and the open take nothing */
    put("h", h);
    put("hi", hi);
    put("d", d);
    put("o", o);
    /* own: vmm 4 MiB + device 8 MiB; imported: 1 byte (the VMM import's size is unknown until mapped) + the
     * IPC mapping's 8 MiB (cuMemGetAddressRange's), or 1 byte when the driver would not say */
    dump("imported");

    CUdeviceptr va;
    OK(v.reserve(&va, 4 * MiB, 0, 0, 0));
    OK(v.map(va, 4 * MiB, 0, hi, 0));
    put("va", va);
    dump("imported-mapped"); /* the mapping tells the import's size: 4 MiB imported + the IPC mapping's */

    OK(v.unmap(va, 4 * MiB));
    OK(v.release(hi));
    OK(ipc_close(o));
    OK(v.addr_free(va, 4 * MiB));
    CHECK(used(0) == 12 * MiB);
    dump("import-released"); /* imported 0; own memory unchanged */
    OK(v.release(h));
    OK(mfree(d));
    return 0;
}

/* ---- arrays: sizes from the descriptor, the same rule the driver charges by ---- */

static int cmd_import_v1(void)
{
    ipc_v1 = 1;
    return cmd_import();
}

static int cmd_import_unsized(void)
{
    ipc_unsized = 1;
    return cmd_import();
}

static int cmd_arrays(void)
{
    GET(create2d, cuArrayCreate_v2, "cuArrayCreate", 3020, 0);
    GET(create3d, cuArray3DCreate_v2, "cuArray3DCreate", 3020, 0);
    GET(create_mip, cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, 0);
    GET(destroy, cuArrayDestroy, "cuArrayDestroy", 2000, 0);
    SYM(destroy_mip, cuMipmappedArrayDestroy);

    CUDA_ARRAY_DESCRIPTOR d2 = {.Width = 1000, .Height = 30, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    CUDA_ARRAY_DESCRIPTOR d1 = {.Width = 777, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 64, .Height = 32, .Depth = 8, .Format = CU_AD_FORMAT_HALF, .NumChannels = 2};
    CUDA_ARRAY3D_DESCRIPTOR dm = {.Width = 256, .Height = 128, .Format = CU_AD_FORMAT_UNSIGNED_INT16, .NumChannels = 1};
    CUDA_ARRAY3D_DESCRIPTOR dl = {.Width = 64, .Height = 64, .Depth = 6, .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 1, .Flags = CUDA_ARRAY3D_LAYERED};
    CUarray a2, a1, a3;
    CUmipmappedArray m, ml;
    OK(create2d(&a2, &d2));       /* 1000*30*4*4 = 480000 */
    OK(create2d(&a1, &d1));       /* 777 */
    OK(create3d(&a3, &d3));       /* 64*32*8*2*2 = 65536 */
    OK(create_mip(&m, &dm, 5));   /* 2*(256*128 + 128*64 + 64*32 + 32*16 + 16*8) = 87296 */
    OK(create_mip(&ml, &dl, 3));  /* 6 layers kept: 4*6*(64*64 + 32*32 + 16*16) = 129024 */
    CHECK(used(0) == 480000 + 777 + 65536 + 87296 + 129024 && live(0) == 5);
    put("a2", (unsigned long long)(uintptr_t)a2);
    put("a1", (unsigned long long)(uintptr_t)a1);
    put("a3", (unsigned long long)(uintptr_t)a3);
    put("m", (unsigned long long)(uintptr_t)m);
    put("ml", (unsigned long long)(uintptr_t)ml);
    dump("arrays");
    OK(destroy(a2));
    OK(destroy(a1));
    OK(destroy(a3));
    OK(destroy_mip(m));
    OK(destroy_mip(ml));
    CHECK(used(0) == 0 && live(0) == 0);
    dump("arrays-destroyed");
    return 0;
}

/* ---- host: pinned and registered host memory, never a device's ---- */

static int cmd_host(void)
{
    GET(alloc, cuMemAlloc_v2, "cuMemAlloc", 3020, 0);
    GET(mfree, cuMemFree_v2, "cuMemFree", 3020, 0);
    GET(alloc_host, cuMemAllocHost_v2, "cuMemAllocHost", 3020, 0);
    SYM(host_alloc, cuMemHostAlloc);
    GET(free_host, cuMemFreeHost, "cuMemFreeHost", 2000, 0);
    GET(reg, cuMemHostRegister_v2, "cuMemHostRegister", 6050, 0);
    GET(unreg, cuMemHostUnregister, "cuMemHostUnregister", 4000, 0);

    CUdeviceptr d;
    OK(alloc(&d, 1 * MiB));
    void *h1, *h2;
    OK(alloc_host(&h1, 1 * MiB));
    OK(host_alloc(&h2, 3 * MiB, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    void *buf = aligned_alloc(4096, 64 * 1024);
    CHECK(buf != NULL);
    OK(reg(buf, 64 * 1024, 0));
    CHECK(used(0) == 1 * MiB && host_used() == 4 * MiB);
    put("d", d);
    put("h1", (unsigned long long)(uintptr_t)h1);
    put("h2", (unsigned long long)(uintptr_t)h2);
    put("buf", (unsigned long long)(uintptr_t)buf);
    dump("host"); /* device 0: 1 MiB; host (-1): 1 MiB + 3 MiB pinned + 64 KiB registered */
    OK(free_host(h1));
    OK(free_host(h2));
    OK(unreg(buf));
    free(buf);
    CHECK(host_used() == 0);
    dump("host-freed");
    OK(mfree(d));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: families device|async|vmm|import|import-v1|import-unsized|arrays|host\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    drv_open();
    hooks();
    static const struct {
        const char *name;
        int (*fn)(void);
    } cmds[] = {
        {"device", cmd_device}, {"async", cmd_async}, {"vmm", cmd_vmm}, {"import", cmd_import}, {"import-v1", cmd_import_v1},
        {"import-unsized", cmd_import_unsized}, {"arrays", cmd_arrays}, {"host", cmd_host},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0)
            return cmds[i].fn();
    fprintf(stderr, "families: unknown sub-command %s\n", argv[1]);
    return 2;
}
