/* Unit tests of the recorder's core, linked against lib/'s objects: the live set, the exact peak set,
 * VMM reference counting, the ring's drop accounting and the options table. */
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
#include "record/liveset.h"
#include "record/rec.h"
#include "record/ring.h"
#include "record/state.h"

/* A deterministic generator, so a failure reproduces. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The ring's compressor thread, started by an earlier test, reads ot_opt.ring_bytes under ot_lock when it
 * appends a chunk: options are written under the same lock (TSan, make tsan). */
static void set_ring_bytes(uint64_t bytes)
{
    ot_lock_take();
    ot_opt.ring_bytes = bytes;
    ot_lock_give();
}

static void reset(void)
{
    ot_lock_take();
    ot_opt.depth = 16;
    ot_opt.dump_oom = 0;
    ot_lock_give();
    set_ring_bytes(64 << 20);
    ot_record_reset(0);
}

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
            struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, addr, size};
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
    struct ot_alloc_req q = {OT_NS_VMM, OT_CAT_VMM, OT_API_cuMemCreate, 0, 0, h, size};
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
    struct ot_alloc_req hq = {OT_NS_VMM, OT_CAT_VMM, OT_API_cuMemCreate, OT_REC_HOST_LOCATION, -1, 0x77, size};
    ot_record_alloc(&hq);
    assert_int_equal(ot_state.dev[0].cur, 0);
    assert_int_equal(ot_state.host.by_cat[OT_CAT_VMM], size);
}

/* Host pinned memory is reported on the host, never in a device's totals or peak. */
static void test_host_pinned_is_not_device_memory(void **state)
{
    (void)state;
    reset();
    struct ot_alloc_req q = {OT_NS_HOST, OT_CAT_HOST_PINNED, OT_API_cuMemHostAlloc, 0, -1, 0x5000, 4096};
    ot_record_alloc(&q);
    assert_int_equal(ot_state.host.by_cat[OT_CAT_HOST_PINNED], 4096);
    assert_int_equal(ot_state.host.cur, 0);
    assert_int_equal(ot_state.dev[0].peak, 0);
    ot_record_free(OT_NS_HOST, 0x5000, OT_API_cuMemFreeHost, NULL);
    assert_int_equal(ot_state.host.by_cat[OT_CAT_HOST_PINNED], 0);
}

static uint64_t decode_chunks(const struct ot_buf *b, uint64_t *first, uint64_t *last);

/* A small ring drops whole chunks, oldest first, and counts every event it dropped. */
static void test_ring_counts_dropped_chunks(void **state)
{
    (void)state;
    reset();
    set_ring_bytes(4096);
    for (int i = 0; i < 30000; i++) {
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0,
                                 0x10000000ull + (next() % 1000000) * 512, 512 + next() % 100000};
        ot_record_alloc(&q);
        ot_record_free(OT_NS_DEVPTR, q.key, OT_API_cuMemFree_v2, NULL);
    }
    /* The ring is shared with its compressor thread: read it as the snapshot writer does, under the lock.
     * Chunks still queued for the compressor count as kept until it appends them, and only appended chunks
     * are dropped (none newer than a queued one, which may take the budget over until it lands): on a loaded
     * machine the queue can hold the rest, so wait (bounded) for the thread. */
    struct ot_ring_stats st;
    for (int tries = 0;; tries++) {
        ot_lock_take();
        ot_ring_stats(&st);
        if ((st.dropped > 0 && st.queued == 0) || tries >= 1000)
            break;
        ot_lock_give();
        usleep(10000);
    }
    assert_int_equal(ot_state.recorded, 60000);
    assert_true(st.dropped > 0);
    assert_true(st.chunks_dropped > 0);
    assert_int_equal(st.kept + st.dropped, ot_state.recorded);
    assert_true(st.used_bytes <= 4096);

    struct ot_buf b = {0};
    ot_ring_serialize(&b);
    uint64_t last_seq = ot_state.seq;
    ot_lock_give();
    uint64_t first = 0, last = 0;
    uint64_t n = decode_chunks(&b, &first, &last);
    /* What is kept is exactly the newest events, without a gap. */
    assert_int_equal(n, st.kept);
    assert_int_equal(last, last_seq);
    assert_int_equal(last - first + 1, st.kept);
    ot_buf_free(&b);
}

