/* Unit tests of the recorder's core, linked against lib/'s objects: the live set, the exact peak set,
 * VMM reference counting, the options table and the clock (the ring's: test_recorder_ring.c; the lock's:
 * test_lock.c). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "capture/backtrace.h"
#include "common/clock.h"
#include "common/options.h"
#include "common/self.h"
#include "common/tsan.h"
#include "record/liveset.h"
#include "record/rec.h"
#include "record/ring.h"
#include "record/state.h"
#include "recorder_setup.h"

static void test_liveset_matches_reference(void **state)
{
    (void)state;
    struct ot_liveset s = {0};
    enum { N = 4096 };
    static uint64_t ref[N]; /* ref[k] = size, 0 when absent; key = k * 512 + 0x7f0000000000 */
    memset(ref, 0, sizeof ref);
    uint64_t count = 0;
    for (int op = 0; op < 400000; op++) {
        uint64_t k = next() % N, key = 0x7f0000000000ull + k * 512;
        struct ot_rec *r = ot_live_find(&s, OT_NS_DEVPTR, key);
        assert_true((r != NULL) == (ref[k] != 0));
        if (r) {
            assert_int_equal(r->size, ref[k]);
            ot_live_del(&s, r);
            ref[k] = 0;
            count--;
        } else {
            struct ot_rec n = {.key = key, .size = 1 + next() % 1000, .ns = OT_NS_DEVPTR};
            assert_non_null(ot_live_put(&s, &n));
            ref[k] = n.size;
            count++;
        }
        assert_int_equal(s.count, count);
    }
    /* The same key in another namespace is another allocation. */
    struct ot_rec v = {.key = 0x7f0000000000ull, .size = 7, .ns = OT_NS_VMM};
    if (!ot_live_find(&s, OT_NS_VMM, v.key))
        ot_live_put(&s, &v);
    assert_int_equal(ot_live_find(&s, OT_NS_VMM, v.key)->size, 7);
    ot_live_clear(&s);
}

/* The peak set by lib/peak.c's rule, as the snapshot writes it (PEAK_REF) and the reader rebuilds it:
 * live records of the device in device categories made at or before the peak, and the retained ones. */
static uint64_t peak_foreach(int device, void (*fn)(const struct ot_rec *, void *), void *ctx)
{
    const struct trace_device *d = ot_devslot(device);
    const struct ot_liveset *l = &ot_state.live;
    uint64_t n = 0;
    for (uint64_t i = 0; l->slots && i <= l->mask; i++) {
        const struct ot_rec *r = &l->slots[i];
        if (r->size && r->device == device && ot_category_is_device(r->cat) && r->seq <= d->peak_seq) {
            if (fn)
                fn(r, ctx);
            n++;
        }
    }
    for (uint64_t i = 0; i < d->nretained; i++) {
        if (fn)
            fn(&d->retained[i], ctx);
        n++;
    }
    return n;
}

struct collect {
    uint64_t bytes, count;
    uint64_t keys[8192];
};

static void collect_cb(const struct ot_rec *r, void *ctx)
{
    struct collect *c = ctx;
    c->keys[c->count++] = r->key;
    c->bytes += r->size;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The peak set kept at O(1) per event must equal the live set at the high-water mark found by brute
 * force over the whole history. */
static void test_peak_set_is_exact(void **state)
{
    (void)state;
    reset();
    enum { SLOTS = 512, OPS = 20000 };
    static uint64_t live_key[SLOTS], live_size[SLOTS];
    static uint64_t best_keys[SLOTS];
    memset(live_key, 0, sizeof live_key);
    uint64_t cur = 0, best = 0, nbest = 0, addr = 0x100000;
    for (int op = 0; op < OPS; op++) {
        int i = (int)(next() % SLOTS);
        if (live_key[i]) {
            ot_record_free(OT_NS_DEVPTR, live_key[i], OT_API_cuMemFree_v2, NULL);
            cur -= live_size[i];
            live_key[i] = 0;
        } else {
            uint64_t size = 512 * (1 + next() % 64);
            struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, addr, size, 0};
            addr += 1 << 20;
            ot_record_alloc(&q);
            live_key[i] = q.key;
            live_size[i] = size;
            cur += size;
            if (cur > best) {
                best = cur;
                nbest = 0;
                for (int j = 0; j < SLOTS; j++)
                    if (live_key[j])
                        best_keys[nbest++] = live_key[j];
            }
        }
    }
    assert_int_equal(ot_state.dev[0].cur, cur);
    assert_int_equal(ot_state.dev[0].peak, best);
    static struct collect c;
    memset(&c, 0, sizeof c);
    peak_foreach(0, collect_cb, &c);
    assert_int_equal(c.bytes, best);
    assert_int_equal(c.count, nbest);
    qsort(c.keys, c.count, sizeof c.keys[0], cmp_u64);
    qsort(best_keys, nbest, sizeof best_keys[0], cmp_u64);
    assert_memory_equal(c.keys, best_keys, nbest * sizeof best_keys[0]);
}

