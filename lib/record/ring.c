/* The event ring: recent events as zstd-compressed chunks under a byte budget (OOMTRACE_RING). Events
 * are varint-encoded into a raw chunk; a full chunk is compressed and appended, and the oldest chunks are
 * dropped while the compressed total exceeds the budget. Each chunk decodes on its own (deltas restart),
 * so dropping one never corrupts another. The live set and the peak do not depend on the ring.
 *
 * Compression runs on a thread of its own: a full raw chunk is queued, and the allocating thread goes on.
 * Compressing 256 KiB under the state lock would stall every allocating thread for about a millisecond.
 * When the compressor falls behind (a full queue) or cannot be started, the allocating thread compresses
 * itself, as a bound on memory. Callers of the ot_ring_* functions hold ot_lock. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/defs.h"
#include "common/options.h"
#include "common/self.h"
#include "record/ring.h"
#include "record/state.h"

struct chunk {
    struct chunk *next;
    uint64_t first_seq, nevents, t0, raw_len, clen;
    uint8_t data[];
};

/* A full raw chunk waiting for the compressor. */
struct pending {
    struct pending *next;
    uint64_t first_seq, nevents, t0;
    size_t len;
    uint8_t *raw;
};

#define MAX_PENDING 8

static struct {
    uint8_t *raw;
    size_t cap, len;
    uint64_t first_seq, nevents, t0, prev_t, prev_addr;
    struct chunk *head, *tail; /* compressed, oldest first */
    struct pending *qhead, *qtail; /* waiting, oldest first */
    struct pending *inflight;      /* the one the compressor is working on: older than the queue */
    uint64_t epoch;                /* a reset while compressing makes the compressor drop its result */
    int nqueued;                   /* waiting and in flight */
    struct pending *spare; /* raw buffers to reuse */
    uint64_t used, kept_sealed, kept_queued, dropped, chunks_dropped;
    ZSTD_CCtx *cctx; /* for compressing inline */
    int thread; /* 0 not started, 1 running, -1 failed: compress inline */
    sem_t work;
} R;

#define EVENT_MAX (10 * 9 + OT_LABEL_MAX + 10)

static size_t chunk_capacity(void)
{
    /* Small budgets get small chunks, so that a small ring still holds several of them. */
    size_t c = ot_opt.ring_bytes;
    if (c > 256 * 1024)
        c = 256 * 1024;
    if (c < 4096)
        c = 4096;
    return c;
}

static void drop_oldest(void)
{
    struct chunk *c = R.head;
    R.head = c->next;
    if (!R.head)
        R.tail = NULL;
    R.used -= c->clen;
    R.kept_sealed -= c->nevents;
    R.dropped += c->nevents;
    R.chunks_dropped++;
    free(c);
}

/* Appends a compressed chunk (c == NULL: compression failed, its events are lost and counted). */
static void append(struct chunk *c, uint64_t nevents)
{
    if (!c) {
        R.dropped += nevents;
        R.chunks_dropped++;
        return;
    }
    if (R.tail)
        R.tail->next = c;
    else
        R.head = c;
    R.tail = c;
    R.used += c->clen;
    R.kept_sealed += c->nevents;
    while (R.head && R.used > ot_opt.ring_bytes)
        drop_oldest();
}

static struct chunk *compress_chunk(ZSTD_CCtx *cctx, const uint8_t *raw, size_t len, uint64_t first_seq,
                                    uint64_t nevents, uint64_t t0)
{
    size_t bound = ZSTD_compressBound(len);
    struct chunk *c = cctx ? malloc(sizeof *c + bound) : NULL;
    size_t clen = c ? ZSTD_compressCCtx(cctx, c->data, bound, raw, len, 1) : 0;
    if (!c || ZSTD_isError(clen)) {
        free(c);
        return NULL;
    }
    struct chunk *s = realloc(c, sizeof *c + clen);
    c = s ? s : c;
    *c = (struct chunk){.first_seq = first_seq, .nevents = nevents, .t0 = t0, .raw_len = len, .clen = clen};
    return c;
}

