/* The ways an interposer of the driver goes wrong, each made observable. The test
 * (tests/e2e/test_pitfalls.c) runs a sub-command twice, traced and untraced, and compares what it
 * prints; "key value" lines name pointers as "object+offset" (dladdr), which is stable from run to
 * run, where raw addresses are not (ASLR).
 *
 *   pitfalls lookups  dlsym(RTLD_NEXT / RTLD_DEFAULT) from the program and from a library loaded
 *                     RTLD_LOCAL, handle lookups of names the tracer must not touch, cuGetProcAddress's
 *                     failures, and NULL out-parameters through routed pointers. Every line must be the
 *                     same traced and untraced.
 *   pitfalls routes   where cuGetProcAddress's and dlsym's pointers lead (the tracer's wrappers when
 *                     traced, the driver otherwise): default and _ptsz twins, both cuGetProcAddress ABIs.
 *                     Allocates through each and dumps "routes".
 *   pitfalls threads  16 threads allocate and free through routed pointers at once, with frees from
 *                     other threads; prints the ground truth and dumps "threads".
 *   pitfalls refused  frees and unmaps that the driver refuses, of memory it still holds; dumps
 *                     "refused" (nothing may have changed) and "refused-cleaned" (after the real frees).
 *   pitfalls refused-release, refused-unmap
 *                     a cuMemRelease of the last reference, and a cuMemUnmap of the last mapping, that the
 *                     driver refuses (fakecuda_refuse_next); dumps "refused" and then "freed".
 */
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include "drv.h"

/* ---- naming pointers ---- */

/* "object+0xoffset" for a pointer into a loaded object, "null", or "unknown". Returns a static buffer
 * from a small ring, so a few may be used in one printf. */
static const char *where(const void *p)
{
    static char ring[8][512];
    static unsigned next;
    char *b = ring[next++ % 8];
    Dl_info info;
    if (!p)
        return "null";
    if (!dladdr(p, &info) || !info.dli_fname) {
        snprintf(b, 512, "unknown");
        return b;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    snprintf(b, 512, "%s+0x%lx", slash ? slash + 1 : info.dli_fname,
             (unsigned long)((const char *)p - (const char *)info.dli_fbase));
    return b;
}

/* The object's file name alone. */
static const char *object_of(const void *p)
{
    static char b[512];
    snprintf(b, sizeof b, "%s", where(p));
    char *plus = strrchr(b, '+');
    if (plus)
        *plus = 0;
    return b;
}

static void say(const char *key, const char *value)
{
    printf("%s %s\n", key, value);
}

static void say_int(const char *key, long long v)
{
    printf("%s %lld\n", key, v);
}

/* ---- the library loaded RTLD_LOCAL ---- */

static void *(*lib_next)(const char *);
static void *(*lib_default)(const char *);
static void *(*lib_handle)(void *, const char *);
static void *lib;

static void lib_open(void)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    CHECK(n > 0);
    path[n] = 0;
    char *slash = strrchr(path, '/');
    CHECK(slash != NULL);
    strcpy(slash + 1, "libpitfall.so");
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    lib_next = (void *(*)(const char *))dlsym(lib, "pitfall_next");
    lib_default = (void *(*)(const char *))dlsym(lib, "pitfall_default");
    lib_handle = (void *(*)(void *, const char *))dlsym(lib, "pitfall_handle");
    CHECK(lib_next && lib_default && lib_handle);
}

/* The same lookup many times must give the same answer every time: the first call into the tracer's
 * dlsym takes another path (it finds the real dlsym) than the ones after it. */
static const char *stable(void *(*look)(const char *), const char *name)
{
    void *first = look(name);
    for (int i = 0; i < 100; i++)
        if (look(name) != first)
            return "unstable";
    return where(first);
}

static void *main_next(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    __asm__ volatile("" : : "r"(p) : "memory"); /* a call, not a tail jump: the caller is this program */
    return p;
}