/* NCCL's pattern: create, map, retain, release, unmap, release -> exactly one free, at the end. */
static void test_vmm_reference_counts(void **state)
{
    (void)state;
    reset();
    uint64_t h = 0xabc, size = 64 << 20;
    struct ot_alloc_req q = {OT_NS_VMM, OT_CAT_VMM, OT_API_cuMemCreate, 0, 0, h, size, 0};
    ot_record_alloc(&q);
    ot_vmm_map(0x200000000ull, size, 0, h);
    ot_vmm_retain(h);
    ot_vmm_release(h, NULL);
    assert_int_equal(ot_state.dev[0].cur, size);
    ot_vmm_unmap(0x200000000ull, size, NULL);
    assert_int_equal(ot_state.dev[0].cur, size); /* one reference left */
    ot_vmm_release(h, NULL);
    assert_int_equal(ot_state.dev[0].cur, 0);
    assert_int_equal(ot_state.live.count, 0);
    assert_int_equal(ot_state.unknown_frees, 0);

    /* PyTorch's expandable segments: release first, memory lives until unmapped. */
    ot_record_alloc(&q);
    ot_vmm_map(0x300000000ull, size / 2, 0, h);
    ot_vmm_map(0x300000000ull + size / 2, size / 2, size / 2, h);
    ot_vmm_release(h, NULL);
    assert_int_equal(ot_state.dev[0].cur, size);
    ot_vmm_unmap(0x300000000ull, size, NULL); /* one call covering both mappings */
    assert_int_equal(ot_state.dev[0].cur, 0);
    assert_int_equal(ot_state.maps.count, 0);

    /* Host-located VMM memory never enters a device's totals. */
    struct ot_alloc_req hq = {OT_NS_VMM, OT_CAT_VMM, OT_API_cuMemCreate, OT_REC_HOST_LOCATION, -1, 0x77, size, 0};
    ot_record_alloc(&hq);
    assert_int_equal(ot_state.dev[0].cur, 0);
    assert_int_equal(ot_state.host.by_cat[OT_CAT_VMM], size);
}

/* Host pinned memory is reported on the host, never in a device's totals or peak. */
static void test_host_pinned_is_not_device_memory(void **state)
{
    (void)state;
    reset();
    struct ot_alloc_req q = {OT_NS_HOST, OT_CAT_HOST_PINNED, OT_API_cuMemHostAlloc, 0, -1, 0x5000, 4096, 0};
    ot_record_alloc(&q);
    assert_int_equal(ot_state.host.by_cat[OT_CAT_HOST_PINNED], 4096);
    assert_int_equal(ot_state.host.cur, 0);
    assert_int_equal(ot_state.dev[0].peak, 0);
    ot_record_free(OT_NS_HOST, 0x5000, OT_API_cuMemFreeHost, NULL);
    assert_int_equal(ot_state.host.by_cat[OT_CAT_HOST_PINNED], 0);
}

/* The markers before a peak outlive the marker ring: a long run after the peak does not push them out. */
static void test_markers_before_peak_are_kept(void **state)
{
    (void)state;
    reset();
    char label[32];
    for (int i = 0; i < 20; i++) {
        snprintf(label, sizeof label, "step %d", i);
        ot_record_marker(label);
    }
    struct ot_alloc_req big = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, 0x1000, 1 << 30, 0};
    ot_record_alloc(&big);
    ot_record_free(OT_NS_DEVPTR, 0x1000, OT_API_cuMemFree_v2, NULL);
    for (int i = 20; i < 3000; i++) {
        snprintf(label, sizeof label, "step %d", i);
        ot_record_marker(label);
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, 0x2000, 4096, 0};
        ot_record_alloc(&q);
        ot_record_free(OT_NS_DEVPTR, 0x2000, OT_API_cuMemFree_v2, NULL);
    }
    for (int i = 0; i < OT_PEAK_MARKERS; i++) {
        snprintf(label, sizeof label, "step %d", 12 + i);
        assert_string_equal(ot_state.peak_markers[0][i].label, label);
    }
}

