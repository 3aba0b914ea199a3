/* Unit tests of the recorder's event ring, linked against lib/'s objects: its drop accounting, every
 * event decoded as it went in, and a reused key's old record closed in it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "capture/backtrace.h"
#include "common/options.h"
#include "common/self.h"
#include "record/liveset.h"
#include "record/rec.h"
#include "record/ring.h"
#include "record/state.h"
#include "recorder_setup.h"

static uint64_t decode_chunks(const struct ot_buf *b, uint64_t *first, uint64_t *last);

/* A small ring drops whole chunks, oldest first, and counts every event it dropped. */
static void test_ring_counts_dropped_chunks(void **state)
{
    (void)state;
    reset();
    set_ring_bytes(4096);
    for (int i = 0; i < 30000; i++) {
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0,
                                 0x10000000ull + (next() % 1000000) * 512, 512 + next() % 100000, 0};
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
    assert_int_equal(ot_state.seq, 60000);
    assert_true(st.dropped > 0);
    assert_true(st.chunks_dropped > 0);
    assert_int_equal(st.kept + st.dropped, ot_state.seq);
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
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_ASYNC, OT_API_cuMemAllocAsync, 0, dev, key, size, 0};
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
    struct ot_alloc_req a = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, 0x7f0000001000ull, 100, 0};
    ot_record_alloc(&a);
    for (int i = 0; i < 3000; i++) { /* neighbours, so that the close moves records the insert must not lose */
        struct ot_alloc_req q = {OT_NS_DEVPTR, OT_CAT_DEVICE, OT_API_cuMemAlloc_v2, 0, 0, 0x7e0000000000ull + i * 512ull, 1, 0};
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

int main(void)
{
    ot_backtrace_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_counts_dropped_chunks),
        cmocka_unit_test(test_ring_keeps_events_exactly),
        cmocka_unit_test(test_reused_key_closes_the_old_record),
    };
    return cmocka_run_group_tests_name("recorder_ring", tests, NULL, NULL);
}