static void *main_default(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

/* ---- lookups: identical traced and untraced ---- */

static void caller_relative(void)
{
    /* From the program. RTLD_NEXT "dlsym" is not here: traced, the next dlsym after the program is
     * the tracer's own (an interposer's by definition); its behaviour is checked instead. */
    say("main.next.malloc", stable(main_next, "malloc"));
    say("main.next.free", stable(main_next, "free"));
    say("main.default.malloc", stable(main_default, "malloc"));
    say("main.default.only_in_lib", stable(main_default, "pitfall_only_here"));
    say("main.next.only_in_lib", stable(main_next, "pitfall_only_here"));

    /* What RTLD_NEXT "dlsym" gives behaves as the real one, whoever calls it. */
    void *(*next_dlsym)(void *, const char *) = (void *(*)(void *, const char *))main_next("dlsym");
    CHECK(next_dlsym != NULL);
    void *p = next_dlsym(RTLD_NEXT, "malloc");
    __asm__ volatile("" : : "r"(p) : "memory");
    say("main.next_dlsym.next.malloc", where(p));
    p = next_dlsym(RTLD_DEFAULT, "pitfall_only_here");
    __asm__ volatile("" : : "r"(p) : "memory");
    say("main.next_dlsym.default.only_in_lib", where(p));
    say("main.next_dlsym.handle.only_in_lib", where(next_dlsym(lib, "pitfall_only_here")));
    say("main.next_dlsym.handle.cuCtxSynchronize", where(next_dlsym(drv, "cuCtxSynchronize")));

    /* From the library loaded RTLD_LOCAL: glibc searches its own local scope too, so RTLD_DEFAULT
     * finds its own symbol there; a dlsym that made itself the caller would not. */
    say("lib.next.malloc", stable(lib_next, "malloc"));
    say("lib.next.dlsym", stable(lib_next, "dlsym"));
    say("lib.next.only_in_lib", stable(lib_next, "pitfall_only_here"));
    say("lib.default.only_in_lib", stable(lib_default, "pitfall_only_here"));
    say("lib.default.malloc", stable(lib_default, "malloc"));
    say("lib.handle.cuCtxSynchronize", where(lib_handle(drv, "cuCtxSynchronize")));
    say("lib.handle.only_in_lib", where(lib_handle(lib, "pitfall_only_here")));
}

/* Names that are not driver functions the tracer wraps pass through untouched, even when they start
 * with "cu" (cuDNN 9 recursed forever under an interposer that matched every cu* name). */
static void passthrough(void)
{
    static const char *const absent[] = {"cudnnCreate", "cublasCreate_v2", "cublasLtCreate", "cufftPlan1d",
                                         "cudaMalloc", "cuMemAllocNoSuchAbi", "cuda", "cu", ""};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        char key[128];
        snprintf(key, sizeof key, "handle.%s", absent[i]);
        say(key, where(dlsym(drv, absent[i])));
    }
    /* cuGetExportTable: the driver's own function, and the same table from it. */
    CUresult (*export_table)(const void **, const CUuuid *) =
        (CUresult(*)(const void **, const CUuuid *))dlsym(drv, "cuGetExportTable");
    CHECK(export_table != NULL);
    say("handle.cuGetExportTable", where((void *)export_table));
    CUuuid id;
    memset(&id, 0x5a, sizeof id);
    const void *table = NULL;
    say_int("cuGetExportTable.rc", export_table(&table, &id));
    say("cuGetExportTable.table", where(table));
    void *via_gpa = drv_get("cuGetExportTable", 3000, 0);
    say("gpa.cuGetExportTable", where(via_gpa));
    say_int("gpa.cuGetExportTable.same_as_dlsym", via_gpa == (void *)export_table);

    /* A driver function the tracer does not wrap: the driver's pointer, whichever door. */
    void *sync_dlsym = dlsym(drv, "cuCtxSynchronize");
    void *sync_gpa = drv_get("cuCtxSynchronize", 2000, 0);
    say("handle.cuCtxSynchronize", where(sync_dlsym));
    say("gpa.cuCtxSynchronize", where(sync_gpa));
    say_int("gpa.cuCtxSynchronize.same_as_dlsym", sync_gpa == sync_dlsym);
    say_int("gpa.cuCtxSynchronize.rc", ((CUresult(*)(void))sync_gpa)());
}

