/* The event ring: recent events as zstd-compressed chunks under a byte budget (OOMTRACE_RING). Each
 * chunk decodes on its own (deltas restart), so dropping one never corrupts another; the oldest chunks
 * are dropped while the compressed total exceeds the budget. The live set and the peak do not depend on
 * the ring.
 *
 * An event enters the ring as a fixed-size raw record in the current block: a few stores under ot_lock,
 * where varint-encoding it there cost about 130 instructions an event. A full block is handed to the
 * compressor thread, which encodes it (the bytes docs/FORMAT.md gives, deltas from the block's first
 * event) and compresses it without the lock; a snapshot encodes what is not yet compressed itself. The
 * blocks are filled in seq order under the one lock, so the chunks they become are too. When the
 * compressor falls behind (a full queue) or cannot be started, the allocating thread encodes and
 * compresses itself, as a bound on memory. Callers of the ot_ring_* functions hold ot_lock. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "common/defs.h"
#include "common/options.h"
#include "common/self.h"
#include "common/stage.h"
#include "record/ring.h"
#include "record/ring_next.h"
#include "record/state.h"

struct chunk {
    struct chunk *next;
    uint64_t first_seq, nevents, t0, raw_len, clen;
    uint8_t data[];
};

#define MAX_PENDING 8
#define LABELS_CAP (64 * OT_LABEL_MAX)
/* The encoded bytes of one event at most, its label aside: nine varints of up to 10 bytes, and the
 * label's length. */
#define EVENT_MAX (10 * 10)

static struct {
    struct chunk *head, *tail; /* compressed, oldest first */
    struct ot_ring_block *qhead, *qtail; /* waiting, oldest first */
    struct ot_ring_block *inflight;      /* the one the compressor is working on: older than the queue */
    uint64_t epoch;              /* a reset while compressing makes the compressor drop its result */
    int nqueued;                 /* waiting and in flight */
    struct ot_ring_block *spare;         /* blocks to reuse */
    uint64_t used, kept_sealed, kept_queued, dropped, chunks_dropped;
    ZSTD_CCtx *cctx; /* for compressing inline */
    uint8_t *scratch; /* for encoding inline */
    size_t scratch_cap;
    int thread; /* 0 not started, 1 running, -1 failed: compress inline */
    int paused; /* tests: the compressor takes no work (ot_ring_pause) */
    sem_t work;
} R;

#define S ot_state
static struct ot_ring_block *cur; /* being filled: its count is S.ring_next's place once published */

/* The current block's count, from the fast path's slot pointer (ring.h). */
static void sync_cur(void)
{
    if (cur && S.ring_end)
        cur->nevents = (uint64_t)(S.ring_next - cur->ev);
}

/* Hands the current block to the fast path: a block with its first event and room left; else none. */
static void publish(void)
{
    if (cur && cur->nevents && cur->nevents < cur->cap) {
        S.ring_next = &cur->ev[cur->nevents];
        S.ring_end = &cur->ev[cur->cap];
    } else {
        S.ring_next = S.ring_end = NULL;
    }
}

/* Events a block holds: min(OOMTRACE_RING, 256 KiB) / 16, about as many as a raw chunk held when events
 * were encoded as they came (~17 bytes each), so that chunks compress as well as before (at / 32, 5% more
 * bytes an event) and a small ring still holds several. 16,384 at most: 768 KiB of records, and up to
 * MAX_PENDING + 3 blocks exist (waiting, in flight, being filled, a spare); steady's run held 1.8 MiB
 * more than with the encoded chunks. */
static uint64_t block_events(void)
{
    size_t c = ot_opt.ring_bytes;
    if (c > 256 * 1024)
        c = 256 * 1024;
    if (c < 4096)
        c = 4096;
    return c / 16;
}

