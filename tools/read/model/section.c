/* One section's parse context: the bounded cursor over its payload, and errors that name the section
 * and its file offset. See section.h. */
#include "model/section.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

int sec_err(struct sec_ctx *x, const char *fmt, ...)
{
    /* In the user's words, then the detail for whoever debugs the writer (helper-91 #6: the line named the
     * format's sections, "section 18 (FRAMEWORK)"). */
    int n = snprintf(x->err, OT_ERRBUF, "the snapshot is damaged in %s, the part at byte %" PRIu64 ": ",
                     ot_part_words(x->type), x->hdr_off);
    if (n < 0 || n >= OT_ERRBUF)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err + n, OT_ERRBUF - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

const char *ot_part_words(uint32_t type)
{
    switch (type) {
    case OT_SEC_META: return "the process and trigger details";
    case OT_SEC_DEVICES: return "the devices";
    case OT_SEC_FAILURE: return "the failed request";
    case OT_SEC_MODULES: return "the loaded libraries";
    case OT_SEC_SYMBOLS: return "the function names";
    case OT_SEC_PYFRAMES: return "the Python frames";
    case OT_SEC_STACKS: return "the call stacks";
    case OT_SEC_LIVE:
    case OT_SEC_LIVE_SEQ: return "the live set";
    case OT_SEC_PEAK:
    case OT_SEC_PEAK_REF: return "the live set at a peak";
    case OT_SEC_EVENTS: return "the event history";
    case OT_SEC_MARKERS: return "the markers";
    case OT_SEC_POOLS: return "the memory pools";
    case OT_SEC_MAPPINGS: return "the virtual memory mappings";
    case OT_SEC_PROCESSES: return "the list of other processes";
    case OT_SEC_THREADS: return "the thread names";
    case OT_SEC_FRAMEWORK: return "the allocator's view";
    case OT_SEC_PROBES: return "the driver's earlier out-of-memory errors";
    case OT_SEC_BORROWED: return "the borrowed Python stacks";
    case OT_SEC_CTX_FREED: return "what the context ends freed";
    default: return "a part this reader does not know";
    }
}

/* Over the memory budget: what needs more, the limit and how to raise it, and where in the file, all in a
 * user's words (walk 7, #22: the line named "section 17 (PEAK_REF)"). */
int sec_over_budget(struct sec_ctx *x, const char *what, ...)
{
    char w[160];
    va_list ap;
    va_start(ap, what);
    vsnprintf(w, sizeof(w), what, ap);
    va_end(ap);
    snprintf(x->err, OT_ERRBUF,
             "the snapshot needs more memory than the reader allows for it: %s would pass %zu bytes %s; in %s, "
             "at byte %" PRIu64 " of the file", w, x->snap->arena.limit, ot_read_budget_why(), ot_part_words(x->type),
             x->hdr_off);
    return -1;
}

size_t sec_pos(const struct sec_ctx *x)
{
    return (size_t)(x->c.p - x->payload);
}

size_t sec_left(const struct sec_ctx *x)
{
    return (size_t)(x->c.end - x->c.p);
}

/* The cursor failed inside item `index` of kind `what` (index SIZE_MAX: a field outside any list). */
int sec_item_err(struct sec_ctx *x, const char *what, size_t index)
{
    char where[64];
    size_t total = (size_t)(x->c.end - x->payload);
    if (x->compressed)
        snprintf(where, sizeof(where), "byte %zu of %zu of the decompressed payload", sec_pos(x), total);
    else
        snprintf(where, sizeof(where), "byte %zu of %zu of the payload", sec_pos(x), total);
    const char *how = x->c.p >= x->c.end ? "runs past the end of the payload"
                                         : "has a varint over 10 bytes or a string longer than the payload";
    if (index == SIZE_MAX)
        return sec_err(x, "%s %s, at %s", what, how, where);
    return sec_err(x, "%s %zu %s, at %s", what, index, how, where);
}

/* Refuses a count that cannot possibly fit in what is left, before anything is allocated for it. */
int sec_check_count(struct sec_ctx *x, uint64_t count, size_t min_item_bytes, const char *what)
{
    if (x->c.err) /* a field before the count failed */
        return sec_item_err(x, "a field", SIZE_MAX);
    if (count > sec_left(x) / min_item_bytes)
        return sec_err(x, "%s count %" PRIu64 " cannot fit in the %zu bytes left (each takes at least %zu)", what,
                    count, sec_left(x), min_item_bytes);
    return 0;
}

void *sec_alloc(struct sec_ctx *x, size_t count, size_t size)
{
    void *p = ot_arena_array(&x->snap->arena, count ? count : 1, size);
    if (p)
        return p;
    if (x->snap->arena.over_limit)
        sec_over_budget(x, "its %zu records", count);
    else
        sec_err(x, "out of memory for %zu items", count);
    return NULL;
}


struct ot_str sec_str(struct sec_ctx *x)
{
    size_t n;
    const char *p = ot_get_str(&x->c, &n);
    return (struct ot_str){p, n};
}

void *sec_list(struct sec_ctx *x, size_t min_item_bytes, size_t size, const char *what, uint64_t *count)
{
    *count = U();
    if (sec_check_count(x, *count, min_item_bytes, what) < 0)
        return NULL;
    return sec_alloc(x, (size_t)*count, size);
}

int sec_items(struct sec_ctx *x, void *items, uint64_t count, size_t size, const struct ot_field *f, size_t nf,
              const char *what, int (*each)(struct sec_ctx *x, void *item, size_t i))
{
    for (size_t i = 0; i < count; i++) {
        void *item = (char *)items + i * size;
        ot_read_fields(&x->c, item, f, nf);
        if (x->c.err)
            return sec_item_err(x, what, i);
        if (each && each(x, item, i) < 0)
            return -1;
    }
    return 0;
}

int sec_fields(struct sec_ctx *x, void *item, const struct ot_field *f, size_t nf, const char *what)
{
    ot_read_fields(&x->c, item, f, nf);
    if (x->c.err)
        return sec_item_err(x, what, SIZE_MAX);
    return 0;
}
