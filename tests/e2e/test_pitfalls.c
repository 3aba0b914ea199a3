/* The ways an interposer of the driver goes wrong, against the stand-in driver (tests/doors/pitfalls.c).
 * Where the tracer must be invisible, the program runs traced and untraced and must print the same
 * thing; where it must route, the pointers must lead into liboomtrace.so and the records must carry
 * the entry point's own API id; under 16 threads, the snapshot must equal the program's ground truth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"

#define GiB (1024 * MiB)
#define PROG "build/tests/pitfalls"

static struct traced_run traced, plain;
static struct loaded_run snaps;

static int teardown(void **st)
{
    (void)st;
    unload_all(&snaps);
    traced_cleanup(&traced);
    traced_cleanup(&plain);
    memset(&traced, 0, sizeof traced); /* a test that runs only one of them must not clean up twice */
    memset(&plain, 0, sizeof plain);
    return 0;
}

/* The sub-command, traced and untraced; both must succeed. */
static void run_both(const char *cmd, size_t nsnaps)
{
    char *const argv[] = {PROG, (char *)cmd, NULL};
    untraced_run(&plain, argv, NULL);
    assert_int_equal(plain.status, 0);
    assert_int_equal(plain.nsnaps, 0);
    traced_run_capture(&traced, argv, NULL);
    assert_int_equal(traced.status, 0);
    assert_int_equal(traced.nsnaps, nsnaps);
    load_all(&snaps, &traced);
}

static void want_value(const struct traced_run *r, const char *key, const char *want)
{
    const char *v = run_value(r, key);
    if (!v || strcmp(v, want) != 0)
        fail_msg("\"%s\" is \"%s\", expected \"%s\"", key, v ? v : "(absent)", want);
}

static void want_prefix(const struct traced_run *r, const char *key, const char *prefix)
{
    const char *v = run_value(r, key);
    if (!v || strncmp(v, prefix, strlen(prefix)) != 0)
        fail_msg("\"%s\" is \"%s\", expected \"%s...\"", key, v ? v : "(absent)", prefix);
}

/* Both runs printed the same value for key. */
static void want_same(const char *key)
{
    char a[512];
    const char *v = run_value(&plain, key);
    if (!v)
        fail_msg("the untraced run printed no \"%s\"", key);
    snprintf(a, sizeof a, "%s", v);
    want_value(&traced, key, a);
}

/* Caller-relative dlsym, pass-through names, cuGetProcAddress's failures and NULL arguments: every line
 * the program prints is the same with and without the tracer. */
static void test_lookups_as_untraced(void **st)
{
    (void)st;
    run_both("lookups", 1);
    /* Line by line, so a difference names its key. */
    size_t lines = 0;
    for (const char *line = plain.out; *line; lines++) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl);
        char key[256];
        size_t kn = strcspn(line, " \n");
        assert_true(kn < sizeof key);
        memcpy(key, line, kn);
        key[kn] = 0;
        want_same(key);
        line = nl + 1;
    }
    assert_true(lines > 90);
    assert_int_equal(plain.outlen, traced.outlen);
    assert_memory_equal(plain.out, traced.out, plain.outlen);

    /* The shared answers are the right ones, not merely equal. RTLD_DEFAULT from a library loaded
     * RTLD_LOCAL sees the library's own symbols (glibc searches the caller's local scope); a dlsym
     * wrapper written in C would make itself the caller and see none. */
    want_prefix(&traced, "lib.default.only_in_lib", "libpitfall.so+");
    want_value(&traced, "main.default.only_in_lib", "null");
    want_value(&traced, "lib.next.only_in_lib", "null");
    want_prefix(&traced, "main.next.malloc", "libc.so.6+");
    want_prefix(&traced, "lib.next.malloc", "libc.so.6+");
    want_prefix(&traced, "lib.next.dlsym", "libc.so.6+");
    want_prefix(&traced, "main.next_dlsym.next.malloc", "libc.so.6+");
    want_prefix(&traced, "main.next_dlsym.handle.only_in_lib", "libpitfall.so+");
    want_value(&traced, "handle.cudnnCreate", "null");
    want_value(&traced, "handle.cublasCreate_v2", "null");
    want_prefix(&traced, "handle.cuGetExportTable", "libcuda.so.1+");
    /* The stand-in refuses every export table (its README says why); the tracer hands the refusal through. */
    want_value(&traced, "cuGetExportTable.rc", "801");
    want_value(&traced, "cuGetExportTable.table", "null");
    want_value(&traced, "gpa.cuGetExportTable.same_as_dlsym", "1");
    want_prefix(&traced, "gpa.cuCtxSynchronize", "libcuda.so.1+");
    want_value(&traced, "gpa.cuCtxSynchronize.same_as_dlsym", "1");
    want_prefix(&traced, "gpa.cuMemGetInfo", "libcuda.so.1+");
    want_value(&traced, "gpa.probe", "rc=500 pfn=null status=1");             /* NOT_FOUND, SYMBOL_NOT_FOUND */
    want_value(&traced, "gpa.newer_than_driver", "rc=1 pfn=null status=1");   /* INVALID_VALUE */
    want_value(&traced, "gpa.too_old", "rc=500 pfn=null status=2");           /* VERSION_NOT_SUFFICIENT */
    want_value(&traced, "gpa4.newer_than_driver.rc", "1");
    want_value(&traced, "gpa.null_status.found", "1");
    want_value(&traced, "cuMemGetInfo.null_free.rc", "0");
    want_value(&traced, "cuMemGetInfo.null_free.total", "1073741824");
    want_value(&traced, "null.cuMemAlloc", "1");
    want_value(&traced, "null.cuMemFree", "0");
    want_value(&traced, "driver.used", "0");

    /* Nothing was allocated, so nothing was recorded (UNMAP events: see the refused-calls test). */
    struct loaded *l = by_reason(&snaps, "lookups");
    assert_int_equal(l->s.nlive, 0);
    for (uint64_t kind = OT_EV_ALLOC; kind <= OT_EV_MAP; kind++)
        assert_int_equal(count_events(&l->s, kind, 0, 0, NULL), 0);
}

