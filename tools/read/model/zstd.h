/* zstd frames: a compressed section's payload, or one ring chunk. */
#ifndef OT_READ_ZSTD_H
#define OT_READ_ZSTD_H

#include <stddef.h>
#include <stdint.h>

/* Decompresses one zstd frame into exactly raw_len bytes, into z->p. When raw_len is implausibly large
 * for the compressed size, the buffer grows with the bytes actually produced, so a frame that claims a
 * huge raw_len but holds little costs little memory. z->p
 * is malloc'd and reused across calls (ot_zbuf_free releases it). On error, returns -1 with the reason
 * in why. Used for sections and for ring chunks. */
struct ot_zbuf {
    uint8_t *p;
    size_t cap;
    void *dctx; /* ZSTD_DCtx, reused across calls */
};
int ot_zstd_decode(struct ot_zbuf *z, const uint8_t *src, size_t n, uint64_t raw_len, char *why, size_t whylen);
void ot_zbuf_free(struct ot_zbuf *z);

#endif
