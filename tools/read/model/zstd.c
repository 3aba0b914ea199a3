/* zstd frames of the snapshot: compressed sections and ring chunks. See zstd.h. */
#include "model/zstd.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "oomtrace_format.h"

/* Sizes of a compressed output buffer we allocate up front without looking at the input: beyond
 * this, and when raw_len is implausibly larger than the compressed bytes, the buffer grows only as
 * output actually arrives. */
#define OT_ZSTD_EAGER_MAX ((uint64_t)64 << 20)
#define OT_ZSTD_PLAUSIBLE_RATIO 64u

void ot_zbuf_free(struct ot_zbuf *z)
{
    free(z->p);
    ZSTD_freeDCtx(z->dctx);
    memset(z, 0, sizeof(*z));
}

static int ot_zbuf_reserve(struct ot_zbuf *z, size_t want)
{
    /* Never NULL, even for 0 bytes: callers form p + raw_len, and NULL + 0 is undefined in C. */
    if (z->p && z->cap >= want)
        return 0;
    uint8_t *p = realloc(z->p, want ? want : 1);
    if (!p)
        return -1;
    z->p = p;
    z->cap = want;
    return 0;
}

int ot_zstd_decode(struct ot_zbuf *z, const uint8_t *src, size_t n, uint64_t raw_len, char *why, size_t whylen)
{
    if (raw_len > OT_MAX_SECTION_RAW) {
        snprintf(why, whylen, "raw_len %" PRIu64 " is over the 4 GiB limit", raw_len);
        return -1;
    }
    size_t fsize = ZSTD_findFrameCompressedSize(src, n);
    if (ZSTD_isError(fsize)) {
        snprintf(why, whylen, "bad zstd frame (%s)", ZSTD_getErrorName(fsize));
        return -1;
    }
    if (fsize != n) {
        snprintf(why, whylen, "%zu bytes follow the zstd frame", n - fsize);
        return -1;
    }
    unsigned long long fcs = ZSTD_getFrameContentSize(src, n);
    if (fcs == ZSTD_CONTENTSIZE_ERROR) {
        snprintf(why, whylen, "bad zstd frame header");
        return -1;
    }
    if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != raw_len) {
        snprintf(why, whylen, "zstd frame holds %llu bytes but raw_len is %" PRIu64, fcs, raw_len);
        return -1;
    }
    if (!z->dctx && !(z->dctx = ZSTD_createDCtx())) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    bool eager = raw_len <= OT_ZSTD_EAGER_MAX || raw_len / OT_ZSTD_PLAUSIBLE_RATIO <= n;
    if (eager) {
        if (ot_zbuf_reserve(z, (size_t)raw_len) < 0) {
            snprintf(why, whylen, "out of memory for %" PRIu64 " bytes", raw_len);
            return -1;
        }
        size_t r = ZSTD_decompressDCtx(z->dctx, z->p, (size_t)raw_len, src, n);
        if (ZSTD_isError(r)) {
            snprintf(why, whylen, "zstd frame does not decompress to raw_len %" PRIu64 " bytes (%s)", raw_len,
                     ZSTD_getErrorName(r));
            return -1;
        }
        if (r != raw_len) {
            snprintf(why, whylen, "zstd frame decompresses to %zu bytes but raw_len is %" PRIu64, r, raw_len);
            return -1;
        }
        return 0;
    }
    /* Streaming with a growing buffer: memory follows the bytes really produced. */
    size_t cap = n * (size_t)OT_ZSTD_PLAUSIBLE_RATIO;
    if (cap < OT_ZSTD_EAGER_MAX)
        cap = OT_ZSTD_EAGER_MAX;
    if (ot_zbuf_reserve(z, cap) < 0) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only);
    ZSTD_inBuffer in = {src, n, 0};
    /* The buffer may be larger from an earlier call; never let more than raw_len bytes out. */
    ZSTD_outBuffer out = {z->p, z->cap < raw_len ? z->cap : (size_t)raw_len, 0};
    for (;;) {
        size_t r = ZSTD_decompressStream(z->dctx, &out, &in);
        if (ZSTD_isError(r)) {
            snprintf(why, whylen, "bad zstd frame (%s)", ZSTD_getErrorName(r));
            return -1;
        }
        if (r == 0)
            break;
        if (out.pos == out.size) {
            if (out.size >= raw_len) {
                /* All raw_len bytes are out but the frame has not ended: it may only have its
                 * epilogue (a checksum) left, or it may hold more data than raw_len says. */
                uint8_t extra;
                ZSTD_outBuffer probe = {&extra, 1, 0};
                r = ZSTD_decompressStream(z->dctx, &probe, &in);
                if (!ZSTD_isError(r) && r == 0 && probe.pos == 0)
                    break;
                snprintf(why, whylen, "zstd frame holds more than raw_len %" PRIu64 " bytes", raw_len);
                return -1;
            }
            size_t grow = out.size * 2 < raw_len ? out.size * 2 : (size_t)raw_len;
            if (ot_zbuf_reserve(z, grow) < 0) {
                snprintf(why, whylen, "out of memory");
                return -1;
            }
            out.dst = z->p;
            out.size = grow;
        } else if (in.pos == in.size) {
            snprintf(why, whylen, "truncated zstd frame");
            return -1;
        }
    }
    if (out.pos != raw_len) {
        snprintf(why, whylen, "zstd frame decompresses to %zu bytes but raw_len is %" PRIu64, out.pos, raw_len);
        return -1;
    }
    return 0;
}