/* Where the doors lead: traced, every wrapped entry point the driver hands out is a wrapper in
 * liboomtrace.so (default and _ptsz twins distinct, both cuGetProcAddress ABIs their own); everything
 * else is the driver's own pointer. Each door's allocation carries its own API id. */
static void test_routes(void **st)
{
    (void)st;
    run_both("routes", 1);
    static const char *const wrapped[] = {
        "route.cuMemAllocAsync", "route.cuMemAllocAsync_ptsz", "route.cuMemFreeAsync",
        "route.cuMemFreeAsync_ptsz", "route.cuMemAllocFromPoolAsync", "route.cuMemAllocFromPoolAsync_ptsz",
        "route.cuGetProcAddress@11030", "route.cuGetProcAddress@12000", "route.dlsym.cuGetProcAddress",
        "route.gpa4.cuMemAlloc", "route.gpa5.cuMemAlloc", "route.gpa4.cuMemAllocAsync_ptsz",
        "route.dlsym.cuMemAlloc_v2",
    };
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++) {
        want_value(&plain, wrapped[i], "libcuda.so.1");
        want_value(&traced, wrapped[i], "liboomtrace.so");
    }
    static const char *const untouched[] = {"route.cuCtxSynchronize", "route.cuMemGetInfo", "route.cuMemPoolCreate"};
    for (size_t i = 0; i < sizeof untouched / sizeof untouched[0]; i++) {
        want_value(&plain, untouched[i], "libcuda.so.1");
        want_value(&traced, untouched[i], "libcuda.so.1");
    }
    static const char *const truths[] = {
        "twins.differ",      "twins.same_as_dlsym",  "twins.alloc_flags2_is_default", "gpa.abis_differ",
        "gpa.12000_is_dlsym_v2", "alloc.all_doors_same", "alloc.repeated_same",
    };
    for (size_t i = 0; i < sizeof truths / sizeof truths[0]; i++) {
        want_value(&plain, truths[i], "1");
        want_value(&traced, truths[i], "1");
    }
    want_same("gpa4.cuMemAlloc.rc");
    want_same("gpa5.cuMemAlloc.rc");
    want_same("gpa4.cuMemAllocAsync_ptsz.rc");
    /* The tracer interposes dlsym, so it is the next dlsym after the program; the "lookups" test shows
     * that this dlsym answers as the real one. */
    want_value(&plain, "route.next.dlsym", "libc.so.6");
    want_value(&traced, "route.next.dlsym", "liboomtrace.so");
    want_same("route.next.dlsym.name");

    struct loaded *l = by_reason(&snaps, "routes");
    static const struct {
        const char *key;
        uint64_t api, size;
    } recs[] = {
        {"p0", OT_API_cuMemAlloc_v2, 1 * MiB + 4096},
        {"p1", OT_API_cuMemAlloc_v2, 2 * MiB + 4096},
        {"p2", OT_API_cuMemAlloc_v2, 3 * MiB + 4096},
        {"p3", OT_API_cuMemAllocAsync, 1 * MiB + 512},
        {"p4", OT_API_cuMemAllocAsync_ptsz, 2 * MiB + 512},
        {"p5", OT_API_cuMemAllocFromPoolAsync, 3 * MiB + 512},
        {"p6", OT_API_cuMemAllocFromPoolAsync_ptsz, 4 * MiB + 512},
        {"p7", OT_API_cuMemAllocAsync_ptsz, 7 * MiB + 512}, /* the 4-argument ABI's flags=2 lookup */
    };
    assert_int_equal(l->s.nlive, 8);
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++) {
        struct rec_match m = {.api = recs[i].api, .size = recs[i].size, .address = run_u64(&traced, recs[i].key)};
        if (count_recs(l->s.live, l->s.nlive, &m) != 1)
            fail_msg("no live record of %s with %s", recs[i].key, ot_api_name64(recs[i].api));
    }
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemFreeAsync, run_u64(&traced, "x"), NULL), 1);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemFreeAsync_ptsz, run_u64(&traced, "y"), NULL), 1);
}