/* The compressor: takes the oldest waiting chunk, compresses it without the lock, appends it. While it
 * works the chunk is R.inflight, which a snapshot reads (only reads) under the lock. */
static void *compressor(void *arg)
{
    (void)arg;
    ot_self.busy = 1;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    for (;;) {
        while (sem_wait(&R.work) != 0 && errno == EINTR)
            ;
        ot_lock_take();
        struct pending *p = R.qhead;
        if (p) {
            R.qhead = p->next;
            if (!R.qhead)
                R.qtail = NULL;
            R.inflight = p;
        }
        uint64_t epoch = R.epoch;
        ot_lock_give();
        if (!p)
            continue;
        struct chunk *c = compress_chunk(cctx, p->raw, p->len, p->first_seq, p->nevents, p->t0);
        ot_lock_take();
        if (R.epoch == epoch) {
            R.inflight = NULL;
            R.nqueued--;
            R.kept_queued -= p->nevents;
            append(c, p->nevents);
            p->next = R.spare;
            R.spare = p;
        } else { /* the ring was reset meanwhile: this chunk belongs to no one */
            free(c);
            free(p->raw);
            free(p);
        }
        ot_lock_give();
    }
    return NULL;
}

static void start_compressor(void)
{
    R.thread = -1;
    if (sem_init(&R.work, 0, 0) != 0)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* it must never run the program's signal handlers */
    pthread_t t;
    if (pthread_create(&t, NULL, compressor, NULL) == 0) {
        pthread_detach(t);
        R.thread = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void seal(void)
{
    if (!R.nevents)
        return;
    if (R.thread == 0)
        start_compressor();
    struct pending *p = NULL;
    if (R.thread == 1 && R.nqueued < MAX_PENDING) {
        p = R.spare;
        if (p)
            R.spare = p->next;
        else if ((p = malloc(sizeof *p)) != NULL && (p->raw = malloc(R.cap)) == NULL) {
            free(p);
            p = NULL;
        }
    }
    if (p) {
        /* Hand over the full buffer, keep the spare one. */
        uint8_t *full = R.raw;
        R.raw = p->raw;
        *p = (struct pending){.first_seq = R.first_seq, .nevents = R.nevents, .t0 = R.t0, .len = R.len, .raw = full};
        if (R.qtail)
            R.qtail->next = p;
        else
            R.qhead = p;
        R.qtail = p;
        R.nqueued++;
        R.kept_queued += p->nevents;
        sem_post(&R.work);
    } else {
        if (!R.cctx)
            R.cctx = ZSTD_createCCtx();
        append(compress_chunk(R.cctx, R.raw, R.len, R.first_seq, R.nevents, R.t0), R.nevents);
    }
    R.len = 0;
    R.nevents = 0;
}

void ot_ring_append(const struct trace_event *e)
{
    if (!R.raw) {
        R.cap = chunk_capacity();
        R.raw = malloc(R.cap);
        if (!R.raw) {
            R.dropped++;
            return;
        }
    }
    if (R.len + EVENT_MAX > R.cap)
        seal();
    if (!R.nevents) {
        R.first_seq = e->seq;
        R.t0 = R.prev_t = e->time_ns;
        R.prev_addr = 0;
    }
    uint8_t *p = R.raw + R.len;
    p = ot_put_uvarint(p, e->kind);
    p = ot_put_uvarint(p, e->api);
    p = ot_put_uvarint(p, e->cat);
    p = ot_put_uvarint(p, ot_zigzag(e->device));
    p = ot_put_uvarint(p, e->time_ns >= R.prev_t ? e->time_ns - R.prev_t : 0);
    p = ot_put_uvarint(p, e->tid);
    p = ot_put_uvarint(p, ot_zigzag((int64_t)(e->addr - R.prev_addr)));
    p = ot_put_uvarint(p, e->size);
    p = ot_put_uvarint(p, e->stack);
    if (e->kind == OT_EV_MARKER) {
        size_t n = e->label ? strnlen(e->label, OT_LABEL_MAX - 1) : 0;
        p = ot_put_uvarint(p, n);
        memcpy(p, e->label, n);
        p += n;
    }
    if (e->time_ns >= R.prev_t)
        R.prev_t = e->time_ns;
    R.prev_addr = e->addr;
    R.len = (size_t)(p - R.raw);
    R.nevents++;
}

static void put_chunk(struct ot_buf *b, uint64_t first_seq, uint64_t n, uint64_t t0, uint64_t raw_len,
                      const void *z, size_t zlen)
{
    ot_buf_uv(b, first_seq);
    ot_buf_uv(b, n);
    ot_buf_uv(b, t0);
    ot_buf_uv(b, raw_len);
    ot_buf_str(b, z, zlen);
}

/* Compresses raw bytes straight into the snapshot; the ring itself is unchanged. */
static void put_raw(struct ot_buf *b, const uint8_t *raw, size_t len, uint64_t first_seq, uint64_t n, uint64_t t0)
{
    size_t bound = ZSTD_compressBound(len);
    void *z = malloc(bound);
    size_t zlen = z ? ZSTD_compress(z, bound, raw, len, 1) : 0;
    if (!z || ZSTD_isError(zlen))
        b->oom = 1;
    else
        put_chunk(b, first_seq, n, t0, len, z, zlen);
    free(z);
}

void ot_ring_serialize(struct ot_buf *b)
{
    uint64_t n = 0;
    for (struct chunk *c = R.head; c; c = c->next)
        n++;
    for (struct pending *p = R.qhead; p; p = p->next)
        n++;
    n += (R.inflight != NULL) + (R.nevents != 0);
    ot_buf_uv(b, n);
    for (struct chunk *c = R.head; c; c = c->next)
        put_chunk(b, c->first_seq, c->nevents, c->t0, c->raw_len, c->data, c->clen);
    /* The chunk being compressed (the compressor only reads it, and cannot give it back while we hold the
     * lock), then the waiting ones, oldest first. */
    if (R.inflight)
        put_raw(b, R.inflight->raw, R.inflight->len, R.inflight->first_seq, R.inflight->nevents, R.inflight->t0);
    for (struct pending *p = R.qhead; p; p = p->next)
        put_raw(b, p->raw, p->len, p->first_seq, p->nevents, p->t0);
    if (R.nevents)
        put_raw(b, R.raw, R.len, R.first_seq, R.nevents, R.t0);
}

void ot_ring_stats(struct ot_ring_stats *st)
{
    st->kept = R.kept_sealed + R.kept_queued + R.nevents;
    st->dropped = R.dropped;
    st->chunks_dropped = R.chunks_dropped;
    st->used_bytes = R.used;
}

/* Empties the ring. In a forked child the compressor thread did not come along: what it held is freed
 * here and a new one starts on demand. Otherwise (tests) it keeps running and drops what it holds. Callers
 * hold ot_lock, or are the only thread (a forked child). */
void ot_ring_reset(int forked)
{
    while (R.head) {
        struct chunk *c = R.head;
        R.head = c->next;
        free(c);
    }
    while (R.qhead) {
        struct pending *p = R.qhead;
        R.qhead = p->next;
        free(p->raw);
        free(p);
    }
    if (forked && R.inflight) {
        free(R.inflight->raw);
        free(R.inflight);
    }
    R.inflight = NULL;
    R.epoch++;
    R.tail = NULL;
    R.qtail = NULL;
    R.nqueued = 0;
    R.used = R.kept_sealed = R.kept_queued = R.dropped = R.chunks_dropped = 0;
    R.len = R.nevents = 0;
    if (forked)
        R.thread = 0;
}
