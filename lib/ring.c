/* The event ring: recent events as zstd-compressed chunks under a byte budget (OOMTRACE_RING). Events
 * are varint-encoded into a raw chunk; a full chunk is compressed and appended, and the oldest chunks are
 * dropped while the compressed total exceeds the budget. Each chunk decodes on its own (deltas restart),
 * so dropping one never corrupts another. The live set and the peak do not depend on the ring.
 * Callers hold ot_lock. */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "ring.h"

struct chunk {
    struct chunk *next;
    uint64_t first_seq, nevents, t0, raw_len, clen;
    uint8_t data[];
};

static struct {
    uint8_t *raw;
    size_t cap, len;
    uint64_t first_seq, nevents, t0, prev_t, prev_addr;
    struct chunk *head, *tail; /* oldest first */
    uint64_t used, kept_sealed, dropped, chunks_dropped;
    ZSTD_CCtx *cctx;
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

static void seal(void)
{
    if (!R.nevents)
        return;
    if (!R.cctx)
        R.cctx = ZSTD_createCCtx();
    size_t bound = ZSTD_compressBound(R.len);
    struct chunk *c = R.cctx ? malloc(sizeof *c + bound) : NULL;
    size_t clen = c ? ZSTD_compressCCtx(R.cctx, c->data, bound, R.raw, R.len, 1) : 0;
    if (!c || ZSTD_isError(clen)) {
        free(c);
        R.dropped += R.nevents;
        R.chunks_dropped++;
    } else {
        struct chunk *s = realloc(c, sizeof *c + clen);
        c = s ? s : c;
        c->next = NULL;
        c->first_seq = R.first_seq;
        c->nevents = R.nevents;
        c->t0 = R.t0;
        c->raw_len = R.len;
        c->clen = clen;
        if (R.tail)
            R.tail->next = c;
        else
            R.head = c;
        R.tail = c;
        R.used += clen;
        R.kept_sealed += c->nevents;
        while (R.head && R.used > ot_opt.ring_bytes)
            drop_oldest();
    }
    R.len = 0;
    R.nevents = 0;
}

void ot_ring_append(const struct ot_event *e)
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

void ot_ring_serialize(struct ot_buf *b)
{
    uint64_t n = 0;
    for (struct chunk *c = R.head; c; c = c->next)
        n++;
    /* The open chunk is compressed into the snapshot only; the ring itself is unchanged. */
    void *z = NULL;
    size_t zlen = 0;
    if (R.nevents) {
        size_t bound = ZSTD_compressBound(R.len);
        z = malloc(bound);
        zlen = z ? ZSTD_compress(z, bound, R.raw, R.len, 1) : 0;
        if (!z || ZSTD_isError(zlen)) {
            free(z);
            z = NULL;
        } else {
            n++;
        }
    }
    ot_buf_uv(b, n);
    for (struct chunk *c = R.head; c; c = c->next)
        put_chunk(b, c->first_seq, c->nevents, c->t0, c->raw_len, c->data, c->clen);
    if (z)
        put_chunk(b, R.first_seq, R.nevents, R.t0, R.len, z, zlen);
    free(z);
}

void ot_ring_stats(struct ot_ring_stats *st)
{
    st->kept = R.kept_sealed + R.nevents;
    st->dropped = R.dropped;
    st->chunks_dropped = R.chunks_dropped;
    st->used_bytes = R.used;
}

void ot_ring_reset(void)
{
    while (R.head) {
        struct chunk *c = R.head;
        R.head = c->next;
        free(c);
    }
    R.tail = NULL;
    R.used = R.kept_sealed = R.dropped = R.chunks_dropped = 0;
    R.len = R.nevents = 0;
}