#include <zstd.h>
static uint64_t decode_chunks(const struct ot_buf *b, uint64_t *first, uint64_t *last)
{
    struct ot_cursor c = {b->p, b->p + b->len, 0};
    uint64_t nchunks = ot_get_uvarint(&c), total = 0, expect_seq = 0;
    for (uint64_t i = 0; i < nchunks; i++) {
        uint64_t fs = ot_get_uvarint(&c), ne = ot_get_uvarint(&c);
        ot_get_uvarint(&c); /* t0 */
        uint64_t raw_len = ot_get_uvarint(&c);
        size_t zlen;
        const char *z = ot_get_str(&c, &zlen);
        assert_false(c.err);
        uint8_t *raw = malloc(raw_len);
        assert_int_equal(ZSTD_decompress(raw, raw_len, z, zlen), raw_len);
        struct ot_cursor e = {raw, raw + raw_len, 0};
        for (uint64_t k = 0; k < ne; k++) {
            uint64_t kind = ot_get_uvarint(&e);
            for (int f = 0; f < 8; f++)
                ot_get_uvarint(&e);
            if (kind == OT_EV_MARKER) {
                size_t l;
                ot_get_str(&e, &l);
            }
        }
        assert_false(e.err);
        assert_true(e.p == e.end);
        free(raw);
        if (i == 0)
            *first = fs;
        else
            assert_int_equal(fs, expect_seq);
        expect_seq = fs + ne;
        total += ne;
    }
    *last = expect_seq - 1;
    return total;
}

/* One event of the ring as decoded (docs/FORMAT.md, EVENTS). */
struct dec_event {
    uint64_t seq, kind, api, cat, tid, addr, size, stack, time_ns;
    int64_t device;
    char label[OT_LABEL_MAX];
};

/* Decodes a serialized ring into v (room for cap); returns the count. Chunks must come in seq order. */
static size_t decode_events(const struct ot_buf *b, struct dec_event *v, size_t cap)
{
    struct ot_cursor c = {b->p, b->p + b->len, 0};
    uint64_t nchunks = ot_get_uvarint(&c);
    size_t n = 0;
    for (uint64_t i = 0; i < nchunks; i++) {
        uint64_t fs = ot_get_uvarint(&c), ne = ot_get_uvarint(&c), t = ot_get_uvarint(&c);
        uint64_t raw_len = ot_get_uvarint(&c);
        size_t zlen;
        const char *z = ot_get_str(&c, &zlen);
        assert_false(c.err);
        uint8_t *raw = malloc(raw_len + 1);
        assert_int_equal(ZSTD_decompress(raw, raw_len, z, zlen), raw_len);
        struct ot_cursor e = {raw, raw + raw_len, 0};
        uint64_t addr = 0;
        for (uint64_t k = 0; k < ne; k++) {
            assert_true(n < cap);
            struct dec_event *d = &v[n++];
            memset(d, 0, sizeof *d);
            d->seq = fs + k;
            d->kind = ot_get_uvarint(&e);
            d->api = ot_get_uvarint(&e);
            d->cat = ot_get_uvarint(&e);
            d->device = ot_unzigzag(ot_get_uvarint(&e));
            t += ot_get_uvarint(&e);
            d->time_ns = t;
            d->tid = ot_get_uvarint(&e);
            addr += (uint64_t)ot_unzigzag(ot_get_uvarint(&e));
            d->addr = addr;
            d->size = ot_get_uvarint(&e);
            d->stack = ot_get_uvarint(&e);
            if (d->kind == OT_EV_MARKER) {
                size_t l;
                const char *s = ot_get_str(&e, &l);
                assert_true(s && l < OT_LABEL_MAX);
                memcpy(d->label, s, l);
            }
        }
        assert_false(e.err);
        assert_true(e.p == e.end);
        free(raw);
        assert_true(n == ne || v[n - ne - 1].seq + 1 == fs); /* no gap, no reorder between chunks */
    }
    return n;
}

/* Every event comes out of the ring as it went in, the newest without a gap and in seq order, whether its
 * block was compressed by the compressor, inline while the compressor's queue was full, or at the
 * snapshot; marker labels long enough to fill a block's room for labels before its events do. */
