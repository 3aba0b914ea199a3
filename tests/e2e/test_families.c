/* Every allocation family, against the stand-in driver: tests/doors/families.c runs one family per
 * sub-command and dumps at known points, and each snapshot must hold exactly the bytes, categories, API
 * ids, flags, pools and failures that the family implies. The program checks the driver's side (the
 * fake's own totals) and prints the handles and addresses it got ("key 0x..."), which the records must
 * carry. Sizes are from the comments in families.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"

#define GiB (1024 * MiB)
#define PROG "build/tests/families"

static struct traced_run run;
static struct loaded_run snaps;

/* Runs one sub-command traced; it must behave exactly as untraced (status 0: every driver-side check in
 * the program held) and leave `nsnaps` snapshots. */
static void run_family(const char *cmd, size_t nsnaps)
{
    traced_run_capture(&run, (char *const[]){PROG, (char *)cmd, NULL}, NULL);
    assert_int_equal(run.status, 0);
    assert_int_equal(run.nsnaps, nsnaps);
    load_all(&snaps, &run);
}

static int teardown(void **st)
{
    (void)st;
    unload_all(&snaps);
    traced_cleanup(&run);
    return 0;
}

static const struct snap_device *dev0(const struct loaded *l)
{
    const struct snap_device *d = ot_snapshot_device(&l->s, 0);
    assert_non_null(d);
    return d;
}

/* Device 0's live bytes per category, every category: want[c] for category c (unset ones are 0). Host
 * pinned and imported bytes are listed there but never enter tracked_bytes. */
static void expect_device(const struct loaded *l, const uint64_t want[OT_CAT_COUNT], uint64_t peak)
{
    const struct snap_device *d = dev0(l);
    assert_int_equal(d->ncat, OT_CAT_COUNT);
    uint64_t own = 0;
    for (unsigned c = 0; c < OT_CAT_COUNT; c++) {
        if (d->by_category[c] != want[c])
            fail_msg("device 0, category %s: %llu bytes, expected %llu", ot_category_name(c),
                     (unsigned long long)d->by_category[c], (unsigned long long)want[c]);
        if (ot_category_is_device(c))
            own += want[c];
    }
    assert_int_equal(d->tracked_bytes, own);
    assert_int_equal(d->peak_bytes, peak);
    const struct ot_peak *p = ot_snapshot_peak(&l->s, 0);
    assert_non_null(p);
    assert_int_equal(p->peak_bytes, peak);
    assert_int_equal(sum_bytes(p->recs, p->count, true), peak); /* the peak's records add up to it */
}

/* cuMemGetInfo at the snapshot: the driver's view of this process's use of device 0. */
static void expect_driver_used(const struct loaded *l, uint64_t used)
{
    const struct snap_device *d = dev0(l);
    assert_true(d->flags & OT_DEV_MEMINFO_KNOWN);
    assert_int_equal(d->total_bytes, 1 * GiB);
    assert_int_equal(d->free_bytes, 1 * GiB - used);
}

/* The record a family's call must have made: device 0 unless given, flags exactly as given. */
static struct rec_match rec(uint64_t api, uint64_t category, uint64_t size, uint64_t address, uint64_t flags,
                            int64_t device)
{
    return (struct rec_match){.api = api, .category = category, .size = size, .address = address, .flags = flags,
                              .device = device};
}

/* Exactly one live record matching m. */
static void expect_live(const struct loaded *l, struct rec_match m)
{
    size_t n = count_recs(l->s.live, l->s.nlive, &m);
    if (n != 1)
        fail_msg("%zu live records with api %s, category %s, size %llu, address 0x%llx, device %lld, "
                 "flags %llu; expected 1",
                 n, ot_api_name64(m.api), ot_category_name64(m.category), (unsigned long long)m.size,
                 (unsigned long long)m.address, (long long)m.device, (unsigned long long)m.flags);
}

static const struct snap_pool *pool_by_handle(const struct loaded *l, uint64_t handle)
{
    for (size_t i = 0; i < l->s.npools; i++)
        if (l->s.pools[i].handle == handle)
            return &l->s.pools[i];
    fail_msg("no pool 0x%llx in POOLS", (unsigned long long)handle);
    return NULL;
}

static const struct snap_pool *default_pool(const struct loaded *l)
{
    const struct snap_pool *found = NULL;
    for (size_t i = 0; i < l->s.npools; i++)
        if (l->s.pools[i].flags & OT_POOL_DEFAULT) {
            assert_null(found);
            found = &l->s.pools[i];
        }
    assert_non_null(found);
    return found;
}

