/* Hostile snapshots (issue 15, defect 12): small files that claim huge or quadratic work. Each is a
 * valid file header and sections that are well formed one by one; what they claim is the attack.
 *   bombs live-seq   OUT   a LIVE_SEQ of 100 M zero records in one zstd frame of zeros (~1 GB raw)
 *   bombs peaks      OUT   15,000 PEAK sections, one per device
 *   bombs peak-refs  OUT   300,000 live records and 4,000 PEAK_REF sections that refer to them
 *   bombs events     OUT   ring chunks of 256 MiB of zeros each, ~900 M events claimed
 * With a third argument BASE (a valid snapshot, e.g. from snapgen), BASE's sections come first, less
 * those the bomb replaces (the live set, peaks, or events), so that a reader that does not refuse the
 * bomb goes on to analyse and report it. * Used by tests/sh/hostile_files.sh and tests/fuzz (seeds); the figures are in docs/RELIABILITY.md. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "oomtrace_format.h"

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void need(struct buf *b, size_t k)
{
    if (b->n + k <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + k)
        cap *= 2;
    if (!(b->p = realloc(b->p, cap))) {
        fprintf(stderr, "bombs: out of memory\n");
        exit(1);
    }
    b->cap = cap;
}

static void put(struct buf *b, const void *p, size_t n)
{
    need(b, n);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void uv(struct buf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        put(b, &c, 1);
    } while (v);
}

static void sv(struct buf *b, int64_t v)
{
    uv(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* One zstd frame of `head` followed by `zeros` zero bytes, streamed (the raw bytes never exist). */
static void zero_frame(struct buf *out, const struct buf *head, uint64_t zeros)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setPledgedSrcSize(c, head->n + zeros);
    static uint8_t z[1 << 20];
    uint8_t o[1 << 16];
    ZSTD_inBuffer in = {head->p, head->n, 0};
    for (;;) {
        int last = zeros == 0 && in.pos == in.size;
        ZSTD_outBuffer ob = {o, sizeof o, 0};
        size_t r = ZSTD_compressStream2(c, &ob, &in, last ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(r)) {
            fprintf(stderr, "bombs: zstd: %s\n", ZSTD_getErrorName(r));
            exit(1);
        }
        put(out, o, ob.pos);
        if (last && r == 0)
            break;
        if (in.pos == in.size && zeros) {
            size_t k = zeros < sizeof z ? (size_t)zeros : sizeof z;
            in = (ZSTD_inBuffer){z, k, 0};
            zeros -= k;
        }
    }
    ZSTD_freeCCtx(c);
}

static void section(FILE *f, uint32_t type, int zstd, const struct buf *payload, uint64_t raw_len)
{
    struct ot_section_header h = {.type = type, .flags = zstd ? OT_SECTION_ZSTD : 0, .stored_len = payload->n,
                                  .raw_len = zstd ? raw_len : payload->n};
    fwrite(&h, sizeof h, 1, f);
    fwrite(payload->p, 1, payload->n, f);
}

/* BASE's header and sections, less the types in skip (a zero-terminated list). */
static void copy_base(FILE *f, const char *path, const uint32_t *skip)
{
    FILE *b = fopen(path, "rb");
    struct ot_file_header fh;
    if (!b || fread(&fh, sizeof fh, 1, b) != 1) {
        fprintf(stderr, "bombs: cannot read %s\n", path);
        exit(1);
    }
    fwrite(&fh, sizeof fh, 1, f);
    struct ot_section_header h;
    while (fread(&h, sizeof h, 1, b) == 1) {
        struct buf p = {0};
        need(&p, (size_t)h.stored_len + 1);
        if (fread(p.p, 1, (size_t)h.stored_len, b) != h.stored_len)
            break;
        p.n = (size_t)h.stored_len;
        int drop = 0;
        for (const uint32_t *t = skip; *t; t++)
            drop |= h.type == *t;
        if (!drop) {
            fwrite(&h, sizeof h, 1, f);
            fwrite(p.p, 1, p.n, f);
        }
        free(p.p);
    }
    fclose(b);
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: bombs live-seq|peaks|peak-refs|events OUT [BASE]\n");
        return 64;
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    const char *what = argv[1];
    if (argc == 4) {
        static const uint32_t live[] = {OT_SEC_LIVE, OT_SEC_LIVE_SEQ, OT_SEC_PEAK, OT_SEC_PEAK_REF, 0};
        static const uint32_t peaks[] = {OT_SEC_PEAK, OT_SEC_PEAK_REF, 0};
        static const uint32_t events[] = {OT_SEC_EVENTS, 0};
        copy_base(f, argv[3], strcmp(what, "peaks") == 0 ? peaks : strcmp(what, "events") == 0 ? events : live);
    } else {
        struct ot_file_header fh = {.version_major = OT_VERSION_MAJOR, .version_minor = OT_VERSION_MINOR,
                                    .flags = OT_FILE_COMPLETE};
        memcpy(fh.magic, OT_MAGIC, 8);
        fwrite(&fh, sizeof fh, 1, f);
    }
    struct buf head = {0}, p = {0};
    if (strcmp(what, "live-seq") == 0 || strcmp(what, "peak-refs") == 0) {
        uint64_t n = strcmp(what, "live-seq") == 0 ? 100000000ull : 300000ull;
        uv(&head, n);
        zero_frame(&p, &head, 10 * n); /* ten one-byte columns per record, all zero */
        section(f, OT_SEC_LIVE_SEQ, 1, &p, head.n + 10 * n);
        for (int64_t d = 0; strcmp(what, "peak-refs") == 0 && d < 4000; d++) {
            struct buf r = {0};
            sv(&r, d);  /* device */
            uv(&r, 0);  /* peak bytes, time, seq */
            uv(&r, 0);
            uv(&r, 0);
            uv(&r, 0);  /* the peak set: none of the zero records is in a device category */
            uv(&r, 0);  /* lost */
            uv(&r, 0);  /* retained records */
            section(f, OT_SEC_PEAK_REF, 0, &r, 0);
            free(r.p);
        }
    } else if (strcmp(what, "peaks") == 0) {
        for (int64_t d = 0; d < 15000; d++) {
            struct buf r = {0};
            sv(&r, d);
            uv(&r, 4096);
            uv(&r, 1);
            uv(&r, 1);
            uv(&r, 0); /* records */
            section(f, OT_SEC_PEAK, 0, &r, 0);
            free(r.p);
        }
    } else if (strcmp(what, "events") == 0) {
        struct buf frame = {0}, none = {0};
        const uint64_t raw = 256ull << 20;
        zero_frame(&frame, &none, raw);
        enum { CHUNKS = 30 };
        uv(&p, CHUNKS);
        for (int i = 0; i < CHUNKS; i++) {
            uv(&p, (uint64_t)i * (raw / 9)); /* first_seq */
            uv(&p, raw / 9);                 /* events */
            uv(&p, 0);                       /* t0 */
            uv(&p, raw);
            uv(&p, frame.n);
            put(&p, frame.p, frame.n);
        }
        section(f, OT_SEC_EVENTS, 0, &p, 0);
        free(frame.p);
    } else {
        fprintf(stderr, "bombs: unknown kind %s\n", what);
        return 64;
    }
    free(head.p);
    free(p.p);
    return fclose(f) != 0;
}