static void test_ring_keeps_events_exactly(void **state)
{
    (void)state;
    reset();
    set_ring_bytes(4096);
    enum { N = 12000 };
    static struct dec_event ref[N + 1], got[N + 1];
    ot_lock_take();
    ot_ring_pause(1); /* the queue fills, then blocks are compressed inline, newer than the queued ones */
    ot_lock_give();
    uint32_t tid = ot_tid();
    uint64_t seq = 0;
    for (int i = 0; seq + 3 <= N; i++) {
        if (i % 5 == 0) {
            struct dec_event *m = &ref[++seq];
            m->kind = OT_EV_MARKER;
            m->api = OT_API_oomtrace_mark;
            m->device = -1;
            size_t len = 1 + next() % (OT_LABEL_MAX - 1);
            for (size_t k = 0; k < len; k++)
                m->label[k] = (char)('a' + (seq + k) % 26);
            ot_record_marker(m->label);
        }
        uint64_t key = 0x7f0000000000ull + (next() % 100000) * 512, size = 1 + next() % (1ull << 40);
        int dev = (int)(next() % 4);
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_ASYNC, OT_API_cuMemAllocAsync, 0, dev, key, size};
        ot_record_alloc(&q);
        ref[++seq] = (struct dec_event){.kind = OT_EV_ALLOC, .api = OT_API_cuMemAllocAsync, .cat = OT_CAT_ASYNC,
                                        .device = dev, .addr = key, .size = size};
        ot_record_free(OT_NS_DEVPTR, key, OT_API_cuMemFreeAsync, NULL);
        ref[++seq] = (struct dec_event){.kind = OT_EV_FREE, .api = OT_API_cuMemFreeAsync, .cat = OT_CAT_ASYNC,
                                        .device = dev, .addr = key, .size = size};
    }
    for (int pass = 0; pass < 2; pass++) {
        struct ot_ring_stats st;
        struct ot_buf b = {0};
        for (int tries = 0;; tries++) {
            ot_lock_take();
            if (pass == 1)
                ot_ring_pause(0);
            ot_ring_stats(&st);
            /* pass 0: read while blocks still wait, older than chunks compressed inline; pass 1: after the
             * compressor caught up, with the budget kept */
            if (pass == 0 || (st.queued == 0 && st.used_bytes <= 4096) || tries >= 1000)
                break;
            ot_lock_give();
            usleep(10000);
        }
        if (pass == 0)
            assert_true(st.queued > 0);
        else
            assert_true(st.queued == 0 && st.used_bytes <= 4096);
        ot_ring_serialize(&b);
        assert_int_equal(st.kept + st.dropped, seq);
        ot_lock_give();
        size_t n = decode_events(&b, got, N + 1);
        ot_buf_free(&b);
        assert_int_equal(n, st.kept);
        assert_true(n > 0);
        assert_int_equal(got[n - 1].seq, seq);
        for (size_t i = 0; i < n; i++) {
            const struct dec_event *g = &got[i], *r = &ref[g->seq];
            assert_int_equal(g->kind, r->kind);
            assert_int_equal(g->api, r->api);
            assert_int_equal(g->cat, r->cat);
            assert_int_equal(g->device, r->device);
            assert_int_equal(g->tid, tid);
            assert_int_equal(g->addr, r->addr);
            assert_int_equal(g->size, r->size);
            assert_true(r->kind == OT_EV_ALLOC ? g->stack != 0 : g->stack == 0);
            assert_string_equal(g->label, r->label);
            assert_true(i == 0 || g->time_ns >= got[i - 1].time_ns);
        }
    }
}

/* A key the driver hands out again while the tracer still holds it (its free went through a door the
 * tracer does not see): the old record is closed by a FREE with no API, then the new one is live, found
 * and inserted by one probe of the live set; the device's bytes count the new one only. */