static void expect_pool(const struct snap_pool *p, uint64_t reserved, uint64_t used)
{
    assert_int_equal(p->device, 0);
    assert_false(p->flags & OT_POOL_UNREADABLE);
    assert_int_equal(p->reserved_bytes, reserved);
    assert_int_equal(p->used_bytes, used);
}

static void expect_failure(const struct loaded *l, uint64_t api, uint64_t category, uint64_t bytes)
{
    const struct ot_snapshot *s = &l->s;
    assert_int_equal(s->meta.trigger, OT_TRIGGER_OOM);
    assert_true(s->has_failure);
    assert_int_equal(s->failure.api, api);
    assert_int_equal(s->failure.category, category);
    assert_int_equal(s->failure.device, 0);
    assert_int_equal(s->failure.requested_bytes, bytes);
    assert_int_equal(s->failure.result_code, 2); /* CUDA_ERROR_OUT_OF_MEMORY */
    assert_int_equal(count_events(s, OT_EV_FAILED, api, 0, NULL), 1);
}

/* cuMemAlloc_v2, cuMemAllocPitch_v2 (the pitched size), cuMemAllocManaged, cuMemFree_v2. */
static void test_device_memory(void **st)
{
    (void)st;
    run_family("device", 2);
    const uint64_t A = 3 * MiB + 1000, P = 1024 * 300, M = 5 * MiB;

    struct loaded *l = by_reason(&snaps, "device-live");
    assert_int_equal(l->s.meta.trigger, OT_TRIGGER_API);
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_DEVICE] = A + P, [OT_CAT_MANAGED] = M}, A + P + M);
    expect_driver_used(l, A + P + M);
    assert_int_equal(l->s.nlive, 3);
    expect_live(l, rec(OT_API_cuMemAlloc_v2, OT_CAT_DEVICE, A, run_u64(&run, "alloc"), 0, 0));
    expect_live(l, rec(OT_API_cuMemAllocPitch_v2, OT_CAT_DEVICE, P, run_u64(&run, "pitch"), 0, 0));
    expect_live(l, rec(OT_API_cuMemAllocManaged, OT_CAT_MANAGED, M, run_u64(&run, "managed"), 0, 0));
    assert_int_equal(ot_snapshot_peak(&l->s, 0)->count, 3);

    l = by_reason(&snaps, "device-freed");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_MANAGED] = M}, A + P + M);
    expect_driver_used(l, M);
    assert_int_equal(l->s.nlive, 1);
    expect_live(l, rec(OT_API_cuMemAllocManaged, OT_CAT_MANAGED, M, run_u64(&run, "managed"), 0, 0));
    assert_int_equal(ot_snapshot_peak(&l->s, 0)->count, 3); /* freed since, but live at the peak */
    uint64_t bytes;
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemFree_v2, 0, &bytes), 2);
    assert_int_equal(bytes, A + P);
}

/* cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync and their _ptsz twins, each with its own API
 * id; a free returns memory to its pool, so it leaves LIVE but stays in the pool's reserved bytes. */
