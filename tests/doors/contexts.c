/* A context's end frees what was made in it (walk 8 #28). Each sub-command ends a context one way and then
 * asks for memory that fits only if the driver took the ended context's memory back; the program checks
 * the driver's side itself (fakecuda_used_bytes) and prints it, so an untraced and a traced run print the
 * same lines, and the snapshots (dump("label")) must agree with them (tests/e2e/test_contexts.c).
 *
 *   contexts destroy    a created context beside another one on device 0: cuCtxDestroy frees its 2 x 300
 *                       MiB, managed, pitched, array and pinned host memory, not its stream-ordered pool
 *                       memory nor its cuMemCreate memory; then 900 MiB in a new context
 *   contexts reset      the primary context: 2 x 300 MiB, cuDevicePrimaryCtxReset, then 900 MiB
 *   contexts release    the primary context retained twice: the first release keeps its 300 MiB, the
 *                       last one frees them; then 900 MiB
 *   contexts destroy-v1, reset-v1, release-v1
 *                       the same through each end's older ABI (cuCtxDestroy before 4.0, the primary
 *                       context's release and reset before 11.0): CUDA 13's static cudart asks for
 *                       ("cuDevicePrimaryCtxReset", 7000), a function of its own beside the _v2 one
 *
 * Run with the stand-in driver (FAKECUDA_CAPACITY=1G: the default). */
#include "drv.h"

/* cuda.h of CUDA 13 names only cuCtxCreate_v4; the ABI asked for at 3020 is the 3-argument one. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

static size_t (*used)(int);
static size_t (*host_used)(void);

static void say(const char *key, unsigned long long v)
{
    printf("%s %llu\n", key, v);
}

static int v1; /* the ends' older ABIs */

static int cmd_destroy(void)
{
    GET(create, cuCtxCreate_v2, "cuCtxCreate", 3020, 0);
    GET(destroy, cuCtxDestroy_v2, "cuCtxDestroy", v1 ? 3020 : 4000, 0);
    GET(alloc, cuMemAlloc_v2, "cuMemAlloc", 3020, 0);
    GET(pitch, cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0);
    GET(managed, cuMemAllocManaged, "cuMemAllocManaged", 6000, 0);
    GET(host_alloc, cuMemHostAlloc, "cuMemHostAlloc", 2020, 0);
    GET(array, cuArrayCreate_v2, "cuArrayCreate", 3020, 0);
    GET(alloc_async, cuMemAllocAsync, "cuMemAllocAsync", 11020, 0);
    GET(mem_create, cuMemCreate, "cuMemCreate", 12000, 0);
    GET(set_current, cuCtxSetCurrent, "cuCtxSetCurrent", 4000, 0);

    /* Another context on the same device, made first: its memory is not the destroyed one's. */
    CUcontext keep, gone, next;
    OK(create(&keep, 0, 0));
    CUdeviceptr k;
    OK(alloc(&k, 100 * MiB));

    OK(create(&gone, 0, 0));
    CUdeviceptr a, b, p, m, q;
    size_t pp;
    void *h;
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 1024, .Height = 256, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    OK(alloc(&a, 300 * MiB));
    OK(alloc(&b, 300 * MiB));
    OK(pitch(&p, &pp, 1024, 1024, 4));               /* 1 MiB */
    OK(managed(&m, 4 * MiB, CU_MEM_ATTACH_GLOBAL));
    OK(host_alloc(&h, 1 * MiB, 0));                   /* pinned host memory: no device bytes */
    OK(array(&arr, &d));                              /* 1024*256*4 = 1 MiB */
    OK(alloc_async(&q, 2 * MiB, NULL));              /* the default pool's: belongs to no context */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle vh;
    OK(mem_create(&vh, 2 * MiB, &prop, 0));          /* cuMemCreate's: belongs to no context */
    CHECK(used(0) == 100 * MiB + 600 * MiB + 1 * MiB + 4 * MiB + 1 * MiB + 2 * MiB + 2 * MiB);
    CHECK(host_used() == 1 * MiB);
    say("used-before", used(0));
    dump("destroy-before");

    OK(destroy(gone));
    say("used-after-destroy", used(0));
    CHECK(used(0) == 100 * MiB + 2 * MiB + 2 * MiB);  /* the other context's, the pool's, cuMemCreate's */
    CHECK(host_used() == 0);
    dump("destroy-after");

    OK(create(&next, 0, 0));
    CUdeviceptr big;
    OK(alloc(&big, 900 * MiB));                      /* fits only if the 600 MiB came back */
    say("used-end", used(0));
    dump("destroy-next");
    OK(set_current(keep));
    return 0;
}