/* OOMTRACE_DISABLE=1: the library is loaded but hands out the driver's own pointers and records nothing. */
static void test_disabled_is_transparent(void **st)
{
    (void)st;
    char *const argv[] = {PROG, "routes", NULL};
    untraced_run(&plain, argv, NULL);
    assert_int_equal(plain.status, 0);
    traced_run_capture(&traced, argv, (const char *const[]){"OOMTRACE_DISABLE=1", NULL});
    assert_int_equal(traced.status, 0);
    assert_int_equal(traced.nsnaps, 0);
    for (const char *line = plain.out; *line;) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl);
        char key[256];
        size_t kn = strcspn(line, " \n");
        memcpy(key, line, kn);
        key[kn] = 0;
        /* Addresses differ from run to run; dlsym stays interposed (it is an export, not a route). */
        bool address = strlen(key) == 2 && key[0] == 'p', xy = !strcmp(key, "x") || !strcmp(key, "y");
        if (!address && !xy && strcmp(key, "route.next.dlsym") != 0)
            want_same(key);
        line = nl + 1;
    }
}

/* 16 threads allocate and free at once through routed pointers (half from cuGetProcAddress, half from
 * dlsym), with frees of other threads' memory; then each allocates a known set, frees half of its
 * neighbour's, and the program dumps. Live set, peak and event counts must be exact. */
static void test_threads_exact(void **st)
{
    (void)st;
    traced_run_capture(&traced, (char *const[]){PROG, "threads", NULL}, NULL);
    assert_int_equal(traced.status, 0);
    assert_int_equal(traced.nsnaps, 1);
    load_all(&snaps, &traced);
    const uint64_t peak = run_u64(&traced, "expect.peak"), live = run_u64(&traced, "expect.live");
    const uint64_t count = run_u64(&traced, "expect.count"), churn = run_u64(&traced, "churn.allocs");
    assert_int_equal(run_u64(&traced, "fake.used"), live);
    assert_int_equal(run_u64(&traced, "fake.live"), count);

    struct loaded *l = by_reason(&snaps, "threads");
    const struct snap_device *d = ot_snapshot_device(&l->s, 0);
    assert_non_null(d);
    assert_int_equal(d->tracked_bytes, live);
    assert_int_equal(d->by_category[OT_CAT_DEVICE], live);
    assert_int_equal(d->free_bytes, 1 * GiB - live);
    assert_int_equal(l->s.nlive, count);
    assert_int_equal(sum_bytes(l->s.live, l->s.nlive, true), live);
    assert_int_equal(count_recs(l->s.live, l->s.nlive, &(struct rec_match){.api = OT_API_cuMemAlloc_v2,
                                                                            .category = OT_CAT_DEVICE}),
                     count);
    assert_int_equal(d->peak_bytes, peak);
    const struct ot_peak *p = ot_snapshot_peak(&l->s, 0);
    assert_non_null(p);
    assert_int_equal(p->count, 2 * count);
    assert_int_equal(sum_bytes(p->recs, p->count, true), peak);
    /* Every allocation and every free recorded exactly once: churn pairs, the measured phase, and the
     * half of it freed. */
    assert_int_equal(l->s.meta.events_recorded, 2 * churn + 2 * count + count);
    assert_int_equal(l->s.meta.events_kept + l->s.meta.events_dropped, l->s.meta.events_recorded);
    if (l->s.meta.events_dropped == 0) {
        assert_int_equal(count_events(&l->s, OT_EV_ALLOC, 0, 0, NULL), churn + 2 * count);
        assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemFree_v2, 0, NULL), churn + count);
    }
}