static void test_stream_ordered(void **st)
{
    (void)st;
    run_family("async", 5);
    const uint64_t pool = run_u64(&run, "pool");
    const uint64_t a1 = run_u64(&run, "a1"), a2 = run_u64(&run, "a2");
    const uint64_t p1 = run_u64(&run, "p1"), p2 = run_u64(&run, "p2");

    struct loaded *l = by_reason(&snaps, "async-live");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_ASYNC] = 15 * MiB}, 15 * MiB);
    expect_driver_used(l, 16 * MiB); /* the driver charged the pools' reservations */
    assert_int_equal(l->s.nlive, 4);
    expect_live(l, rec(OT_API_cuMemAllocAsync, OT_CAT_ASYNC, 3 * MiB, a1, 0, 0));
    expect_live(l, rec(OT_API_cuMemAllocAsync_ptsz, OT_CAT_ASYNC, 1 * MiB, a2, 0, 0));
    expect_live(l, rec(OT_API_cuMemAllocFromPoolAsync, OT_CAT_ASYNC, 5 * MiB, p1, 0, 0));
    expect_live(l, rec(OT_API_cuMemAllocFromPoolAsync_ptsz, OT_CAT_ASYNC, 6 * MiB, p2, 0, 0));
    assert_int_equal(l->s.npools, 2);
    expect_pool(default_pool(l), 4 * MiB, 4 * MiB);
    expect_pool(pool_by_handle(l, pool), 12 * MiB, 11 * MiB);
    assert_int_equal(pool_by_handle(l, pool)->flags, 0);

    l = by_reason(&snaps, "async-freed");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_ASYNC] = 6 * MiB}, 15 * MiB);
    expect_driver_used(l, 16 * MiB);
    assert_int_equal(l->s.nlive, 2);
    expect_live(l, rec(OT_API_cuMemAllocAsync_ptsz, OT_CAT_ASYNC, 1 * MiB, a2, 0, 0));
    expect_live(l, rec(OT_API_cuMemAllocFromPoolAsync, OT_CAT_ASYNC, 5 * MiB, p1, 0, 0));
    expect_pool(default_pool(l), 4 * MiB, 1 * MiB);
    expect_pool(pool_by_handle(l, pool), 12 * MiB, 5 * MiB);
    uint64_t bytes;
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemFreeAsync, a1, &bytes), 1);
    assert_int_equal(bytes, 3 * MiB);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemFreeAsync_ptsz, p2, &bytes), 1);
    assert_int_equal(bytes, 6 * MiB);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, 0, 0, NULL), 2);

    l = by_reason(&snaps, "async-trimmed");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_ASYNC] = 6 * MiB}, 15 * MiB);
    expect_driver_used(l, 10 * MiB);
    expect_pool(default_pool(l), 4 * MiB, 1 * MiB);
    expect_pool(pool_by_handle(l, pool), 6 * MiB, 5 * MiB);

    /* Out of memory in the default pool's entry point, then in the _ptsz twin of the pool's. */
    l = by_reason(&snaps, "cuMemAllocAsync");
    expect_failure(l, OT_API_cuMemAllocAsync, OT_CAT_ASYNC, 2 * GiB);
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_ASYNC] = 6 * MiB}, 15 * MiB);
    assert_int_equal(l->s.nlive, 2);
    l = by_reason(&snaps, "cuMemAllocFromPoolAsync_ptsz");
    expect_failure(l, OT_API_cuMemAllocFromPoolAsync_ptsz, OT_CAT_ASYNC, 1 * GiB);
    expect_pool(pool_by_handle(l, pool), 6 * MiB, 5 * MiB);
}

/* cuMemCreate on the device and on the host, cuMemMap/cuMemUnmap, NCCL's retain + release twice,
 * PyTorch's expandable segments, release-before-unmap, reservations, and a failing cuMemCreate. */
