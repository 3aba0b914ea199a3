/* A minimal snapshot walker for the benchmarks (docs/FORMAT.md): file and section headers, META's
 * counters, the EVENTS chunks. Not a reader: it trusts the file (the benchmarks wrote it). */
#ifndef BENCH_SNAPFILE_H
#define BENCH_SNAPFILE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

struct sf_section {
    uint32_t type, flags;
    uint64_t stored_len, raw_len;
    const uint8_t *stored; /* into the file image */
    uint8_t *raw;          /* decompressed (or a copy); sf_load fills it */
};

struct sf_file {
    uint8_t *img;
    size_t len;
    struct sf_section sec[64];
    int nsec;
};

static inline uint64_t sf_uv(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    for (unsigned sh = 0; *p < end && sh < 64; sh += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80))
            break;
    }
    return v;
}

static inline int64_t sf_sv(const uint8_t **p, const uint8_t *end)
{
    uint64_t u = sf_uv(p, end);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static inline void sf_skipstr(const uint8_t **p, const uint8_t *end)
{
    uint64_t n = sf_uv(p, end);
    *p = (uint64_t)(end - *p) < n ? end : *p + n;
}

static inline uint64_t sf_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Reads the file and splits it into sections, and fills raw for: META only (decompress 0), META,
 * STACKS and LIVE or LIVE_SEQ (1), every section (2). */
static inline int sf_load(struct sf_file *f, const char *path, int decompress)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->img = malloc((size_t)n + 1);
    if (!f->img || fread(f->img, 1, (size_t)n, fp) != (size_t)n) {
        fclose(fp);
        return -1;
    }
    fclose(fp);
    f->len = (size_t)n;
    if (f->len < 32 || memcmp(f->img, "OOMTRACE", 8))
        return -1;
    size_t off = 32;
    while (off + 24 <= f->len && f->nsec < 64) {
        struct sf_section *s = &f->sec[f->nsec++];
        s->type = (uint32_t)sf_le(f->img + off, 4);
        s->flags = (uint32_t)sf_le(f->img + off + 4, 4);
        s->stored_len = sf_le(f->img + off + 8, 8);
        s->raw_len = sf_le(f->img + off + 16, 8);
        s->stored = f->img + off + 24;
        off += 24 + s->stored_len;
        if (off > f->len)
            return -1;
        if (s->type != 1 && decompress == 0)
            continue;
        if (s->type != 1 && s->type != 7 && s->type != 8 && s->type != 16 && decompress == 1)
            continue;
        s->raw = malloc(s->raw_len + 1);
        if (!s->raw)
            return -1;
        if (s->flags & 1) {
            size_t r = ZSTD_decompress(s->raw, s->raw_len, s->stored, s->stored_len);
            if (ZSTD_isError(r) || r != s->raw_len)
                return -1;
        } else {
            memcpy(s->raw, s->stored, s->raw_len);
        }
    }
    return 0;
}

static inline void sf_free(struct sf_file *f)
{
    for (int i = 0; i < f->nsec; i++)
        free(f->sec[i].raw);
    free(f->img);
}

static inline const struct sf_section *sf_find(const struct sf_file *f, uint32_t type)
{
    for (int i = 0; i < f->nsec; i++)
        if (f->sec[i].type == type)
            return &f->sec[i];
    return NULL;
}

struct sf_meta {
    uint64_t events_recorded, events_kept, events_dropped, chunks_dropped, ring_budget, ring_used;
};