static void test_options_fall_back_on_bad_values(void **state)
{
    (void)state;
    setenv("OOMTRACE_RING", "12X", 1);
    setenv("OOMTRACE_DEPTH", "1000000", 1);
    setenv("OOMTRACE_DUMP", "exit,crash", 1);
    setenv("OOMTRACE_SIGNAL", "USR2", 1);
    ot_lock_take(); /* the compressor may still be appending (see set_ring_bytes) */
    ot_options_load();
    ot_lock_give();
    assert_int_equal(ot_opt.ring_bytes, 64 << 20);
    assert_int_equal(ot_opt.depth, 64);
    assert_true(ot_opt.dump_exit && ot_opt.dump_crash && ot_opt.dump_oom);
    assert_int_equal(ot_opt.signal, 12); /* SIGUSR2 on Linux */
    setenv("OOMTRACE_RING", "1.5M", 1);
    setenv("OOMTRACE_DUMP", "none", 1);
    ot_lock_take();
    ot_options_load();
    ot_lock_give();
    assert_int_equal(ot_opt.ring_bytes, 3 << 19);
    assert_false(ot_opt.dump_oom);
    unsetenv("OOMTRACE_RING");
    unsetenv("OOMTRACE_DEPTH");
    unsetenv("OOMTRACE_DUMP");
    unsetenv("OOMTRACE_SIGNAL");
}

/* The clock (lib/common/clock.c) read from the TSC: it must stay CLOCK_MONOTONIC nanoseconds, never go back
 * on a thread, and follow clock_gettime across anchors. Calibration and anchors are shortened to 2 ms and
 * 5 ms, so that 150 ms cross some thirty of them; four threads read it at once (TSan, make tsan). */
/* The kernel's reading of cpuid 0x80000007 EDX bit 8 (invariant TSC): it sets nonstop_tsc from it. */
static int cpu_tsc_invariant(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[8192];
    int yes = 0;
    while (!yes && fgets(line, sizeof line, f))
        yes = strncmp(line, "flags", 5) == 0 && strstr(line, " nonstop_tsc") != NULL;
    fclose(f);
    return yes;
}

struct clock_run {
    uint64_t reads, back, far, worst;
};

static void *clock_reader(void *arg)
{
    struct clock_run *r = arg;
    uint64_t end = ot_mono_ns() + 150000000ull, last = 0;
    for (;;) {
        uint64_t before = ot_mono_ns(), t = ot_now_ns(), after = ot_mono_ns();
        r->reads++;
        if (t < last)
            r->back++;
        last = t;
        /* within 50 µs of the clock_gettime readings around it (the conversion's error is far smaller; a
         * preempted read is not counted) */
        uint64_t off = t < before ? before - t : t > after ? t - after : 0;
        if (after - before < 20000 && off > 50000)
            r->far++;
        if (after - before < 20000 && off > r->worst)
            r->worst = off;
        if (after > end)
            break;
    }
    return NULL;
}

static void clock_check(int use_tsc)
{
    ot_clock_tune(2000000, 5000000);
    ot_clock_start(use_tsc);
    /* Every read first tries the line (clock.h), and only its span stops it: a start stops the old line at
     * once (the second check starts after the first left a line of up to 5 ms), and without the TSC it
     * never runs again. */
    assert_int_equal(ot_clock_line.span, 0);
    struct clock_run runs[4] = {{0}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, clock_reader, &runs[i]), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        assert_true(runs[i].reads > 100);
        assert_int_equal(runs[i].back, 0);
        if (runs[i].far)
            fprintf(stderr, "clock: %llu of %llu reads more than 50 us off, worst %llu ns\n",
                    (unsigned long long)runs[i].far, (unsigned long long)runs[i].reads,
                    (unsigned long long)runs[i].worst);
        assert_true(runs[i].far * 1000 <= runs[i].reads); /* a rare outlier: a preemption between reads */
    }
    assert_int_equal(ot_clock_uses_tsc(), use_tsc && cpu_tsc_invariant());
    assert_int_equal(ot_clock_line.span != 0, ot_clock_uses_tsc());
}

