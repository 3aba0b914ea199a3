#include "model/events.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

/* Chunks decode independently, and decompressing one costs about as much as decoding its events: the
 * sequential reader has a second thread decompress the next chunk while this one is decoded, and a full
 * scan spreads chunks over several threads. Only where threads need no link flag (glibc 2.34 and later
 * keep pthreads in libc); elsewhere, or with -DOT_NO_THREADS, everything runs in line. */
#if !defined(OT_NO_THREADS) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define OT_THREADS 1
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#define OT_SCAN_MAX_THREADS 8
#endif

/* The ring is the one place where varint speed matters (tens of millions of events, ~10 varints
 * each). Decoding byte by byte chains every varint's position on the previous one's bytes and
 * mispredicts on varying lengths. Here one unaligned load serves a whole varint of up to 8 bytes: the
 * one- and two-byte cases (most fields of most events) are separate branches, which the predictor
 * learns per field and so takes off the dependency chain; longer ones are assembled without branches.
 * Anything else (a longer value, the last bytes of a chunk, a big-endian host) goes to ot_get_uvarint,
 * so the accepted encoding is exactly the shared one. */
static inline uint64_t ev_uv(struct ot_cursor *c)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (__builtin_expect(c->end - c->p >= 8, 1)) {
        uint64_t x;
        memcpy(&x, c->p, 8);
        if (!(x & 0x80)) {
            c->p += 1;
            return x & 0x7f;
        }
        if (!(x & 0x8000)) {
            c->p += 2;
            return (x & 0x7f) | ((x >> 1) & 0x3f80);
        }
        uint64_t stop = ~x & 0x8080808080808080ULL; /* bit 7 clear: the varint's last byte */
        if (__builtin_expect(stop != 0, 1)) {
            c->p += ((unsigned)__builtin_ctzll(stop) + 1) >> 3;
            x &= stop ^ (stop - 1); /* the varint's bytes only */
            x = ((x & 0x7f007f007f007f00ULL) >> 1) | (x & 0x007f007f007f007fULL);
            x = ((x & 0x3fff00003fff0000ULL) >> 2) | (x & 0x00003fff00003fffULL);
            x = ((x & 0x0fffffff00000000ULL) >> 4) | (x & 0x000000000fffffffULL);
            return x;
        }
    }
#endif
    return ot_get_uvarint(c);
}

static inline int64_t ev_sv(struct ot_cursor *c)
{
    return ot_unzigzag(ev_uv(c));
}

#ifdef OT_THREADS
#define OT_SLOT_EMPTY SIZE_MAX

/* Two buffers: the consumer holds chunk i in one (its labels point there) while the worker fills the
 * other with chunk i + 1. A slot's `chunk` says whose it is; ownership moves under the mutex. */
struct ot_prefetch {
    const struct ot_snapshot *snap;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool quit;
    struct {
        struct ot_zbuf z;
        size_t chunk; /* the chunk it holds, or OT_SLOT_EMPTY */
        int rc;
        char why[160];
    } slot[2];
};

static void *prefetch_main(void *arg)
{
    struct ot_prefetch *p = arg;
    for (size_t i = 0; i < p->snap->nchunks; i++) {
        size_t s = i & 1;
        pthread_mutex_lock(&p->mu);
        while (p->slot[s].chunk != OT_SLOT_EMPTY && !p->quit)
            pthread_cond_wait(&p->cv, &p->mu);
        bool quit = p->quit;
        pthread_mutex_unlock(&p->mu);
        if (quit)
            break;
        const struct ot_chunk *ch = &p->snap->chunks[i];
        int rc = ot_zstd_decode(&p->slot[s].z, (const uint8_t *)ch->frame.p, ch->frame.n, ch->raw_len, p->slot[s].why,
                                sizeof(p->slot[s].why));
        pthread_mutex_lock(&p->mu);
        p->slot[s].rc = rc;
        p->slot[s].chunk = i;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (rc < 0)
            break; /* the consumer stops at this chunk */
    }
    return NULL;
}