/* Allocation events minus free events of one address or handle in the ring. */
static long net_allocs(const struct ot_snapshot *s, uint64_t addr)
{
    return (long)count_events(s, OT_EV_ALLOC, 0, addr, NULL) - (long)count_events(s, OT_EV_FREE, 0, addr, NULL);
}

/* A free or unmap that the driver refuses leaves the memory allocated, so the record must stay too:
 * a cuMemFreeAsync on a bad stream, a cuMemUnmap of half a mapping, cuMemFreeHost of registered memory,
 * and cuMemUnmap(0, 0), which must not even leave an UNMAP event. Frees are recorded before the real
 * call, so a refused one is put back (lib/record.c ot_record_unfree). */
static void test_refused_frees_change_nothing(void **st)
{
    (void)st;
    traced_run_capture(&traced, (char *const[]){PROG, "refused", NULL}, NULL);
    assert_int_equal(traced.status, 0);
    assert_int_equal(traced.nsnaps, 2);
    load_all(&snaps, &traced);
    const uint64_t p = run_u64(&traced, "p"), h = run_u64(&traced, "h"), va = run_u64(&traced, "va");
    const uint64_t buf = run_u64(&traced, "buf");

    struct loaded *l = by_reason(&snaps, "refused");
    const struct snap_device *d = ot_snapshot_device(&l->s, 0);
    assert_non_null(d);
    assert_int_equal(d->by_category[OT_CAT_ASYNC], 4 * MiB);
    assert_int_equal(d->by_category[OT_CAT_VMM], 4 * MiB);
    assert_int_equal(d->tracked_bytes, 8 * MiB);
    const struct ot_peak *pk = ot_snapshot_peak(&l->s, 0);
    assert_non_null(pk);
    assert_int_equal(pk->peak_bytes, 8 * MiB);
    assert_int_equal(pk->count, 2); /* each once: a refused free must not leave a second copy */
    assert_int_equal(sum_bytes(pk->recs, pk->count, true), 8 * MiB);
    assert_int_equal(l->s.nlive, 3);
    assert_int_equal(count_recs(l->s.live, l->s.nlive, &(struct rec_match){.api = OT_API_cuMemAllocAsync, .address = p}), 1);
    assert_int_equal(count_recs(l->s.live, l->s.nlive, &(struct rec_match){.api = OT_API_cuMemCreate, .address = h}), 1);
    assert_int_equal(count_recs(l->s.live, l->s.nlive,
                                &(struct rec_match){.api = OT_API_cuMemHostRegister_v2, .address = buf, .device = -1}),
                     1);
    assert_int_equal(l->s.nmappings, 1);
    assert_int_equal(l->s.mappings[0].address, va);
    assert_int_equal(l->s.mappings[0].size, 4 * MiB);
    /* The ring may show a refused free and its undoing, but replayed it must give the live set; a
     * refused unmap is no event at all. */
    assert_int_equal(net_allocs(&l->s, p), 1);
    assert_int_equal(net_allocs(&l->s, h), 1);
    assert_int_equal(net_allocs(&l->s, buf), 1);
    assert_int_equal(count_events(&l->s, OT_EV_UNMAP, 0, 0, NULL), 0);

    /* The real frees then free each, by the call that did it. */
    l = by_reason(&snaps, "refused-cleaned");
    assert_int_equal(l->s.nlive, 0);
    assert_int_equal(net_allocs(&l->s, p), 0);
    assert_int_equal(net_allocs(&l->s, h), 0);
    assert_int_equal(net_allocs(&l->s, buf), 0);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemUnmap, h, NULL), 1);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, OT_API_cuMemHostUnregister, buf, NULL), 1);
    assert_int_equal(count_events(&l->s, OT_EV_UNMAP, 0, 0, NULL), 1);
}

/* A refused VMM free: the driver still holds the memory, so the record stays as it was (same handle,
 * in the peak set once), with its mapping for an unmap; the real free afterwards frees it once. */
