/* pitfalls routes, refused, refused-release, refused-unmap (pitfalls.c): where the pointers lead, and
 * frees the driver refuses. */
#include "pitfalls.h"

/* ---- routes: where the pointers lead ---- */

static void route(const char *key, const void *p)
{
    say(key, object_of(p));
}

int cmd_routes(void)
{
    GET(aa, cuMemAllocAsync, "cuMemAllocAsync", 11020, 0);
    GET(aa_pt, cuMemAllocAsync, "cuMemAllocAsync", 11020, PTDS);
    GET(fa, cuMemFreeAsync, "cuMemFreeAsync", 11020, 0);
    GET(fa_pt, cuMemFreeAsync, "cuMemFreeAsync", 11020, PTDS);
    GET(ap, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0);
    GET(ap_pt, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, PTDS);
    GET(pool_create, cuMemPoolCreate, "cuMemPoolCreate", 11020, 0);
    route("route.cuMemAllocAsync", (void *)aa);
    route("route.cuMemAllocAsync_ptsz", (void *)aa_pt);
    route("route.cuMemFreeAsync", (void *)fa);
    route("route.cuMemFreeAsync_ptsz", (void *)fa_pt);
    route("route.cuMemAllocFromPoolAsync", (void *)ap);
    route("route.cuMemAllocFromPoolAsync_ptsz", (void *)ap_pt);
    say_int("twins.differ", (void *)aa != (void *)aa_pt && (void *)fa != (void *)fa_pt && (void *)ap != (void *)ap_pt);
    /* The same twins by their exact names through dlsym: the same pointers. */
    say_int("twins.same_as_dlsym", (void *)aa == dlsym(drv, "cuMemAllocAsync") &&
                                       (void *)aa_pt == dlsym(drv, "cuMemAllocAsync_ptsz") &&
                                       (void *)fa_pt == dlsym(drv, "cuMemFreeAsync_ptsz") &&
                                       (void *)ap_pt == dlsym(drv, "cuMemAllocFromPoolAsync_ptsz"));
    /* A function without a _ptsz twin: flags 2 gives the default one. */
    say_int("twins.alloc_flags2_is_default", drv_get("cuMemAlloc", 3020, PTDS) == drv_get("cuMemAlloc", 3020, 0));

    /* cuGetProcAddress itself, as cudart asks for it: 11030 is the 4-argument ABI, 12000 the 5-argument
     * one. Each must be the matching wrapper, and what each hands out must route. */
    gpa4_fn gpa4 = (gpa4_fn)drv_get("cuGetProcAddress", 11030, 0);
    gpa5_fn gpa5 = (gpa5_fn)drv_get("cuGetProcAddress", 12000, 0);
    route("route.cuGetProcAddress@11030", (void *)gpa4);
    route("route.cuGetProcAddress@12000", (void *)gpa5);
    route("route.dlsym.cuGetProcAddress", dlsym(drv, "cuGetProcAddress"));
    say_int("gpa.abis_differ", (void *)gpa4 != (void *)gpa5);
    say_int("gpa.12000_is_dlsym_v2", (void *)gpa5 == dlsym(drv, "cuGetProcAddress_v2"));
    void *alloc4 = NULL, *alloc5 = NULL, *async4_pt = NULL;
    CUdriverProcAddressQueryResult st;
    say_int("gpa4.cuMemAlloc.rc", gpa4("cuMemAlloc", &alloc4, 3020, 0));
    say_int("gpa5.cuMemAlloc.rc", gpa5("cuMemAlloc", &alloc5, 3020, 0, &st));
    say_int("gpa4.cuMemAllocAsync_ptsz.rc", gpa4("cuMemAllocAsync", &async4_pt, 11020, PTDS));
    route("route.gpa4.cuMemAlloc", alloc4);
    route("route.gpa5.cuMemAlloc", alloc5);
    route("route.gpa4.cuMemAllocAsync_ptsz", async4_pt);
    void *alloc_dlsym = dlsym(drv, "cuMemAlloc_v2");
    route("route.dlsym.cuMemAlloc_v2", alloc_dlsym);
    say_int("alloc.all_doors_same", alloc4 == alloc5 && alloc5 == alloc_dlsym && alloc4 != NULL);
    /* Repeated lookups hand out the same pointer each time. */
    int same = 1;
    for (int i = 0; i < 100; i++)
        same &= drv_get("cuMemAlloc", 3020, 0) == alloc5 && dlsym(drv, "cuMemAlloc_v2") == alloc5;
    say_int("alloc.repeated_same", same);
    /* Unknown pointers pass untouched. */
    route("route.cuCtxSynchronize", drv_get("cuCtxSynchronize", 2000, 0));
    route("route.cuMemGetInfo", drv_get("cuMemGetInfo", 3020, 0));
    route("route.cuMemPoolCreate", (void *)pool_create);
    /* RTLD_NEXT "dlsym" from the program: the next dlsym in the global scope, which is the tracer's
     * when it is preloaded (it interposes dlsym). The "lookups" sub-command checks it behaves as the
     * real one. */
    void *next_dlsym = main_next("dlsym");
    route("route.next.dlsym", next_dlsym);
    Dl_info info;
    say("route.next.dlsym.name", dladdr(next_dlsym, &info) && info.dli_sname ? info.dli_sname : "?");

    /* One allocation through each door, each of its own size; the records must carry the door's API. */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemoryPool pool;
    OK(pool_create(&pool, &props));
    CUdeviceptr p[8], x, y;
    OK(((__typeof__(&cuMemAlloc_v2))alloc4)(&p[0], 1 * MiB + 4096));
    OK(((__typeof__(&cuMemAlloc_v2))alloc5)(&p[1], 2 * MiB + 4096));
    OK(((__typeof__(&cuMemAlloc_v2))alloc_dlsym)(&p[2], 3 * MiB + 4096));
    OK(aa(&p[3], 1 * MiB + 512, NULL));
    OK(aa_pt(&p[4], 2 * MiB + 512, NULL));
    OK(ap(&p[5], 3 * MiB + 512, pool, NULL));
    OK(ap_pt(&p[6], 4 * MiB + 512, pool, NULL));
    OK(((__typeof__(&cuMemAllocAsync))async4_pt)(&p[7], 7 * MiB + 512, NULL));
    OK(aa(&x, 5 * MiB, NULL));
    OK(aa(&y, 6 * MiB, NULL));
    OK(fa(x, NULL));
    OK(fa_pt(y, NULL));
    for (int i = 0; i < 8; i++) {
        char key[16];
        snprintf(key, sizeof key, "p%d", i);
        printf("%s 0x%llx\n", key, (unsigned long long)p[i]);
    }
    printf("x 0x%llx\ny 0x%llx\n", (unsigned long long)x, (unsigned long long)y);
    dump("routes");
    return 0;
}