static struct ot_prefetch *prefetch_start(const struct ot_snapshot *s)
{
    struct ot_prefetch *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->snap = s;
    p->slot[0].chunk = p->slot[1].chunk = OT_SLOT_EMPTY;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    if (pthread_create(&p->thread, NULL, prefetch_main, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

static void prefetch_stop(struct ot_prefetch *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    ot_zbuf_free(&p->slot[0].z);
    ot_zbuf_free(&p->slot[1].z);
    free(p);
}

/* Chunk i's bytes: gives back chunk i - 1's buffer, then waits for chunk i. */
static int prefetch_get(struct ot_prefetch *p, size_t i, const uint8_t **raw, char *why, size_t whylen)
{
    size_t s = i & 1;
    pthread_mutex_lock(&p->mu);
    if (i > 0 && p->slot[(i - 1) & 1].chunk == i - 1) {
        p->slot[(i - 1) & 1].chunk = OT_SLOT_EMPTY;
        pthread_cond_broadcast(&p->cv);
    }
    while (p->slot[s].chunk != i)
        pthread_cond_wait(&p->cv, &p->mu);
    int rc = p->slot[s].rc;
    pthread_mutex_unlock(&p->mu);
    if (rc < 0) {
        snprintf(why, whylen, "%s", p->slot[s].why);
        return -1;
    }
    *raw = p->slot[s].z.p;
    return 0;
}
#endif

void ot_event_reader_init(struct ot_event_reader *r, const struct ot_snapshot *s)
{
    memset(r, 0, sizeof(*r));
    r->snap = s;
}

void ot_event_reader_free(struct ot_event_reader *r)
{
#ifdef OT_THREADS
    prefetch_stop(r->prefetch);
#endif
    ot_zbuf_free(&r->z);
    free(r->ev);
    memset(r, 0, sizeof(*r));
}

/* The decompressed bytes of chunk ci, in order of ci. */
static int chunk_bytes(struct ot_event_reader *r, size_t ci, const uint8_t **raw, char *why, size_t whylen)
{
    const struct ot_chunk *ch = &r->snap->chunks[ci];
#ifdef OT_THREADS
    if (ci == 0 && r->snap->nchunks > 1 && !r->prefetch && !r->shared)
        r->prefetch = prefetch_start(r->snap); /* NULL: no thread, decompress in line */
    if (r->prefetch)
        return prefetch_get(r->prefetch, ci, raw, why, whylen);
#endif
    if (ot_zstd_decode(&r->z, (const uint8_t *)ch->frame.p, ch->frame.n, ch->raw_len, why, whylen) < 0)
        return -1;
    *raw = r->z.p;
    return 0;
}

static int chunk_err(const struct ot_event_reader *r, size_t ci, char *errbuf, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int chunk_err(const struct ot_event_reader *r, size_t ci, char *errbuf, const char *fmt, ...)
{
    const struct ot_chunk *ch = &r->snap->chunks[ci];
    int n = snprintf(errbuf, OT_ERRBUF, "the snapshot is damaged in the event history, the part at byte %" PRIu64
                     ": chunk %zu (first seq %" PRIu64 "): ",
                     r->snap->events_offset, ci, ch->first_seq);
    if (n > 0 && n < OT_ERRBUF) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf + n, OT_ERRBUF - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A full scan's threads share one chunk counter; the first chunk that fails stops the others from
 * taking later ones, and the lowest failing chunk is the one reported, as in a sequential pass. */
struct ot_scan_shared {
#ifdef OT_THREADS
    atomic_size_t next;
    atomic_size_t first_bad; /* SIZE_MAX while none failed */
    pthread_mutex_t mu;
    char err[OT_ERRBUF];
#else
    int unused;
#endif
};

static size_t next_chunk_index(struct ot_event_reader *r)
{
#ifdef OT_THREADS
    if (r->shared) {
        size_t ci = atomic_fetch_add(&r->shared->next, 1);
        return ci > atomic_load(&r->shared->first_bad) ? SIZE_MAX : ci;
    }
#endif
    return r->next_chunk++;
}

int ot_event_reader_next(struct ot_event_reader *r, const struct snap_event **evs, size_t *nout, char errbuf[OT_ERRBUF])
{
    const struct ot_snapshot *s = r->snap;
    if (r->failed) {
        snprintf(errbuf, OT_ERRBUF, "the event ring could not be read");
        return -1;
    }
    while (r->left == 0) {
        size_t ci = next_chunk_index(r);
        if (ci >= s->nchunks)
            return 0;
        const struct ot_chunk *ch = &s->chunks[ci];
        char why[160];
        const uint8_t *raw;
        r->chunk = ci;
        if (chunk_bytes(r, ci, &raw, why, sizeof(why)) < 0) {
            r->failed = true;
            return chunk_err(r, ci, errbuf, "%s", why);
        }
        r->raw = raw;
        r->c = (struct ot_cursor){raw, raw + ch->raw_len, 0};
        r->t = ch->t0_ns;
        r->addr = 0;
        r->index = 0;
        r->left = ch->nevents;
    }
    if (!r->ev && !(r->ev = malloc(OT_EVENT_BATCH * sizeof(*r->ev)))) {
        r->failed = true;
        snprintf(errbuf, OT_ERRBUF, "out of memory decoding the event ring");
        return -1;
    }

    /* Locals, so that the loop keeps its state in registers. */
    const struct ot_chunk *ch = &s->chunks[r->chunk];
    struct ot_cursor c = r->c;
    uint64_t t = r->t, addr = r->addr, seq = ch->first_seq + r->index;
    size_t n = r->left < OT_EVENT_BATCH ? (size_t)r->left : OT_EVENT_BATCH;
    struct snap_event *e = r->ev;
    for (size_t i = 0; i < n; i++, e++) {
        e->kind = ev_uv(&c);
        e->api = ev_uv(&c);
        e->category = ev_uv(&c);
        e->device = ev_sv(&c);
        t += ev_uv(&c);
        e->tid = ev_uv(&c);
        addr += (uint64_t)ev_sv(&c);
        e->size = ev_uv(&c);
        e->stack_id = ev_uv(&c);
        if (e->kind == OT_EV_MARKER) {
            size_t ln;
            const char *lp = ot_get_str(&c, &ln);
            e->label = (struct ot_str){lp, ln};
        } else {
            e->label = (struct ot_str){NULL, 0};
        }
        if (__builtin_expect(c.err, 0)) {
            r->failed = true;
            return chunk_err(r, r->chunk, errbuf, "event %" PRIu64 " of %" PRIu64 " %s at byte %zu of %" PRIu64,
                             r->index + i, ch->nevents,
                             c.p >= c.end ? "runs past the end of the chunk" : "has a malformed varint or label",
                             (size_t)(c.p - r->raw), ch->raw_len);
        }
        e->time_ns = t;
        e->addr = addr;
        e->seq = seq + i;
    }
    /* Bytes after a chunk's last event are ignored, as in sections: room for later minor versions. */
    r->c = c;
    r->t = t;
    r->addr = addr;
    r->index += n;
    r->left -= n;
    *evs = r->ev;
    *nout = n;
    return 1;
}

/* Keeps e among the latest context ends (by seq) of st. */
static void keep_ctx_end(struct ot_event_stats *st, const struct snap_event *e)
{
    size_t at = st->nctx_ends;
    if (at == OT_EV_CTX_ENDS_KEPT) {
        at = 0;
        for (size_t i = 1; i < OT_EV_CTX_ENDS_KEPT; i++)
            if (st->ctx_ends[i].seq < st->ctx_ends[at].seq)
                at = i;
        if (st->ctx_ends[at].seq > e->seq)
            return;
    } else {
        st->nctx_ends++;
    }
    st->ctx_ends[at] = *e;
    st->ctx_ends[at].label = (struct ot_str){NULL, 0};
}

/* A context end's listed frees (CTX_FREED) agree with its event: their device bytes add up to the event's
 * (at most, when the list is short). A hand-edited or damaged list would otherwise move the replay's live
 * bytes and the chart by what no allocation held. */
static int check_ctx_end(const struct ot_snapshot *s, const struct snap_event *e, char *err)
{
    const struct ot_ctx_end *ce = ot_snapshot_ctx_end(s, e->seq);
    if (!ce)
        return 0;
    uint64_t sum = 0;
    bool over = false;
    for (size_t i = 0; i < ce->n; i++)
        if (ot_category_is_device64(ce->v[i].category)) {
            over |= sum + ce->v[i].size < sum;
            sum += ce->v[i].size;
        }
    if (!over && (ce->n < ce->nfreed ? sum <= e->size : sum == e->size))
        return 0;
    snprintf(err, OT_ERRBUF,
             "the context end at seq %" PRIu64 " freed %" PRIu64 " bytes of device memory, but the allocations the "
             "snapshot lists for it add up to %s%" PRIu64,
             e->seq, e->size, over ? "more than 2^64: " : "", sum);
    return -1;
}

static int cmp_event_seq(const void *a, const void *b)
{
    uint64_t x = ((const struct snap_event *)a)->seq, y = ((const struct snap_event *)b)->seq;
    return x < y ? -1 : x > y;
}

/* One scanner's share of the statistics. first/last come from the lowest and highest chunk it saw. */
struct scan_part {
    struct ot_event_stats st;
    size_t first_chunk, last_chunk; /* SIZE_MAX / 0 with no events */
    int rc;
    char err[OT_ERRBUF];
};

static void scan_with(struct ot_event_reader *r, struct scan_part *p)
{
    struct ot_event_stats *st = &p->st;
    const struct snap_event *ev;
    size_t n;
    p->first_chunk = SIZE_MAX;
    p->last_chunk = 0;
    while ((p->rc = ot_event_reader_next(r, &ev, &n, p->err)) > 0) {
        for (size_t i = 0; i < n; i++) {
            const struct snap_event *e = &ev[i];
            uint64_t k = e->kind <= OT_EV_KIND_MAX ? e->kind : 0;
            st->by_kind[k]++;
            if (k == OT_EV_ALLOC)
                st->alloc_bytes = ot_sat_add(st->alloc_bytes, e->size);
            else if (k == OT_EV_FREE)
                st->free_bytes = ot_sat_add(st->free_bytes, e->size);
            else if (k == OT_EV_CONTEXT_END) {
                keep_ctx_end(st, e);
                if (check_ctx_end(r->snap, e, p->err) < 0) {
                    p->rc = -1;
                    return;
                }
            }
        }
        if (!n)
            continue;
        /* Batches of one chunk come in order; chunks are in file (time) order. */
        if (r->chunk < p->first_chunk || (r->chunk == p->first_chunk && r->index == n)) {
            p->first_chunk = r->chunk;
            st->first_seq = ev[0].seq;
            st->first_time_ns = ev[0].time_ns;
        }
        if (r->chunk >= p->last_chunk) {
            p->last_chunk = r->chunk;
            st->last_seq = ev[n - 1].seq;
            st->last_time_ns = ev[n - 1].time_ns;
        }
        st->decoded += n;
    }
}

#ifdef OT_THREADS
struct scan_thread {
    pthread_t thread;
    const struct ot_snapshot *s;
    struct ot_scan_shared *shared;
    struct scan_part part;
};

static void *scan_main(void *arg)
{
    struct scan_thread *t = arg;
    struct ot_event_reader r;
    ot_event_reader_init(&r, t->s);
    r.shared = t->shared;
    scan_with(&r, &t->part);
    if (t->part.rc < 0) {
        pthread_mutex_lock(&t->shared->mu);
        if (r.chunk < atomic_load(&t->shared->first_bad)) {
            atomic_store(&t->shared->first_bad, r.chunk);
            memcpy(t->shared->err, t->part.err, OT_ERRBUF);
        }
        pthread_mutex_unlock(&t->shared->mu);
    }
    ot_event_reader_free(&r);
    return NULL;
}

/* 0 when the scan ran on threads (result in *st / errbuf), 1 when it should run sequentially. */
static int scan_threaded(const struct ot_snapshot *s, struct ot_event_stats *st, char *errbuf, int *rc)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = cpus > 0 ? (size_t)cpus : 1;
    if (n > OT_SCAN_MAX_THREADS)
        n = OT_SCAN_MAX_THREADS;
    if (n > s->nchunks / 2)
        n = s->nchunks / 2;
    if (n < 2)
        return 1;
    struct ot_scan_shared sh;
    atomic_init(&sh.next, 0);
    atomic_init(&sh.first_bad, SIZE_MAX);
    if (pthread_mutex_init(&sh.mu, NULL) != 0)
        return 1;
    struct scan_thread *t = calloc(n, sizeof(*t));
    size_t started = 0;
    for (size_t i = 0; t && i < n; i++) {
        t[i].s = s;
        t[i].shared = &sh;
        if (pthread_create(&t[i].thread, NULL, scan_main, &t[i]) != 0)
            break;
        started++;
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(t[i].thread, NULL);
    if (started == 0) { /* no thread at all: the caller scans in line */
        free(t);
        pthread_mutex_destroy(&sh.mu);
        return 1;
    }
    /* Fewer threads than asked still cover every chunk: the counter hands out all of them. */
    *rc = 0;
    if (atomic_load(&sh.first_bad) != SIZE_MAX) {
        memcpy(errbuf, sh.err, OT_ERRBUF);
        *rc = -1;
    } else {
        size_t first = SIZE_MAX, last = 0;
        for (size_t i = 0; i < started; i++) {
            const struct scan_part *p = &t[i].part;
            for (int k = 0; k <= OT_EV_KIND_MAX; k++)
                st->by_kind[k] += p->st.by_kind[k];
            st->alloc_bytes = ot_sat_add(st->alloc_bytes, p->st.alloc_bytes);
            st->free_bytes = ot_sat_add(st->free_bytes, p->st.free_bytes);
            st->decoded += p->st.decoded;
            for (size_t c = 0; c < p->st.nctx_ends; c++)
                keep_ctx_end(st, &p->st.ctx_ends[c]);
            if (!p->st.decoded)
                continue;
            if (p->first_chunk < first) {
                first = p->first_chunk;
                st->first_seq = p->st.first_seq;
                st->first_time_ns = p->st.first_time_ns;
            }
            if (p->last_chunk >= last) {
                last = p->last_chunk;
                st->last_seq = p->st.last_seq;
                st->last_time_ns = p->st.last_time_ns;
            }
        }
    }
    free(t);
    pthread_mutex_destroy(&sh.mu);
    return 0;
}
#endif

int ot_events_scan(const struct ot_snapshot *s, struct ot_event_stats *st, char errbuf[OT_ERRBUF])
{
    memset(st, 0, sizeof(*st));
#ifdef OT_THREADS
    int trc;
    if (scan_threaded(s, st, errbuf, &trc) == 0) {
        qsort(st->ctx_ends, st->nctx_ends, sizeof(*st->ctx_ends), cmp_event_seq);
        return trc;
    }
#endif
    struct ot_event_reader r;
    ot_event_reader_init(&r, s);
    struct scan_part p = {0};
    scan_with(&r, &p);
    ot_event_reader_free(&r);
    *st = p.st;
    qsort(st->ctx_ends, st->nctx_ends, sizeof(*st->ctx_ends), cmp_event_seq);
    if (p.rc < 0)
        memcpy(errbuf, p.err, OT_ERRBUF);
    return p.rc;
}