/* cuGetProcAddress's failures and odd arguments, exactly as the driver answers them. */
static void procaddress(void)
{
    static const struct {
        const char *key, *name;
        int version;
        cuuint64_t flags;
    } q[] = {
        {"gpa.probe", "", 0, 0}, /* cudart's first call */
        {"gpa.newer_than_driver", "cuMemAlloc", 99999, 0},
        {"gpa.newer_than_driver_ptsz", "cuMemAllocAsync", 99999, PTDS},
        {"gpa.too_old", "cuMemAlloc", 2000, 0}, /* only the v1 ABI there, which is not exported */
        {"gpa.unknown", "cuNoSuchFunction", 12000, 0},
        {"gpa.cudnn", "cudnnCreate", 12000, 0},
        {"gpa.bad_flags", "cuMemAlloc", 12000, 3}, /* both stream flags at once */
        {"gpa.unknown_flag", "cuMemAlloc", 12000, 8},
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        void *p = (void *)1; /* must come back NULL on failure */
        CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
        CUresult r = drv_gpa(q[i].name, &p, q[i].version, q[i].flags, &st);
        printf("%s rc=%d pfn=%s status=%d\n", q[i].key, (int)r, p == (void *)1 ? "untouched" : where(p), (int)st);
    }
    /* NULL symbolStatus (cudart passes it) and NULL pfn. */
    void *p = NULL;
    say_int("gpa.null_status.rc", drv_gpa("cuMemAlloc", &p, 3020, 0, NULL));
    say_int("gpa.null_status.found", p != NULL);
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
    say_int("gpa.null_pfn.rc", drv_gpa("cuMemAlloc", NULL, 3020, 0, &st));
    say_int("gpa.null_pfn.status", st);
    say_int("gpa.null_symbol.rc", drv_gpa(NULL, &p, 3020, 0, &st));
    /* The 4-argument ABI as the driver exports it, taken with dlsym. */
    gpa4_fn gpa4 = (gpa4_fn)dlsym(drv, "cuGetProcAddress");
    CHECK(gpa4 != NULL);
    p = (void *)1;
    say_int("gpa4.newer_than_driver.rc", gpa4("cuMemAlloc", &p, 99999, 0));
    say_int("gpa4.newer_than_driver.null", p == NULL);
    say_int("gpa4.null_pfn.rc", gpa4("cuMemAlloc", NULL, 3020, 0));
    p = (void *)1;
    say_int("gpa4.probe.rc", gpa4("", &p, 0, 0));
    say_int("gpa4.probe.null", p == NULL);
}

/* NULL out-parameters, NULL and zero arguments, through the pointers cuGetProcAddress hands out (the
 * tracer's wrappers when traced): the driver's answer comes back and nothing is recorded. */