/* ---- refused: a refused free frees nothing ---- */

int cmd_refused(void)
{
    GET(aa, cuMemAllocAsync, "cuMemAllocAsync", 11020, 0);
    GET(fa, cuMemFreeAsync, "cuMemFreeAsync", 11020, 0);
    GET(create, cuMemCreate, "cuMemCreate", 12000, 0);
    GET(release, cuMemRelease, "cuMemRelease", 12000, 0);
    GET(reserve, cuMemAddressReserve, "cuMemAddressReserve", 12000, 0);
    GET(addr_free, cuMemAddressFree, "cuMemAddressFree", 12000, 0);
    GET(map, cuMemMap, "cuMemMap", 12000, 0);
    GET(unmap, cuMemUnmap, "cuMemUnmap", 12000, 0);
    GET(reg, cuMemHostRegister_v2, "cuMemHostRegister", 6050, 0);
    GET(unreg, cuMemHostUnregister, "cuMemHostUnregister", 4000, 0);
    GET(free_host, cuMemFreeHost, "cuMemFreeHost", 2000, 0);
    size_t (*used)(int) = (size_t(*)(int))drv_sym("fakecuda_used_bytes");
    int (*live)(int) = (int (*)(int))drv_sym("fakecuda_live_count");

    /* Memory held by its mapping alone, and an unmap of half the mapping: refused, it stays mapped. */
    CUdeviceptr p;
    OK(aa(&p, 4 * MiB, NULL));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    OK(create(&h, 4 * MiB, &prop, 0));
    OK(reserve(&va, 4 * MiB, 0, 0, 0));
    OK(map(va, 4 * MiB, 0, h, 0));
    OK(release(h));
    CHECK(unmap(va, 2 * MiB) == CUDA_ERROR_INVALID_VALUE);
    CHECK(unmap(0, 0) == CUDA_ERROR_INVALID_VALUE);
    /* A stream-ordered free on a stream that does not exist: refused, the memory stays allocated. It
     * was live at the peak (8 MiB, set by cuMemCreate), so the free put a copy in the peak's set. */
    CHECK(fa(p, (CUstream)(uintptr_t)0x1234) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(used(0) == 8 * MiB && live(0) == 2);
    /* cuMemFreeHost of registered (not allocated) memory: refused, it stays registered. */
    void *buf = aligned_alloc(4096, 64 * 1024);
    CHECK(buf != NULL);
    OK(reg(buf, 64 * 1024, 0));
    CHECK(free_host(buf) == CUDA_ERROR_INVALID_VALUE);
    printf("p 0x%llx\nh 0x%llx\nva 0x%llx\nbuf 0x%llx\n", (unsigned long long)p, (unsigned long long)h,
           (unsigned long long)va, (unsigned long long)(uintptr_t)buf);
    dump("refused");

    OK(fa(p, NULL));
    OK(unmap(va, 4 * MiB));
    OK(addr_free(va, 4 * MiB));
    OK(unreg(buf));
    free(buf);
    CHECK(live(0) == 0);
    dump("refused-cleaned");
    return 0;
}

/* ---- refused-release, refused-unmap: a refused VMM free frees nothing ---- */

int cmd_refused_vmm(int unmap_it)
{
    GET(create, cuMemCreate, "cuMemCreate", 12000, 0);
    GET(release, cuMemRelease, "cuMemRelease", 12000, 0);
    GET(reserve, cuMemAddressReserve, "cuMemAddressReserve", 12000, 0);
    GET(addr_free, cuMemAddressFree, "cuMemAddressFree", 12000, 0);
    GET(map, cuMemMap, "cuMemMap", 12000, 0);
    GET(unmap, cuMemUnmap, "cuMemUnmap", 12000, 0);
    size_t (*used)(int) = (size_t(*)(int))drv_sym("fakecuda_used_bytes");
    void (*refuse_next)(const char *) = (void (*)(const char *))drv_sym("fakecuda_refuse_next");

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    OK(create(&h, 4 * MiB, &prop, 0));
    OK(reserve(&va, 4 * MiB, 0, 0, 0));
    printf("h 0x%llx\nva 0x%llx\n", (unsigned long long)h, (unsigned long long)va);
    if (unmap_it) {
        /* Held by its mapping alone: the unmap would free it, but the driver refuses. */
        OK(map(va, 4 * MiB, 0, h, 0));
        OK(release(h));
        refuse_next("cuMemUnmap");
        CHECK(unmap(va, 4 * MiB) == CUDA_ERROR_INVALID_VALUE);
    } else {
        /* Its only reference: the release would free it, but the driver refuses. */
        refuse_next("cuMemRelease");
        CHECK(release(h) == CUDA_ERROR_INVALID_VALUE);
    }
    CHECK(used(0) == 4 * MiB);
    dump("refused");
    if (unmap_it)
        OK(unmap(va, 4 * MiB));
    else
        OK(release(h));
    OK(addr_free(va, 4 * MiB));
    CHECK(used(0) == 0);
    dump("freed");
    return 0;
}
