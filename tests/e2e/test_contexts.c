/* A context's end frees what was made in it (walk 8 #28): tests/doors/contexts.c ends a context three
 * ways (cuCtxDestroy, cuDevicePrimaryCtxReset, the last cuDevicePrimaryCtxRelease) and then takes memory
 * that fits only if the driver took the ended context's memory back. Traced, the program must print what
 * it prints untraced, and every snapshot must hold only what the driver still holds: the live set, the
 * device totals and the peak; the ring holds one context_end event for the end, not a free per
 * allocation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "model/replay.h"

#define PROG "build/tests/contexts"

static struct traced_run run, plain;
static struct loaded_run snaps;

/* Runs the sub-command untraced and traced: the same status (0: every driver-side check held) and the
 * same output, and `nsnaps` snapshots. */
static void run_both(const char *cmd, size_t nsnaps)
{
    char *const argv[] = {PROG, (char *)cmd, NULL};
    untraced_run(&plain, argv, NULL);
    assert_int_equal(plain.status, 0);
    traced_run_capture(&run, argv, NULL);
    assert_int_equal(run.status, 0);
    assert_string_equal(run.out, plain.out);
    assert_int_equal(run.nsnaps, nsnaps);
    load_all(&snaps, &run);
}

static int teardown(void **st)
{
    (void)st;
    unload_all(&snaps);
    traced_cleanup(&run);
    traced_cleanup(&plain);
    return 0;
}

/* Device 0: tracked bytes, peak, and what the driver says is used (asked at the snapshot in the current
 * context: not known while the thread has none, right after cuCtxDestroy). */
static void expect_dev0(const struct loaded *l, uint64_t tracked, uint64_t peak, uint64_t used)
{
    const struct snap_device *d = ot_snapshot_device(&l->s, 0);
    assert_non_null(d);
    assert_int_equal(d->tracked_bytes, tracked);
    assert_int_equal(d->peak_bytes, peak);
    if (d->flags & OT_DEV_MEMINFO_KNOWN)
        assert_int_equal(d->total_bytes - d->free_bytes, used);
    const struct ot_peak *p = ot_snapshot_peak(&l->s, 0);
    assert_non_null(p);
    assert_int_equal(sum_bytes(p->recs, p->count, true), peak); /* the peak's records add up to it */
    assert_int_equal(sum_bytes(l->s.live, l->s.nlive, true), tracked);
}

static size_t live_of_size(const struct loaded *l, uint64_t size)
{
    struct rec_match m = {.size = size, .any_device = true, .any_flags = true};
    return count_recs(l->s.live, l->s.nlive, &m);
}

/* The ring's replay: the allocations each context end freed, visited as frees at that event. */
struct ended {
    uint64_t api, n, matched, bytes;
};

static bool every_event(const struct snap_event *e, void *ctx)
{
    (void)e, (void)ctx;
    return true;
}

static void count_ended(const struct ot_replay_step *st, void *ctx)
{
    struct ended *c = ctx;
    if (!st->tracked || st->e->kind != OT_EV_FREE || st->e->api != c->api)
        return;
    c->n++;
    c->matched += st->matched;
    c->bytes += st->e->size;
}

static struct ended replay_ended(const struct loaded *l, uint64_t api)
{
    struct ended c = {.api = api};
    struct ot_replay rp = {.s = &l->s, .last_seq = UINT64_MAX, .track = every_event, .visit = count_ended, .ctx = &c};
    char err[OT_ERRBUF];
    assert_int_equal(ot_replay_run(&rp, err), 0);
    return c;
}

/* The text report of the run's snapshot with this reason: holds `want`. */
static void expect_report_line(const char *reason, const char *want)
{
    for (size_t i = 0; i < run.nsnaps; i++) {
        char cmd[700], line[1024];
        snprintf(cmd, sizeof(cmd), "build/oomtrace-read '%s' 2>&1", run.paths[i]);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        bool mine = false, found = false;
        while (fgets(line, sizeof(line), p)) {
            if (strstr(line, "  reason: ") && strstr(line, reason))
                mine = true;
            if (strstr(line, want))
                found = true;
        }
        pclose(p);
        if (mine) {
            if (!found)
                fail_msg("the report of %s has no line with: %s", reason, want);
            return;
        }
    }
    fail_msg("no snapshot with reason %s", reason);
}

