/* 16 threads x OT_STRESS_OPS (default 1,000,000) allocations and frees with random sizes, most frees on
 * another thread (tests/doors/stress.c). The live set and the peak must be exact against the program's
 * ground truth, nothing may deadlock, and a snapshot taken by signal mid-run must be consistent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"

struct pair {
    uint64_t addr, size;
};

static int cmp_pair(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static size_t truth(const char *out, const char *tag, struct pair *v, size_t cap, uint64_t *bytes)
{
    size_t n = 0, tl = strlen(tag);
    *bytes = 0;
    for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        unsigned long long a, s;
        if (strncmp(p, tag, tl) == 0 && p[tl] == ' ' && sscanf(p + tl + 1, "%llu %llu", &a, &s) == 2 && n < cap) {
            v[n++] = (struct pair){a, s};
            *bytes += s;
        }
    }
    qsort(v, n, sizeof *v, cmp_pair);
    return n;
}

static void assert_same_set(const struct ot_record *recs, size_t n, const struct pair *want, size_t nwant)
{
    struct pair *got = calloc(n ? n : 1, sizeof *got);
    for (size_t i = 0; i < n; i++)
        got[i] = (struct pair){recs[i].address, recs[i].size};
    qsort(got, n, sizeof *got, cmp_pair);
    assert_int_equal(n, nwant);
    assert_memory_equal(got, want, n * sizeof *got);
    free(got);
}

static void test_sixteen_threads(void **st)
{
    (void)st;
    const char *ops = getenv("OT_STRESS_OPS") ? getenv("OT_STRESS_OPS") : "1000000";
    struct traced_run r;
    traced_run_capture(&r, (char *const[]){"build/tests/stress", (char *)ops, NULL},
                       (const char *const[]){"FAKECUDA_CAPACITY=64G", "OOMTRACE_SIGNAL=USR1", NULL});
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nsnaps, 2); /* 1-signal, 2-dump (sorted by name) */
    static struct pair peak[2048], live[2048];
    uint64_t peak_bytes, live_bytes;
    size_t npeak = truth(r.out, "peak", peak, 2048, &peak_bytes);
    size_t nlive = truth(r.out, "live", live, 2048, &live_bytes);

    struct loaded end;
    load_snapshot(&end, r.paths[1]);
    assert_int_equal(end.s.meta.trigger, OT_TRIGGER_API);
    assert_same_set(end.s.live, end.s.nlive, live, nlive);
    assert_int_equal(ot_snapshot_device(&end.s, 0)->tracked_bytes, live_bytes);
    const struct ot_peak *p = ot_snapshot_peak(&end.s, 0);
    assert_int_equal(p->peak_bytes, peak_bytes);
    assert_same_set(p->recs, p->count, peak, npeak);
    assert_int_equal(end.s.meta.events_kept + end.s.meta.events_dropped, end.s.meta.events_recorded);
    unload_snapshot(&end);

    /* Mid-run, by signal: internally consistent. */
    struct loaded mid;
    load_snapshot(&mid, r.paths[0]);
    assert_int_equal(mid.s.meta.trigger, OT_TRIGGER_SIGNAL);
    const struct snap_device *d = ot_snapshot_device(&mid.s, 0);
    assert_int_equal(sum_bytes(mid.s.live, mid.s.nlive, true), d->tracked_bytes);
    const struct ot_peak *mp = ot_snapshot_peak(&mid.s, 0);
    assert_int_equal(mp->peak_bytes, peak_bytes); /* the signal came after the big block */
    assert_int_equal(sum_bytes(mp->recs, mp->count, true), mp->peak_bytes);
    assert_true(d->tracked_bytes <= d->peak_bytes);
    assert_int_equal(mid.s.meta.events_kept + mid.s.meta.events_dropped, mid.s.meta.events_recorded);
    unload_snapshot(&mid);
    traced_cleanup(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sixteen_threads),
    };
    return cmocka_run_group_tests_name("stress", tests, NULL, NULL);
}
