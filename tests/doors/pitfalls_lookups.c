/* pitfalls lookups (pitfalls.c): dlsym(RTLD_NEXT / RTLD_DEFAULT) from the program and from a library
 * loaded RTLD_LOCAL, lookups the tracer must not touch, cuGetProcAddress's failures, NULL arguments. */
#include <limits.h>
#include <unistd.h>

#include "pitfalls.h"

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

int cmd_lookups(void)
{
    lib_open();
    caller_relative();
    passthrough();
    procaddress();
    null_arguments();
    dump("lookups"); /* traced: nothing was allocated, so nothing is live */
    return 0;
}