static void test_reused_key_closes_the_old_record(void **state)
{
    (void)state;
    reset();
    struct ot_alloc_req a = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, 0x7f0000001000ull, 100};
    ot_record_alloc(&a);
    for (int i = 0; i < 3000; i++) { /* neighbours, so that the close moves records the insert must not lose */
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, 0x7e0000000000ull + i * 512ull, 1};
        ot_record_alloc(&q);
    }
    a.size = 200;
    ot_record_alloc(&a);
    ot_lock_take();
    const struct ot_rec *r = ot_live_find(&ot_state.live, OT_NS_DEVPTR, a.key);
    assert_non_null(r);
    assert_int_equal(r->size, 200);
    assert_int_equal(ot_state.live.count, 3001);
    assert_int_equal(ot_state.dev[0].cur, 3000 + 200);
    assert_int_equal(ot_state.seq, 3003);
    struct ot_buf b = {0};
    ot_ring_serialize(&b);
    ot_lock_give();
    static struct dec_event got[3004];
    size_t n = decode_events(&b, got, 3004);
    ot_buf_free(&b);
    assert_int_equal(n, 3003);
    assert_int_equal(got[3001].kind, OT_EV_FREE);
    assert_int_equal(got[3001].api, OT_API_NONE);
    assert_int_equal(got[3001].size, 100);
    assert_int_equal(got[3002].kind, OT_EV_ALLOC);
    assert_int_equal(got[3002].size, 200);
    for (int i = 0; i < 3000; i++)
        assert_non_null(ot_live_find(&ot_state.live, OT_NS_DEVPTR, 0x7e0000000000ull + i * 512ull));
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
    struct ot_alloc_req big = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, 0x1000, 1 << 30};
    ot_record_alloc(&big);
    ot_record_free(OT_NS_DEVPTR, 0x1000, OT_API_cuMemFree_v2, NULL);
    for (int i = 20; i < 3000; i++) {
        snprintf(label, sizeof label, "step %d", i);
        ot_record_marker(label);
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, 0x2000, 4096};
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
}

static void test_clock_from_tsc_follows_monotonic(void **state)
{
    (void)state;
    clock_check(1);
    clock_check(0); /* OOMTRACE_TSC=0 */
    ot_clock_tune(20000000, 1000000000);
    ot_clock_start(1);
}

/* ot_lock (record/lock.h): eight threads adding under it lose no update, however they meet (spinning,
 * asleep on the futex, woken by a give); a bounded take gives up while another thread holds it, and
 * takes it once given back. */
static uint64_t lock_counter;

static void *lock_adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50000; i++) {
        ot_lock_take();
        uint64_t v = lock_counter;
        if (i % 1024 == 0)
            sched_yield(); /* held across a yield now and then: the others spin out and sleep */
        lock_counter = v + 1;
        ot_lock_give();
    }
    return NULL;
}

struct lock_try {
    int got, errno_kept;
};

static void *lock_try_briefly(void *arg)
{
    struct lock_try *t = arg;
    errno = 1234; /* the program's: the futex calls must leave it */
    t->got = ot_lock_take_within(20000000); /* 20 ms */
    t->errno_kept = errno == 1234;
    if (t->got == 0)
        ot_lock_give();
    return NULL;
}

static void test_lock_excludes_and_gives_up(void **state)
{
    (void)state;
    pthread_t th[8];
    lock_counter = 0;
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&th[i], NULL, lock_adder, NULL), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(lock_counter, 8 * 50000);
    assert_int_equal(__atomic_load_n(&ot_lock.sleepers, __ATOMIC_RELAXED), 0);

    struct lock_try tr = {1, 0};
    ot_lock_take();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, lock_try_briefly, &tr), 0);
    pthread_join(t, NULL);
    assert_int_equal(tr.got, -1);
    assert_true(tr.errno_kept);
    ot_lock_give();
    assert_int_equal(pthread_create(&t, NULL, lock_try_briefly, &tr), 0);
    pthread_join(t, NULL);
    assert_int_equal(tr.got, 0);
}

int main(void)
{
    ot_backtrace_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_liveset_matches_reference),
        cmocka_unit_test(test_peak_set_is_exact),
        cmocka_unit_test(test_vmm_reference_counts),
        cmocka_unit_test(test_host_pinned_is_not_device_memory),
        cmocka_unit_test(test_ring_counts_dropped_chunks),
        cmocka_unit_test(test_ring_keeps_events_exactly),
        cmocka_unit_test(test_reused_key_closes_the_old_record),
        cmocka_unit_test(test_markers_before_peak_are_kept),
        cmocka_unit_test(test_options_fall_back_on_bad_values),
        cmocka_unit_test(test_clock_from_tsc_follows_monotonic),
        cmocka_unit_test(test_lock_excludes_and_gives_up),
    };
    return cmocka_run_group_tests_name("recorder", tests, NULL, NULL);
}