static void destroy(const char *cmd)
{
    run_both(cmd, 3);
    const uint64_t other = 100 * MiB, pool = 2 * MiB, vmm = 2 * MiB;
    const uint64_t gone = 600 * MiB + 1 * MiB + 4 * MiB + 1 * MiB; /* device, pitched, managed, array */
    const uint64_t before = other + gone + pool + vmm;

    struct loaded *l = by_reason(&snaps, "destroy-before");
    expect_dev0(l, before, before, run_u64(&run, "used-before"));
    assert_int_equal(l->s.nlive, 9); /* 7 on the device, the pinned host buffer, the other context's */

    l = by_reason(&snaps, "destroy-after");
    /* Only the other context's memory, the pool's and cuMemCreate's stay; the peak is the one before. */
    expect_dev0(l, other + pool + vmm, before, run_u64(&run, "used-after-destroy"));
    assert_int_equal(l->s.nlive, 3);
    assert_int_equal(live_of_size(l, 100 * MiB), 1);
    assert_int_equal(ot_snapshot_peak(&l->s, 0)->count, 8); /* the peak set still holds what was freed since */
    uint64_t bytes = 0;
    assert_int_equal(count_events(&l->s, OT_EV_CONTEXT_END, OT_API_cuCtxDestroy_v2, 0, &bytes), 1);
    assert_int_equal(bytes, gone);
    assert_int_equal(count_events(&l->s, OT_EV_FREE, 0, 0, NULL), 0);
    /* The replay frees the six allocations there, each matched to its allocation (host pinned included). */
    struct ended c = replay_ended(l, OT_API_cuCtxDestroy_v2);
    assert_int_equal(c.n, 6);
    assert_int_equal(c.matched, 6);
    assert_int_equal(c.bytes, gone + 1 * MiB);
    /* The report says it in the user's words: which context, how, and what went with it. */
    expect_report_line("destroy-after", "context end: a context of device 0 destroyed (cuCtxDestroy) at ");
    expect_report_line("destroy-after", "606 MiB of device memory freed with it, 6 allocations");

    /* 900 MiB in a new context: the peak is now that, not the sum of both phases. */
    l = by_reason(&snaps, "destroy-next");
    const uint64_t next = other + pool + vmm + 900 * MiB;
    expect_dev0(l, next, next, run_u64(&run, "used-end"));
    assert_int_equal(l->s.nlive, 4);
    assert_int_equal(live_of_size(l, 900 * MiB), 1);
    assert_int_equal(live_of_size(l, 300 * MiB), 0);
}

static void reset(const char *cmd)
{
    run_both(cmd, 3);
    struct loaded *l = by_reason(&snaps, "reset-before");
    expect_dev0(l, 600 * MiB, 600 * MiB, run_u64(&run, "used-before"));
    l = by_reason(&snaps, "reset-after");
    expect_dev0(l, 0, 600 * MiB, run_u64(&run, "used-after-reset"));
    assert_int_equal(l->s.nlive, 0);
    uint64_t bytes = 0;
    assert_int_equal(count_events(&l->s, OT_EV_CONTEXT_END, OT_API_cuDevicePrimaryCtxReset_v2, 0, &bytes), 1);
    assert_int_equal(bytes, 600 * MiB);
    assert_int_equal(replay_ended(l, OT_API_cuDevicePrimaryCtxReset_v2).matched, 2);
    expect_report_line("reset-after", "context end: the primary context of device 0 reset (cuDevicePrimaryCtxReset, "
                                      "what cudaDeviceReset() does) at ");
    expect_report_line("reset-after", ", context end 1"); /* the ring's counts in words, not "context_end" */
    l = by_reason(&snaps, "reset-next");
    expect_dev0(l, 900 * MiB, 900 * MiB, run_u64(&run, "used-end")); /* not 1500 MiB: the phases' sum */
    assert_int_equal(l->s.nlive, 1);
}

static void release(const char *cmd)
{
    run_both(cmd, 3);
    struct loaded *l = by_reason(&snaps, "release-one");
    expect_dev0(l, 300 * MiB, 300 * MiB, 300 * MiB); /* a release that is not the last frees nothing */
    assert_int_equal(count_events(&l->s, OT_EV_CONTEXT_END, 0, 0, NULL), 0);
    l = by_reason(&snaps, "release-last");
    expect_dev0(l, 0, 300 * MiB, run_u64(&run, "used-after-release"));
    assert_int_equal(count_events(&l->s, OT_EV_CONTEXT_END, OT_API_cuDevicePrimaryCtxRelease_v2, 0, NULL), 1);
    l = by_reason(&snaps, "release-next");
    expect_dev0(l, 900 * MiB, 900 * MiB, run_u64(&run, "used-end"));
}

/* Each end through its _v2 ABI and through the older one: the same event, the same report. */
#define BOTH_ABIS(name)                                                                                \
    static void test_##name(void **st)                                                                 \
    {                                                                                                  \
        (void)st;                                                                                      \
        name(#name);                                                                                   \
    }                                                                                                  \
    static void test_##name##_v1(void **st)                                                            \
    {                                                                                                  \
        (void)st;                                                                                      \
        name(#name "-v1");                                                                             \
    }
BOTH_ABIS(destroy)
BOTH_ABIS(reset)
BOTH_ABIS(release)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_destroy, teardown),
        cmocka_unit_test_teardown(test_reset, teardown),
        cmocka_unit_test_teardown(test_release, teardown),
        cmocka_unit_test_teardown(test_destroy_v1, teardown),
        cmocka_unit_test_teardown(test_reset_v1, teardown),
        cmocka_unit_test_teardown(test_release_v1, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