static struct ot_ring_block *block_new(uint64_t cap)
{
    struct ot_ring_block *b = malloc(sizeof *b + cap * sizeof(struct ot_ring_event) + LABELS_CAP);
    if (!b)
        return NULL;
    b->cap = cap;
    b->labels = (char *)&b->ev[cap];
    b->nevents = b->labels_len = 0;
    b->next = NULL;
    return b;
}

static size_t encoded_max(const struct ot_ring_block *b)
{
    return b->nevents * EVENT_MAX + b->labels_len;
}

/* The chunk's raw bytes (docs/FORMAT.md, EVENTS) into out, which holds encoded_max(b); returns their
 * length. Times that go back (two threads' clocks a few ns apart) are written as equal. */
static size_t encode(const struct ot_ring_block *b, uint8_t *out)
{
    uint64_t prev_t = b->t0, prev_addr = 0;
    uint8_t *p = out;
    for (uint64_t i = 0; i < b->nevents; i++) {
        const struct ot_ring_event *e = &b->ev[i];
        p = ot_put_uvarint(p, e->kind);
        p = ot_put_uvarint(p, e->api);
        p = ot_put_uvarint(p, e->cat);
        p = ot_put_uvarint(p, ot_zigzag(e->device));
        p = ot_put_uvarint(p, e->time_ns >= prev_t ? e->time_ns - prev_t : 0);
        p = ot_put_uvarint(p, e->tid);
        p = ot_put_uvarint(p, ot_zigzag((int64_t)(e->addr - prev_addr)));
        p = ot_put_uvarint(p, e->size);
        p = ot_put_uvarint(p, e->stack);
        if (e->kind == OT_EV_MARKER) {
            p = ot_put_uvarint(p, e->label_len);
            memcpy(p, b->labels + e->label_off, e->label_len);
            p += e->label_len;
        }
        if (e->time_ns >= prev_t)
            prev_t = e->time_ns;
        prev_addr = e->addr;
    }
    return (size_t)(p - out);
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

/* 1 when a block older than seq is still waiting or being compressed. */
static int older_pending(uint64_t seq)
{
    return (R.inflight && R.inflight->first_seq < seq) || (R.qhead && R.qhead->first_seq < seq);
}

/* Puts a compressed chunk in its place by seq (c == NULL: compression failed, its events are lost and
 * counted), then drops the oldest chunks while over the budget. A chunk compressed inline, while the
 * compressor's queue was full, is newer than the queued ones: it goes in first, and nothing newer than a
 * block still queued is dropped before that block lands, so that what the ring keeps is always the most
 * recent events without a gap. */
static void append(struct chunk *c, uint64_t nevents)
{
    if (!c) {
        R.dropped += nevents;
        R.chunks_dropped++;
        return;
    }
    if (!R.tail || R.tail->first_seq < c->first_seq) {
        c->next = NULL;
        if (R.tail)
            R.tail->next = c;
        else
            R.head = c;
        R.tail = c;
    } else {
        struct chunk **at = &R.head;
        while ((*at)->first_seq < c->first_seq)
            at = &(*at)->next;
        c->next = *at;
        *at = c;
    }
    R.used += c->clen;
    R.kept_sealed += c->nevents;
    while (R.head && R.used > ot_opt.ring_bytes && !older_pending(R.head->first_seq))
        drop_oldest();
}

/* Encodes b into *scratch (grown as needed) and compresses it into a new chunk; NULL when out of memory. */
static struct chunk *compress_block(ZSTD_CCtx *cctx, const struct ot_ring_block *b, uint8_t **scratch, size_t *cap)
{
    size_t need = encoded_max(b);
    if (*cap < need) {
        free(*scratch);
        *cap = 0;
        if ((*scratch = malloc(need)) == NULL)
            return NULL;
        *cap = need;
    }
    size_t len = encode(b, *scratch);
    size_t bound = ZSTD_compressBound(len);
    struct chunk *c = cctx ? malloc(sizeof *c + bound) : NULL;
    size_t clen = c ? ZSTD_compressCCtx(cctx, c->data, bound, *scratch, len, 1) : 0;
    if (!c || ZSTD_isError(clen)) {
        free(c);
        return NULL;
    }
    struct chunk *s = realloc(c, sizeof *c + clen);
    c = s ? s : c;
    *c = (struct chunk){.first_seq = b->first_seq, .nevents = b->nevents, .t0 = b->t0, .raw_len = len, .clen = clen};
    return c;
}

/* The compressor: takes the oldest waiting block, encodes and compresses it without the lock, appends
 * it. While it works the block is R.inflight, which a snapshot reads (only reads) under the lock. */
static void *compressor(void *arg)
{
    (void)arg;
    ot_self.busy = 1;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    uint8_t *scratch = NULL;
    size_t scratch_cap = 0;
    for (;;) {
        while (sem_wait(&R.work) != 0 && errno == EINTR)
            ;
        ot_lock_take();
        while (OT_UNLIKELY(R.paused)) {
            ot_lock_give();
            usleep(1000);
            ot_lock_take();
        }
        struct ot_ring_block *p = R.qhead;
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
        struct chunk *c = compress_block(cctx, p, &scratch, &scratch_cap);
        ot_lock_take();
        if (R.epoch == epoch) {
            R.inflight = NULL;
            R.nqueued--;
            R.kept_queued -= p->nevents;
            append(c, p->nevents);
            p->next = R.spare;
            R.spare = p;
        } else { /* the ring was reset meanwhile: this block belongs to no one */
            free(c);
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

/* A block to fill next: a spare one of the size asked now, or a new one. */
static struct ot_ring_block *fresh_block(void)
{
    uint64_t cap = block_events();
    while (R.spare && R.spare->cap != cap) { /* OOMTRACE_RING changed (tests): spares of the old size go */
        struct ot_ring_block *b = R.spare;
        R.spare = b->next;
        free(b);
    }
    struct ot_ring_block *b = R.spare;
    if (b)
        R.spare = b->next;
    else
        b = block_new(cap);
    if (b) {
        b->nevents = b->labels_len = 0;
        b->next = NULL;
    }
    return b;
}

/* The current block is full (or has no room for a label): queue it for the compressor, or compress it
 * here, and start an empty one. */
static void seal(void)
{
    sync_cur();
    S.ring_next = S.ring_end = NULL; /* the block now being filled is empty */
    struct ot_ring_block *full = cur;
#ifdef OT_STAGE_CYCLES
    if (ot_stage_ring_drop) { /* the stage build's OOMTRACE_STAGE_RING=drop: the ring without its compressor */
        R.dropped += full->nevents;
        R.chunks_dropped++;
        full->nevents = full->labels_len = 0;
        return;
    }
#endif
    if (R.thread == 0)
        start_compressor();
    struct ot_ring_block *next = R.thread == 1 && R.nqueued < MAX_PENDING ? fresh_block() : NULL;
    if (next) {
        if (R.qtail)
            R.qtail->next = full;
        else
            R.qhead = full;
        R.qtail = full;
        full->next = NULL;
        R.nqueued++;
        R.kept_queued += full->nevents;
        cur = next;
        sem_post(&R.work);
        return;
    }
    if (!R.cctx)
        R.cctx = ZSTD_createCCtx();
    append(compress_block(R.cctx, full, &R.scratch, &R.scratch_cap), full->nevents);
    full->nevents = full->labels_len = 0;
}

/* The slow path of ot_ring_next: the block's first event, a full block, or none yet. */
struct ot_ring_event *ot_ring_next_slow(uint64_t seq, uint64_t time_ns)
{
    sync_cur();
    struct ot_ring_block *b = cur;
    if (b && !b->nevents && b->cap != block_events()) { /* OOMTRACE_RING changed (tests) */
        free(b);
        b = cur = NULL;
    }
    if (OT_UNLIKELY(!b) && (b = cur = fresh_block()) == NULL) {
        R.dropped++;
        return NULL;
    }
    if (b->nevents == b->cap) {
        seal();
        b = cur;
    }
    if (!b->nevents) {
        b->first_seq = seq;
        b->t0 = time_ns;
    }
    struct ot_ring_event *e = &b->ev[b->nevents++];
    publish();
    return e;
}

struct ot_ring_event *ot_ring_marker(uint64_t seq, uint64_t time_ns, const char *label)
{
    struct ot_ring_block *b = cur;
    if (b && b->labels_len + OT_LABEL_MAX > LABELS_CAP)
        seal(); /* syncs the count first */
    struct ot_ring_event *e = ot_ring_next(seq, time_ns);
    if (!e)
        return NULL;
    b = cur;
    size_t n = label ? strnlen(label, OT_LABEL_MAX - 1) : 0;
    memcpy(b->labels + b->labels_len, label, n);
    e->label_off = (uint32_t)b->labels_len;
    e->label_len = (uint32_t)n;
    b->labels_len += n;
    return e;
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

/* Encodes and compresses a block straight into the snapshot; the ring itself is unchanged. */
static void put_block(struct ot_buf *b, const struct ot_ring_block *blk)
{
    uint8_t *raw = malloc(encoded_max(blk) ? encoded_max(blk) : 1);
    size_t len = raw ? encode(blk, raw) : 0;
    size_t bound = ZSTD_compressBound(len);
    void *z = raw ? malloc(bound) : NULL;
    size_t zlen = z ? ZSTD_compress(z, bound, raw, len, 1) : 0;
    if (!z || ZSTD_isError(zlen))
        b->oom = 1;
    else
        put_chunk(b, blk->first_seq, blk->nevents, blk->t0, len, z, zlen);
    free(z);
    free(raw);
}

void ot_ring_serialize(struct ot_buf *b)
{
    sync_cur();
    uint64_t n = 0;
    for (struct chunk *c = R.head; c; c = c->next)
        n++;
    for (struct ot_ring_block *p = R.qhead; p; p = p->next)
        n++;
    n += (R.inflight != NULL) + (cur && cur->nevents);
    ot_buf_uv(b, n);
    /* By seq: the compressed chunks, merged with the block being compressed (the compressor only reads it,
     * and cannot give it back while we hold the lock) and the waiting ones, which are older than any chunk
     * compressed inline; then the one being filled. */
    struct chunk *c = R.head;
    struct ot_ring_block *p = R.inflight ? R.inflight : R.qhead;
    while (c || p) {
        if (c && (!p || c->first_seq < p->first_seq)) {
            put_chunk(b, c->first_seq, c->nevents, c->t0, c->raw_len, c->data, c->clen);
            c = c->next;
        } else {
            put_block(b, p);
            p = p == R.inflight ? R.qhead : p->next;
        }
    }
    if (cur && cur->nevents)
        put_block(b, cur);
}

void ot_ring_stats(struct ot_ring_stats *st)
{
    sync_cur();
    st->kept = R.kept_sealed + R.kept_queued + (cur ? cur->nevents : 0);
    st->dropped = R.dropped;
    st->chunks_dropped = R.chunks_dropped;
    st->used_bytes = R.used;
    st->queued = (uint64_t)R.nqueued;
}

void ot_ring_pause(int on)
{
    R.paused = on;
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
        struct ot_ring_block *p = R.qhead;
        R.qhead = p->next;
        free(p);
    }
    if (forked && R.inflight)
        free(R.inflight);
    R.inflight = NULL;
    R.epoch++;
    R.tail = NULL;
    R.qtail = NULL;
    R.nqueued = 0;
    R.used = R.kept_sealed = R.kept_queued = R.dropped = R.chunks_dropped = 0;
    if (cur)
        cur->nevents = cur->labels_len = 0;
    S.ring_next = S.ring_end = NULL;
    if (forked)
        R.thread = 0;
}