static void test_vmm(void **st)
{
    (void)st;
    run_family("vmm", 9);
    const uint64_t hd = run_u64(&run, "hd"), hh = run_u64(&run, "hh"), va = run_u64(&run, "va");
    const uint64_t seg = run_u64(&run, "seg"), hs = run_u64(&run, "hs");
    const uint64_t h[3] = {run_u64(&run, "h0"), run_u64(&run, "h1"), run_u64(&run, "h2")};

    /* Device-located memory is the device's; host-located is the host's (device -1, flag 0x2). A 64 MiB
     * address reservation takes nothing. */
    struct loaded *l = by_reason(&snaps, "vmm-created");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_VMM] = 4 * MiB}, 4 * MiB);
    expect_driver_used(l, 4 * MiB);
    assert_int_equal(l->s.nlive, 2);
    expect_live(l, rec(OT_API_cuMemCreate, OT_CAT_VMM, 4 * MiB, hd, 0, 0));
    expect_live(l, rec(OT_API_cuMemCreate, OT_CAT_VMM, 2 * MiB, hh, OT_REC_HOST_LOCATION, -1));
    assert_int_equal(l->s.ndevices, 1); /* the host is not a device */
    assert_int_equal(count_events(&l->s, OT_EV_ALLOC, 0, 0, NULL), 2);

    l = by_reason(&snaps, "vmm-mapped");
    assert_int_equal(l->s.nmappings, 1);
    assert_int_equal(l->s.mappings[0].address, va);
    assert_int_equal(l->s.mappings[0].size, 4 * MiB);
    assert_int_equal(l->s.mappings[0].handle, hd);
    assert_int_equal(l->s.mappings[0].offset, 0);
    assert_int_equal(count_events(&l->s, OT_EV_MAP, OT_API_cuMemMap, va, NULL), 1);

    /* NCCL: after retain + release, one reference and the mapping remain. */
    l = by_reason(&snaps, "nccl-released-once");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_VMM] = 4 * MiB}, 4 * MiB);
    expect_live(l, rec(OT_API_cuMemCreate, OT_CAT_VMM, 4 * MiB, hd, 0, 0));
    assert_int_equal(count_events(&l->s, OT_EV_FREE, 0, hd, NULL), 0);

    /* ... and the second release frees it: exactly once. */
    l = by_reason(&snaps, "nccl-freed");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){0}, 4 * MiB);
    expect_driver_used(l, 0);
    assert_int_equal(l->s.nlive, 1);
    assert_int_equal(l->s.nmappings, 0);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, 0, hd, NULL), 1);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemRelease, hd, NULL), 1);

    /* PyTorch: three 2 MiB segments mapped side by side in one reservation. */
    l = by_reason(&snaps, "expandable-grown");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_VMM] = 6 * MiB}, 6 * MiB);
    expect_driver_used(l, 6 * MiB);
    assert_int_equal(l->s.nlive, 4);
    assert_int_equal(l->s.nmappings, 3);
    for (int i = 0; i < 3; i++) {
        expect_live(l, rec(OT_API_cuMemCreate, OT_CAT_VMM, 2 * MiB, h[i], 0, 0));
        bool mapped = false;
        for (size_t k = 0; k < l->s.nmappings; k++)
            mapped |= l->s.mappings[k].address == seg + (uint64_t)i * 2 * MiB && l->s.mappings[k].handle == h[i] &&
                      l->s.mappings[k].size == 2 * MiB;
        assert_true(mapped);
    }
    assert_int_equal(ot_snapshot_peak(&l->s, 0)->count, 3);

    l = by_reason(&snaps, "expandable-shrunk");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_VMM] = 2 * MiB}, 6 * MiB);
    expect_driver_used(l, 2 * MiB);
    expect_live(l, rec(OT_API_cuMemCreate, OT_CAT_VMM, 2 * MiB, h[0], 0, 0));
    for (int i = 1; i < 3; i++)
        assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemRelease, h[i], NULL), 1);
    assert_int_equal(l->s.nmappings, 1);

    /* Released while mapped: the mapping holds the memory... */
    l = by_reason(&snaps, "map-then-release");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_VMM] = 2 * MiB}, 6 * MiB);
    expect_live(l, rec(OT_API_cuMemCreate, OT_CAT_VMM, 2 * MiB, hs, 0, 0));
    assert_int_equal(count_events(&l->s, OT_EV_FREE, 0, hs, NULL), 0);

    l = by_reason(&snaps, "cuMemCreate");
    expect_failure(l, OT_API_cuMemCreate, OT_CAT_VMM, 2 * GiB);

    /* ... and the unmap frees it. Every handle was freed exactly once; reservations left no event. */
    l = by_reason(&snaps, "vmm-end");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){0}, 6 * MiB);
    expect_driver_used(l, 0);
    assert_int_equal(l->s.nlive, 0);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemUnmap, hs, NULL), 1);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemRelease, hh, NULL), 1);
    const uint64_t all[] = {hd, hh, h[0], h[1], h[2], hs};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        assert_int_equal(count_events(&l->s, OT_EV_FREE, 0, all[i], NULL), 1);
    assert_int_equal(count_events(&l->s, OT_EV_ALLOC, 0, 0, NULL), 6);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, 0, 0, NULL), 6);
    for (uint64_t kind = OT_EV_ALLOC; kind <= OT_EV_UNMAP; kind++) {
        assert_int_equal(count_events(&l->s, kind, OT_API_cuMemAddressReserve, 0, NULL), 0);
        assert_int_equal(count_events(&l->s, kind, OT_API_cuMemAddressFree, 0, NULL), 0);
    }
}

/* cuMemImportFromShareableHandle and cuIpcOpenMemHandle_v2: imported, never this process's own bytes;
 * the import's size is learnt from its mapping, the IPC mapping's from cuMemGetAddressRange (the
 * exporter's 8 MiB), or one byte flagged as estimated when the driver does not answer (sized = false). */
