/* The snapshot's bytes: the growing buffer and the format's varints, the seeded randomness, and the
 * section framing (each section's 24-byte header, its payload zstd-compressed or not) that every writer
 * goes through. */
#include "snapgen.h"

uint64_t rng;

void oom(void)
{
    fputs("snapgen: out of memory\n", stderr);
    exit(1);
}

void need(struct buf *b, size_t k)
{
    if (b->n + k <= b->cap)
        return;
    size_t c = b->cap ? b->cap : 256;
    while (c < b->n + k)
        c *= 2;
    b->p = realloc(b->p, c);
    if (!b->p)
        oom();
    b->cap = c;
}

void put_bytes(struct buf *b, const void *p, size_t n)
{
    need(b, n);
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

void put_uv(struct buf *b, uint64_t v)
{
    need(b, 10);
    b->n = (size_t)(ot_put_uvarint(b->p + b->n, v) - b->p);
}

void put_sv(struct buf *b, int64_t v)
{
    put_uv(b, ot_zigzag(v));
}

void put_str(struct buf *b, const char *s, size_t n)
{
    put_uv(b, n);
    put_bytes(b, s, n);
}

void put_cstr(struct buf *b, const char *s)
{
    put_str(b, s, strlen(s));
}

void put_le(struct buf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        put_bytes(b, &c, 1);
    }
}

void free_buf(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

struct buf snap;
struct secinfo secs[64];
size_t nsecs;

void section(uint32_t type, struct buf *payload, bool compress)
{
    uint32_t flags = 0;
    uint64_t raw_len = payload->n;
    struct buf stored = {0};
    if (compress) {
        size_t bound = ZSTD_compressBound(payload->n);
        need(&stored, bound);
        size_t z = ZSTD_compress(stored.p, bound, payload->p, payload->n, 3);
        if (ZSTD_isError(z)) {
            fprintf(stderr, "snapgen: zstd: %s\n", ZSTD_getErrorName(z));
            exit(1);
        }
        stored.n = z;
        flags |= OT_SECTION_ZSTD;
    } else {
        put_bytes(&stored, payload->p, payload->n);
    }
    if (nsecs < 64)
        secs[nsecs++] = (struct secinfo){type, snap.n, snap.n + 24, stored.n, compress};
    put_le(&snap, type, 4);
    put_le(&snap, flags, 4);
    put_le(&snap, stored.n, 8);
    put_le(&snap, raw_len, 8);
    put_bytes(&snap, stored.p, stored.n);
    free_buf(&stored);
    free_buf(payload);
}

struct secinfo *find_section(uint32_t type)
{
    for (size_t i = 0; i < nsecs; i++)
        if (secs[i].type == type)
            return &secs[i];
    return NULL;
}
