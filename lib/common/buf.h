#ifndef OOMTRACE_BUF_H
#define OOMTRACE_BUF_H
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer for building snapshot sections. A failed growth sets oom and later puts are
 * dropped, so a writer checks once at the end. */
struct ot_buf {
    uint8_t *p;
    size_t len, cap;
    int oom;
};

int ot_buf_reserve(struct ot_buf *b, size_t extra);
void ot_buf_put(struct ot_buf *b, const void *data, size_t n);
void ot_buf_uv(struct ot_buf *b, uint64_t v);
void ot_buf_sv(struct ot_buf *b, int64_t v);
void ot_buf_str(struct ot_buf *b, const char *s, size_t n);
void ot_buf_cstr(struct ot_buf *b, const char *s);
void ot_buf_free(struct ot_buf *b);
#endif