static void imports(const char *cmd, bool sized)
{
    const uint64_t ipc = sized ? 8 * MiB : 1;
    const uint16_t ipc_flags = sized ? 0 : OT_REC_SIZE_ESTIMATED;
    run_family(cmd, 3);
    const uint64_t h = run_u64(&run, "h"), hi = run_u64(&run, "hi");
    const uint64_t d = run_u64(&run, "d"), o = run_u64(&run, "o");

    struct loaded *l = by_reason(&snaps, "imported");
    expect_device(l,
                  (uint64_t[OT_CAT_COUNT]){[OT_CAT_DEVICE] = 8 * MiB, [OT_CAT_VMM] = 4 * MiB, [OT_CAT_IMPORTED] = 1 + ipc},
                  12 * MiB);
    expect_driver_used(l, 12 * MiB);
    assert_int_equal(l->s.nlive, 4);
    expect_live(l, rec(OT_API_cuMemCreate, OT_CAT_VMM, 4 * MiB, h, 0, 0));
    expect_live(l, rec(OT_API_cuMemAlloc_v2, OT_CAT_DEVICE, 8 * MiB, d, 0, 0));
    expect_live(l, rec(OT_API_cuMemImportFromShareableHandle, OT_CAT_IMPORTED, 1, hi, OT_REC_SIZE_ESTIMATED, 0));
    expect_live(l, rec(OT_API_cuIpcOpenMemHandle_v2, OT_CAT_IMPORTED, ipc, o, ipc_flags, 0));
    const struct ot_peak *p = ot_snapshot_peak(&l->s, 0);
    assert_int_equal(count_recs(p->recs, p->count, &(struct rec_match){.category = OT_CAT_IMPORTED, .any_device = true,
                                                                       .any_flags = true}),
                     0);

    l = by_reason(&snaps, "imported-mapped");
    expect_device(l,
                  (uint64_t[OT_CAT_COUNT]){[OT_CAT_DEVICE] = 8 * MiB, [OT_CAT_VMM] = 4 * MiB,
                                           [OT_CAT_IMPORTED] = 4 * MiB + ipc},
                  12 * MiB);
    expect_live(l, rec(OT_API_cuMemImportFromShareableHandle, OT_CAT_IMPORTED, 4 * MiB, hi, OT_REC_SIZE_ESTIMATED, 0));

    l = by_reason(&snaps, "import-released");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_DEVICE] = 8 * MiB, [OT_CAT_VMM] = 4 * MiB}, 12 * MiB);
    expect_driver_used(l, 12 * MiB);
    assert_int_equal(l->s.nlive, 2);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemRelease, hi, NULL), 1);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuIpcCloseMemHandle, o, NULL), 1);
}

static void test_imports(void **st)
{
    (void)st;
    imports("import", true);
}

/* The same with the IPC handle opened through cuIpcOpenMemHandle's pre-11.0 ABI (cudart asks for both). */
static void test_imports_v1(void **st)
{
    (void)st;
    imports("import-v1", true);
}

/* The driver refuses cuMemGetAddressRange for the opened mapping: one byte, flagged as estimated. */
static void test_imports_unsized(void **st)
{
    (void)st;
    imports("import-unsized", false);
}

/* cuArrayCreate_v2, cuArray3DCreate_v2, cuMipmappedArrayCreate: the descriptor's size (every mip level,
 * layers kept), flagged as estimated; the driver charges the same. */
static void test_arrays(void **st)
{
    (void)st;
    run_family("arrays", 2);
    const uint64_t A2 = 480000, A1 = 777, A3 = 65536, M = 87296, ML = 129024, ALL = A2 + A1 + A3 + M + ML;

    struct loaded *l = by_reason(&snaps, "arrays");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_ARRAY] = ALL}, ALL);
    expect_driver_used(l, ALL);
    assert_int_equal(l->s.nlive, 5);
    const uint64_t est = OT_REC_SIZE_ESTIMATED;
    expect_live(l, rec(OT_API_cuArrayCreate_v2, OT_CAT_ARRAY, A2, run_u64(&run, "a2"), est, 0));
    expect_live(l, rec(OT_API_cuArrayCreate_v2, OT_CAT_ARRAY, A1, run_u64(&run, "a1"), est, 0));
    expect_live(l, rec(OT_API_cuArray3DCreate_v2, OT_CAT_ARRAY, A3, run_u64(&run, "a3"), est, 0));
    expect_live(l, rec(OT_API_cuMipmappedArrayCreate, OT_CAT_ARRAY, M, run_u64(&run, "m"), est, 0));
    expect_live(l, rec(OT_API_cuMipmappedArrayCreate, OT_CAT_ARRAY, ML, run_u64(&run, "ml"), est, 0));

    l = by_reason(&snaps, "arrays-destroyed");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){0}, ALL);
    expect_driver_used(l, 0);
    assert_int_equal(l->s.nlive, 0);
    uint64_t bytes;
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuArrayDestroy, 0, &bytes), 3);
    assert_int_equal(bytes, A2 + A1 + A3);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMipmappedArrayDestroy, 0, &bytes), 2);
    assert_int_equal(bytes, M + ML);
}