static inline int sf_meta(const struct sf_file *f, struct sf_meta *m)
{
    const struct sf_section *s = sf_find(f, 1);
    if (!s || !s->raw)
        return -1;
    const uint8_t *p = s->raw, *e = s->raw + s->raw_len;
    sf_skipstr(&p, e);                 /* tracer_version */
    sf_uv(&p, e);                      /* trigger */
    sf_skipstr(&p, e);                 /* reason */
    sf_uv(&p, e);                      /* pid */
    sf_uv(&p, e);                      /* ppid */
    sf_skipstr(&p, e);                 /* host */
    for (uint64_t argc = sf_uv(&p, e); argc; argc--)
        sf_skipstr(&p, e);
    sf_skipstr(&p, e);                 /* exe */
    sf_uv(&p, e), sf_uv(&p, e), sf_uv(&p, e); /* wall, mono, start */
    sf_sv(&p, e), sf_sv(&p, e), sf_sv(&p, e); /* rank, local_rank, world_size */
    sf_skipstr(&p, e);                 /* rank_source */
    m->events_recorded = sf_uv(&p, e);
    m->events_kept = sf_uv(&p, e);
    m->events_dropped = sf_uv(&p, e);
    m->chunks_dropped = sf_uv(&p, e);
    m->ring_budget = sf_uv(&p, e);
    m->ring_used = sf_uv(&p, e);
    return p <= e ? 0 : -1;
}

/* The first uv of a section (the count of STACKS, LIVE), or 0. */
static inline uint64_t sf_count(const struct sf_file *f, uint32_t type)
{
    const struct sf_section *s = sf_find(f, type);
    if (!s || !s->raw)
        return 0;
    const uint8_t *p = s->raw;
    return sf_uv(&p, s->raw + s->raw_len);
}

struct sf_events {
    uint64_t nchunks, nevents, frame_bytes, raw_bytes;
};

/* Walks the EVENTS chunks. decode 1: decompresses each chunk only (the floor of a reader's event
 * pass); decode 2: also decodes every event. Returns a checksum, so the work cannot be skipped. */
static inline uint64_t sf_events(const struct sf_file *f, struct sf_events *ev, int decode)
{
    memset(ev, 0, sizeof *ev);
    const struct sf_section *s = sf_find(f, 10);
    if (!s)
        return 0;
    const uint8_t *p = s->stored, *e = s->stored + s->stored_len; /* EVENTS is never section-compressed */
    ev->nchunks = sf_uv(&p, e);
    uint8_t *buf = NULL;
    size_t cap = 0;
    uint64_t sum = 0;
    ZSTD_DCtx *dctx = decode ? ZSTD_createDCtx() : NULL;
    for (uint64_t c = 0; c < ev->nchunks && p < e; c++) {
        sf_uv(&p, e); /* first_seq */
        uint64_t n = sf_uv(&p, e);
        uint64_t t = sf_uv(&p, e);
        uint64_t raw_len = sf_uv(&p, e);
        uint64_t zlen = sf_uv(&p, e);
        const uint8_t *z = p;
        p += zlen;
        ev->nevents += n;
        ev->frame_bytes += zlen;
        ev->raw_bytes += raw_len;
        if (!decode)
            continue;
        if (raw_len > cap) {
            cap = raw_len;
            buf = realloc(buf, cap);
        }
        size_t got = ZSTD_decompressDCtx(dctx, buf, cap, z, zlen);
        if (ZSTD_isError(got) || got != raw_len) {
            fprintf(stderr, "snapfile: chunk %llu does not decompress\n", (unsigned long long)c);
            exit(2);
        }
        sum += buf[raw_len - 1];
        if (decode < 2)
            continue;
        const uint8_t *q = buf, *qe = buf + raw_len;
        uint64_t addr = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t kind = sf_uv(&q, qe);
            uint64_t api = sf_uv(&q, qe);
            uint64_t cat = sf_uv(&q, qe);
            int64_t dev = sf_sv(&q, qe);
            t += sf_uv(&q, qe);
            uint64_t tid = sf_uv(&q, qe);
            addr += (uint64_t)sf_sv(&q, qe);
            uint64_t size = sf_uv(&q, qe);
            uint64_t stack = sf_uv(&q, qe);
            if (kind == 4)
                sf_skipstr(&q, qe);
            sum += kind + api + cat + (uint64_t)dev + t + tid + addr + size + stack;
        }
    }
    ZSTD_freeDCtx(dctx);
    free(buf);
    return sum;
}
#endif