static void expect_refused_vmm(const char *cmd, bool mapped)
{
    traced_run_capture(&traced, (char *const[]){PROG, (char *)cmd, NULL}, NULL);
    assert_int_equal(traced.status, 0);
    assert_int_equal(traced.nsnaps, 2);
    load_all(&snaps, &traced);
    const uint64_t h = run_u64(&traced, "h"), va = run_u64(&traced, "va");

    struct loaded *l = by_reason(&snaps, "refused");
    const struct snap_device *d = ot_snapshot_device(&l->s, 0);
    assert_non_null(d);
    assert_int_equal(d->tracked_bytes, 4 * MiB);
    assert_int_equal(d->by_category[OT_CAT_VMM], 4 * MiB);
    assert_int_equal(l->s.nlive, 1);
    assert_int_equal(count_recs(l->s.live, l->s.nlive, &(struct rec_match){.api = OT_API_cuMemCreate, .address = h}), 1);
    assert_int_equal(net_allocs(&l->s, h), 1);
    assert_int_equal(ot_snapshot_peak(&l->s, 0)->count, 1);
    assert_int_equal(l->s.nmappings, mapped ? 1 : 0);
    if (mapped) {
        assert_int_equal(l->s.mappings[0].address, va);
        assert_int_equal(l->s.mappings[0].size, 4 * MiB);
    }

    l = by_reason(&snaps, "freed");
    assert_int_equal(l->s.nlive, 0);
    assert_int_equal(l->s.nmappings, 0);
    assert_int_equal(net_allocs(&l->s, h), 0);
    assert_int_equal(ot_snapshot_device(&l->s, 0)->tracked_bytes, 0);
}

/* cuMemRelease of the only reference, refused. */
static void test_refused_release_changes_nothing(void **st)
{
    (void)st;
    expect_refused_vmm("refused-release", false);
}

/* cuMemUnmap of the last mapping of released memory, refused. */
static void test_refused_unmap_changes_nothing(void **st)
{
    (void)st;
    expect_refused_vmm("refused-unmap", true);
}

/* A burst of failures: each thread's snapshot reports the failure of the thread that wrote it, not the
 * process's latest (which, while the first snapshot was gathered, became another thread's). */
static void test_burst_of_failures(void **st)
{
    (void)st;
    traced_run_capture(&traced, (char *const[]){PROG, "failures", NULL}, NULL);
    assert_int_equal(traced.status, 0);
    const int n = (int)run_u64(&traced, "failures");
    struct {
        uint64_t tid, bytes;
        int seen;
    } want[16] = {{0}};
    int nwant = 0;
    for (const char *p = traced.out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        unsigned long long tid, bytes;
        int r;
        if (sscanf(p, "failed %llu %llu %d", &tid, &bytes, &r) == 3 && nwant < 16) {
            assert_int_equal(r, 2); /* CUDA_ERROR_OUT_OF_MEMORY */
            want[nwant].tid = tid;
            want[nwant++].bytes = bytes;
        }
    }
    assert_int_equal(nwant, n);
    assert_int_equal(traced.nsnaps, (size_t)n);
    load_all(&snaps, &traced);
    for (size_t i = 0; i < snaps.n; i++) {
        const struct ot_snapshot *s = &snaps.snap[i].s;
        assert_int_equal(s->meta.trigger, OT_TRIGGER_OOM);
        assert_true(s->has_failure);
        int k = 0;
        while (k < nwant && want[k].tid != s->failure.tid)
            k++;
        assert_true(k < nwant);
        assert_int_equal(s->failure.requested_bytes, want[k].bytes);
        assert_int_equal(want[k].seen, 0); /* one snapshot a failure */
        want[k].seen = 1;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_lookups_as_untraced, teardown),
        cmocka_unit_test_teardown(test_routes, teardown),
        cmocka_unit_test_teardown(test_disabled_is_transparent, teardown),
        cmocka_unit_test_teardown(test_threads_exact, teardown),
        cmocka_unit_test_teardown(test_burst_of_failures, teardown),
        cmocka_unit_test_teardown(test_refused_frees_change_nothing, teardown),
        cmocka_unit_test_teardown(test_refused_release_changes_nothing, teardown),
        cmocka_unit_test_teardown(test_refused_unmap_changes_nothing, teardown),
    };
    return cmocka_run_group_tests_name("pitfalls", tests, NULL, NULL);
}