/* cuMemAllocHost_v2, cuMemHostAlloc, cuMemHostRegister_v2 and their frees: device -1, host_pinned, never
 * in a device's totals or peak. */
static void test_pinned_host(void **st)
{
    (void)st;
    run_family("host", 2);
    const uint64_t d = run_u64(&run, "d");

    struct loaded *l = by_reason(&snaps, "host");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_DEVICE] = 1 * MiB}, 1 * MiB);
    expect_driver_used(l, 1 * MiB);
    assert_int_equal(l->s.ndevices, 1);
    assert_int_equal(l->s.nlive, 4);
    expect_live(l, rec(OT_API_cuMemAlloc_v2, OT_CAT_DEVICE, 1 * MiB, d, 0, 0));
    expect_live(l, rec(OT_API_cuMemAllocHost_v2, OT_CAT_HOST_PINNED, 1 * MiB, run_u64(&run, "h1"), 0, -1));
    expect_live(l, rec(OT_API_cuMemHostAlloc, OT_CAT_HOST_PINNED, 3 * MiB, run_u64(&run, "h2"), 0, -1));
    expect_live(l,
                rec(OT_API_cuMemHostRegister_v2, OT_CAT_HOST_PINNED, 64 * 1024, run_u64(&run, "buf"), 0, -1));
    assert_int_equal(sum_bytes(l->s.live, l->s.nlive, true), 1 * MiB);
    assert_int_equal(ot_snapshot_peak(&l->s, 0)->count, 1);

    l = by_reason(&snaps, "host-freed");
    expect_device(l, (uint64_t[OT_CAT_COUNT]){[OT_CAT_DEVICE] = 1 * MiB}, 1 * MiB);
    assert_int_equal(l->s.nlive, 1);
    uint64_t bytes;
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemFreeHost, 0, &bytes), 2);
    assert_int_equal(bytes, 4 * MiB);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemHostUnregister, 0, &bytes), 1);
    assert_int_equal(bytes, 64 * 1024);
}

/* Each live record's stack: n frames, and whether the tracer says it cut it at OOMTRACE_DEPTH. */
static void expect_stacks(const struct loaded *l, size_t max_frames, bool truncated)
{
    assert_true(l->s.nlive > 0);
    for (size_t i = 0; i < l->s.nlive; i++) {
        const struct ot_stack *st = ot_snapshot_stack(&l->s, l->s.live[i].stack_id);
        assert_non_null(st);
        assert_true(st->nframes > 0 && st->nframes <= max_frames);
        assert_int_equal(!!(st->flags & OT_STACK_TRUNCATED), truncated);
    }
}

/* A backtrace deeper than OOMTRACE_DEPTH is kept to that depth and marked truncated; one that fits is not
 * marked. The device family's allocations sit under cmd_device, main and libc's start: more than 2. */
static void test_stack_truncated(void **st)
{
    (void)st;
    traced_run_capture(&run, (char *const[]){PROG, "device", NULL}, (const char *const[]){"OOMTRACE_DEPTH=2", NULL});
    assert_int_equal(run.status, 0);
    load_all(&snaps, &run);
    expect_stacks(by_reason(&snaps, "device-live"), 2, true);
    unload_all(&snaps);
    traced_cleanup(&run);

    run_family("device", 2);
    expect_stacks(by_reason(&snaps, "device-live"), 63, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_device_memory, teardown),
        cmocka_unit_test_teardown(test_stream_ordered, teardown),
        cmocka_unit_test_teardown(test_vmm, teardown),
        cmocka_unit_test_teardown(test_imports, teardown),
        cmocka_unit_test_teardown(test_imports_v1, teardown),
        cmocka_unit_test_teardown(test_imports_unsized, teardown),
        cmocka_unit_test_teardown(test_arrays, teardown),
        cmocka_unit_test_teardown(test_pinned_host, teardown),
        cmocka_unit_test_teardown(test_stack_truncated, teardown),
    };
    return cmocka_run_group_tests_name("families", tests, NULL, NULL);
}