static int cmd_reset(void)
{
    GET(retain, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0);
    GET(reset, cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", v1 ? 7000 : 11000, 0);
    GET(set_current, cuCtxSetCurrent, "cuCtxSetCurrent", 4000, 0);
    GET(alloc, cuMemAlloc_v2, "cuMemAlloc", 3020, 0);

    CUcontext c;
    OK(retain(&c, 0));
    OK(set_current(c));
    CUdeviceptr a, b, big;
    OK(alloc(&a, 300 * MiB)); /* phase 1 */
    OK(alloc(&b, 300 * MiB));
    say("used-before", used(0));
    dump("reset-before");
    OK(reset(0)); /* what cudaDeviceReset does */
    say("used-after-reset", used(0));
    CHECK(used(0) == 0);
    dump("reset-after");
    OK(retain(&c, 0)); /* phase 2, as the runtime starts again */
    OK(set_current(c));
    OK(alloc(&big, 900 * MiB));
    say("used-end", used(0));
    dump("reset-next");
    return 0;
}

static int cmd_release(void)
{
    GET(retain, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0);
    /* the other door: dlsym on the driver's handle */
    __typeof__(&cuDevicePrimaryCtxRelease_v2) release =
        (__typeof__(release))drv_sym(v1 ? "cuDevicePrimaryCtxRelease" : "cuDevicePrimaryCtxRelease_v2");
    GET(set_current, cuCtxSetCurrent, "cuCtxSetCurrent", 4000, 0);
    GET(alloc, cuMemAlloc_v2, "cuMemAlloc", 3020, 0);

    CUcontext c;
    OK(retain(&c, 0));
    OK(retain(&c, 0));
    OK(set_current(c));
    CUdeviceptr a, big;
    OK(alloc(&a, 300 * MiB));
    OK(release(0)); /* one reference left: the context lives on */
    CHECK(used(0) == 300 * MiB);
    dump("release-one");
    OK(release(0)); /* the last one: the context is reset */
    say("used-after-release", used(0));
    CHECK(used(0) == 0);
    dump("release-last");
    OK(retain(&c, 0));
    OK(set_current(c));
    OK(alloc(&big, 900 * MiB));
    say("used-end", used(0));
    dump("release-next");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: contexts destroy|reset|release[-v1]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    drv_open();
    used = (size_t(*)(int))drv_sym("fakecuda_used_bytes");
    host_used = (size_t(*)(void))drv_sym("fakecuda_host_bytes");
    GET(init, cuInit, "cuInit", 2000, 0);
    OK(init(0));
    size_t n = strlen(argv[1]);
    if (n > 3 && strcmp(argv[1] + n - 3, "-v1") == 0) {
        v1 = 1;
        argv[1][n - 3] = '\0';
    }
    if (strcmp(argv[1], "destroy") == 0)
        return cmd_destroy();
    if (strcmp(argv[1], "reset") == 0)
        return cmd_reset();
    if (strcmp(argv[1], "release") == 0)
        return cmd_release();
    fprintf(stderr, "contexts: unknown sub-command %s\n", argv[1]);
    return 2;
}