static void null_arguments(void)
{
    GET(info, cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0);
    say("gpa.cuMemGetInfo", where((void *)info));
    size_t total = 0, fr = 0;
    say_int("cuMemGetInfo.null_free.rc", info(NULL, &total));
    say_int("cuMemGetInfo.null_free.total", (long long)total);
    say_int("cuMemGetInfo.null_total.rc", info(&fr, NULL));
    say_int("cuMemGetInfo.null_total.free", (long long)fr);
    say_int("cuMemGetInfo.null_both.rc", info(NULL, NULL));

    GET(alloc, cuMemAlloc_v2, "cuMemAlloc", 3020, 0);
    GET(pitch, cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0);
    GET(managed, cuMemAllocManaged, "cuMemAllocManaged", 6000, 0);
    GET(mfree, cuMemFree_v2, "cuMemFree", 3020, 0);
    GET(aa, cuMemAllocAsync, "cuMemAllocAsync", 11020, 0);
    GET(aa_pt, cuMemAllocAsync, "cuMemAllocAsync", 11020, PTDS);
    GET(ap, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0);
    GET(fa, cuMemFreeAsync, "cuMemFreeAsync", 11020, 0);
    GET(fa_pt, cuMemFreeAsync, "cuMemFreeAsync", 11020, PTDS);
    GET(default_pool, cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020, 0);
    GET(create, cuMemCreate, "cuMemCreate", 12000, 0);
    GET(release, cuMemRelease, "cuMemRelease", 12000, 0);
    GET(retain, cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", 12000, 0);
    GET(unmap, cuMemUnmap, "cuMemUnmap", 12000, 0);
    GET(import, cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", 12000, 0);
    GET(array2d, cuArrayCreate_v2, "cuArrayCreate", 3020, 0);
    GET(array3d, cuArray3DCreate_v2, "cuArray3DCreate", 3020, 0);
    GET(mipmap, cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, 0);
    GET(array_destroy, cuArrayDestroy, "cuArrayDestroy", 2000, 0);
    GET(alloc_host, cuMemAllocHost_v2, "cuMemAllocHost", 3020, 0);
    GET(host_alloc, cuMemHostAlloc, "cuMemHostAlloc", 2020, 0);
    GET(free_host, cuMemFreeHost, "cuMemFreeHost", 2000, 0);
    GET(reg, cuMemHostRegister_v2, "cuMemHostRegister", 6050, 0);
    GET(unreg, cuMemHostUnregister, "cuMemHostUnregister", 4000, 0);
    GET(ipc_open, cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle", 11000, 0);
    GET(ipc_close, cuIpcCloseMemHandle, "cuIpcCloseMemHandle", 4010, 0);

    CUdeviceptr d = 0;
    size_t pp = 0;
    CUmemoryPool pool;
    OK(default_pool(&pool, 0));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    CUarray a = NULL;
    CUmipmappedArray m = NULL;
    CUDA_ARRAY_DESCRIPTOR d2 = {.Width = 16, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUipcMemHandle ih;
    memset(&ih, 0, sizeof ih);
    void *hp = NULL;

    say_int("null.cuMemAlloc", alloc(NULL, 4096));
    say_int("zero.cuMemAlloc", alloc(&d, 0));
    say_int("null.cuMemAllocPitch.pitch", pitch(&d, NULL, 64, 1, 4));
    say_int("null.cuMemAllocPitch.dptr", pitch(NULL, &pp, 64, 1, 4));
    say_int("null.cuMemAllocManaged", managed(NULL, 4096, CU_MEM_ATTACH_GLOBAL));
    say_int("null.cuMemAllocAsync", aa(NULL, 4096, NULL));
    say_int("null.cuMemAllocAsync_ptsz", aa_pt(NULL, 4096, NULL));
    say_int("null.cuMemAllocFromPoolAsync", ap(NULL, 4096, pool, NULL));
    say_int("null.cuMemCreate.handle", create(NULL, 2 * MiB, &prop, 0));
    say_int("null.cuMemCreate.prop", create(&h, 2 * MiB, NULL, 0));
    say_int("null.cuMemRetainAllocationHandle.handle", retain(NULL, (void *)(uintptr_t)0x600000000000ull));
    say_int("null.cuMemRetainAllocationHandle.addr", retain(&h, NULL));
    say_int("null.cuMemImportFromShareableHandle", import(NULL, (void *)(intptr_t)0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    say_int("bad.cuMemImportFromShareableHandle", import(&h, (void *)(intptr_t)-1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    say_int("null.cuArrayCreate.handle", array2d(NULL, &d2));
    say_int("null.cuArrayCreate.desc", array2d(&a, NULL));
    say_int("null.cuArray3DCreate.desc", array3d(&a, NULL));
    say_int("null.cuMipmappedArrayCreate.desc", mipmap(&m, NULL, 1));
    say_int("null.cuMemAllocHost", alloc_host(NULL, 4096));
    say_int("null.cuMemHostAlloc", host_alloc(NULL, 4096, 0));
    say_int("null.cuMemHostRegister", reg(NULL, 4096, 0));
    say_int("null.cuIpcOpenMemHandle", ipc_open(NULL, ih, 0));
    /* Frees of nothing: free(NULL) semantics where the driver has them, errors where it does not. */
    say_int("null.cuMemFree", mfree(0));
    say_int("null.cuMemFreeAsync", fa(0, NULL));
    say_int("null.cuMemFreeAsync_ptsz", fa_pt(0, NULL));
    say_int("null.cuMemFreeHost", free_host(NULL));
    say_int("null.cuMemHostUnregister", unreg(NULL));
    say_int("null.cuArrayDestroy", array_destroy(NULL));
    say_int("null.cuMemRelease", release(0));
    say_int("null.cuMemUnmap", unmap(0, 0));
    say_int("null.cuIpcCloseMemHandle", ipc_close(0));
    say_int("unknown.cuMemFree", mfree(0x1234));
    say_int("unknown.cuMemFreeHost", free_host(&hp));
    say_int("unknown.cuMemRelease", release(0x1234));
    size_t (*used)(int) = (size_t(*)(int))drv_sym("fakecuda_used_bytes");
    int (*live)(int) = (int (*)(int))drv_sym("fakecuda_live_count");
    say_int("driver.used", (long long)used(0));
    say_int("driver.live", live(0));
}

static int cmd_lookups(void)
{
    lib_open();
    caller_relative();
    passthrough();
    procaddress();
    null_arguments();
    dump("lookups"); /* traced: nothing was allocated, so nothing is live */
    return 0;
}

/* ---- routes: where the pointers lead ---- */

static void route(const char *key, const void *p)
{
    say(key, object_of(p));
}

static int cmd_routes(void)
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

static int cmd_refused(void)
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

static int cmd_refused_vmm(int unmap_it)
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

/* ---- threads: concurrent allocation through routed pointers ---- */

#define NTHREADS 16
#define HELD 8         /* allocations a thread holds at most while churning */
#define CHURN 20000    /* churn iterations per thread */
#define QUEUE_MAX 64   /* allocations waiting to be freed by another thread */
#define PHASE 8        /* allocations per thread in the measured phase */

typedef __typeof__(&cuMemAlloc_v2) alloc_fn;
typedef __typeof__(&cuMemFree_v2) free_fn;

static pthread_barrier_t barrier;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static CUdeviceptr queue[QUEUE_MAX];
static int queued;
static CUdeviceptr phase[NTHREADS][PHASE];
static alloc_fn t_alloc[2];
static free_fn t_free[2];
static unsigned long churn_allocs;

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Measured-phase sizes: distinct, and together far above anything the churn can hold (about 12 MiB at
 * most), so the peak is exactly their sum. */
static uint64_t phase_size(int t, int i)
{
    return (uint64_t)(t * PHASE + i + 1) * 64 * 1024 + (uint64_t)t * 512;
}

/* Another thread frees it, unless too many are waiting already. */
static int push(CUdeviceptr p)
{
    pthread_mutex_lock(&queue_lock);
    int ok = queued < QUEUE_MAX;
    if (ok)
        queue[queued++] = p;
    pthread_mutex_unlock(&queue_lock);
    return ok;
}

static CUdeviceptr pop(void)
{
    pthread_mutex_lock(&queue_lock);
    CUdeviceptr p = queued ? queue[--queued] : 0;
    pthread_mutex_unlock(&queue_lock);
    return p;
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    alloc_fn alloc = t_alloc[t & 1]; /* half through cuGetProcAddress, half through dlsym */
    free_fn mfree = t_free[t & 1];
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
    CUdeviceptr held[HELD];
    int n = 0;
    unsigned long allocs = 0;
    pthread_barrier_wait(&barrier); /* all start together, to overlap as much as they can */
    for (int it = 0; it < CHURN; it++) {
        uint64_t r = rng(&s);
        if (n < HELD && (r & 1 || n == 0)) {
            OK(alloc(&held[n++], 512 + (size_t)(r >> 16) % 65536));
            allocs++;
        } else {
            int k = (int)((r >> 8) % (uint64_t)n);
            CUdeviceptr p = held[k];
            held[k] = held[--n];
            if (!(r & 2) || !push(p))
                OK(mfree(p));
        }
        CUdeviceptr q;
        if (r & 4 && (q = pop()) != 0)
            OK(mfree(q));
    }
    while (n)
        OK(mfree(held[--n]));
    __atomic_add_fetch(&churn_allocs, allocs, __ATOMIC_RELAXED);
    pthread_barrier_wait(&barrier);
    for (CUdeviceptr q; (q = pop()) != 0;)
        OK(mfree(q));
    pthread_barrier_wait(&barrier); /* the churn left nothing... */
    pthread_barrier_wait(&barrier); /* ... which the main thread has checked */
    for (int i = 0; i < PHASE; i++)
        OK(alloc(&phase[t][i], phase_size(t, i)));
    pthread_barrier_wait(&barrier); /* everything allocated: the peak */
    pthread_barrier_wait(&barrier); /* the main thread has checked the driver */
    for (int i = 0; i < PHASE; i += 2)
        OK(mfree(phase[(t + 1) % NTHREADS][i])); /* a neighbour's memory */
    pthread_barrier_wait(&barrier);
    return NULL;
}

static int cmd_threads(void)
{
    size_t (*used)(int) = (size_t(*)(int))drv_sym("fakecuda_used_bytes");
    int (*live)(int) = (int (*)(int))drv_sym("fakecuda_live_count");
    t_alloc[0] = (alloc_fn)drv_get("cuMemAlloc", 3020, 0);
    t_free[0] = (free_fn)drv_get("cuMemFree", 3020, 0);
    t_alloc[1] = (alloc_fn)dlsym(drv, "cuMemAlloc_v2");
    t_free[1] = (free_fn)dlsym(drv, "cuMemFree_v2");
    CHECK(t_alloc[1] && t_free[1]);

    uint64_t peak = 0, remaining = 0;
    for (int t = 0; t < NTHREADS; t++)
        for (int i = 0; i < PHASE; i++) {
            peak += phase_size(t, i);
            if (i % 2)
                remaining += phase_size(t, i);
        }
    CHECK(pthread_barrier_init(&barrier, NULL, NTHREADS + 1) == 0);
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    CHECK(used(0) == 0 && live(0) == 0);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    CHECK(used(0) == peak && live(0) == NTHREADS * PHASE);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    CHECK(used(0) == remaining);
    printf("expect.peak %llu\n", (unsigned long long)peak);
    printf("expect.live %llu\n", (unsigned long long)remaining);
    printf("expect.count %d\n", NTHREADS * PHASE / 2);
    printf("fake.used %llu\n", (unsigned long long)used(0));
    printf("fake.live %d\n", live(0));
    printf("churn.allocs %lu\n", churn_allocs);
    dump("threads");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pitfalls lookups|routes|threads|refused\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    drv_open();
    if (strcmp(argv[1], "lookups") == 0)
        return cmd_lookups();
    if (strcmp(argv[1], "routes") == 0)
        return cmd_routes();
    if (strcmp(argv[1], "threads") == 0)
        return cmd_threads();
    if (strcmp(argv[1], "refused") == 0)
        return cmd_refused();
    if (strcmp(argv[1], "refused-release") == 0)
        return cmd_refused_vmm(0);
    if (strcmp(argv[1], "refused-unmap") == 0)
        return cmd_refused_vmm(1);
    fprintf(stderr, "pitfalls: unknown sub-command %s\n", argv[1]);
    return 2;
}
