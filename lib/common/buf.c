#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "oomtrace_format.h"

int ot_buf_reserve(struct ot_buf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (b->len + extra <= b->cap)
        return 0;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->len + extra)
        nc *= 2;
    uint8_t *p = realloc(b->p, nc);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = nc;
    return 0;
}

void ot_buf_put(struct ot_buf *b, const void *data, size_t n)
{
    if (n == 0 || ot_buf_reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

void ot_buf_uv(struct ot_buf *b, uint64_t v)
{
    if (ot_buf_reserve(b, 10) != 0)
        return;
    b->len = (size_t)(ot_put_uvarint(b->p + b->len, v) - b->p);
}

void ot_buf_sv(struct ot_buf *b, int64_t v)
{
    ot_buf_uv(b, ot_zigzag(v));
}

void ot_buf_str(struct ot_buf *b, const char *s, size_t n)
{
    ot_buf_uv(b, n);
    ot_buf_put(b, s, n);
}

void ot_buf_cstr(struct ot_buf *b, const char *s)
{
    ot_buf_str(b, s ? s : "", s ? strlen(s) : 0);
}

void ot_buf_free(struct ot_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