static void test_clock_from_tsc_follows_monotonic(void **state)
{
    (void)state;
    clock_check(1);
    clock_check(0); /* OOMTRACE_TSC=0 */
    ot_clock_tune(20000000, 1000000000);
    ot_clock_start(1);
}

/* What every event writes under the lock is the lock's own cache line (record/state.h): the lock, the seq,
 * the ring's slot pointers, the live set's header; the device's current and peak bytes and its device
 * categories are one line of their own. Spread over more lines, each was one more miss an event in a
 * training step, whose work evicts the tracer's lines between its events. */
static void test_event_state_is_one_line(void **state)
{
    (void)state;
    uintptr_t line = (uintptr_t)&ot_lock / 64;
    assert_int_equal((uintptr_t)&ot_lock % 64, 0);
    const void *hot[] = {&ot_lock.sleepers, &ot_state.seq, &ot_state.ring_next, &ot_state.ring_end,
                         &ot_state.live.slots, &ot_state.live.mask, &ot_state.live.count, &ot_state.async_devices};
    for (size_t i = 0; i < sizeof hot / sizeof hot[0]; i++)
        assert_int_equal((uintptr_t)hot[i] / 64, line);
    const struct trace_device *d = ot_devslot(0);
    uintptr_t dl = (uintptr_t)d / 64;
    assert_int_equal((uintptr_t)d % 64, 0);
    const void *dev[] = {&d->cur, &d->peak, &d->peak_seq, &d->by_cat[OT_CAT_DEVICE], &d->by_cat[OT_CAT_ASYNC],
                         &d->by_cat[OT_CAT_VMM], &d->by_cat[OT_CAT_MANAGED]};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        assert_int_equal((uintptr_t)dev[i] / 64, dl);
    assert_true(dl > line);
    /* The clock every event reads: one line (its span fell on the next one, a second miss an event). */
    assert_int_equal((uintptr_t)&ot_clock_line % 64, 0);
    assert_int_equal((uintptr_t)&ot_clock_line.span / 64, (uintptr_t)&ot_clock_line / 64);
    /* The thread's own line: every wrapper reads busy, and the hint of where its event will write is read
     * before the lock (record.c, prefetch_event) from the same line. */
    assert_int_equal((uintptr_t)&ot_self % 64, 0);
    assert_int_equal((uintptr_t)(&ot_self.near + 1) - 1 - (uintptr_t)&ot_self < 64, 1);
}

/* A device is listed once it had a tracked allocation: an allocation of device memory reads only its
 * counters' line (the peak says it was seen), so the other kinds, and those long freed, must still list it. */
static void test_devices_seen(void **state)
{
    (void)state;
    struct trace_sources src;
    reset();
    struct ot_alloc_req imp = {OT_NS_DEVPTR, OT_CAT_IMPORTED, OT_API_cuIpcOpenMemHandle_v2, 0, 2, 0x9000, 4096, 0};
    ot_record_alloc(&imp);
    ot_record_free(OT_NS_DEVPTR, 0x9000, OT_API_cuIpcCloseMemHandle, NULL);
    struct ot_alloc_req dev = {OT_NS_DEVPTR, OT_CAT_ASYNC, OT_API_cuMemAllocAsync, 0, 3, 0xa000, 512, 0};
    ot_record_alloc(&dev);
    ot_record_free(OT_NS_DEVPTR, 0xa000, OT_API_cuMemFreeAsync, NULL);
    assert_int_equal(ot_record_sources(&src, 0), 0);
    assert_int_equal(src.devices, 1ull << 2 | 1ull << 3);
    assert_int_equal(src.async_devices, 1ull << 3);
    reset();
    assert_int_equal(ot_record_sources(&src, 0), 0);
    assert_int_equal(src.devices, 0);
}

int main(void)
{
    ot_backtrace_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_liveset_matches_reference),
        cmocka_unit_test(test_peak_set_is_exact),
        cmocka_unit_test(test_vmm_reference_counts),
        cmocka_unit_test(test_host_pinned_is_not_device_memory),
        cmocka_unit_test(test_markers_before_peak_are_kept),
        cmocka_unit_test(test_options_fall_back_on_bad_values),
        cmocka_unit_test(test_clock_from_tsc_follows_monotonic),
        cmocka_unit_test(test_event_state_is_one_line),
        cmocka_unit_test(test_devices_seen),
    };
    return cmocka_run_group_tests_name("recorder", tests, NULL, NULL);
}
