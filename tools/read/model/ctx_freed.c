/* CTX_FREED (docs/FORMAT.md): for each context end in the ring, the allocations it freed, so that a replay
 * of the ring frees them at that event as it frees an allocation at its free. */
#include <inttypes.h>

#include "model/section.h"

int parse_ctx_freed(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count;
    struct ot_ctx_end *ends = sec_list(x, 3, sizeof(*ends), "context end", &count);
    if (!ends)
        return -1;
    for (uint64_t i = 0; i < count; i++) {
        struct ot_ctx_end *e = &ends[i];
        e->seq = U();
        e->nfreed = U();
        uint64_t n = U();
        if (x->c.err)
            return sec_item_err(x, "context end", (size_t)i);
        /* seqs ascend, so that a replay finds an event's list by bisection */
        if (i && e->seq <= ends[i - 1].seq)
            return sec_err(x, "context end %" PRIu64 " has seq %" PRIu64 ", not after the one before (%" PRIu64 ")", i,
                           e->seq, ends[i - 1].seq);
        if (n > e->nfreed)
            return sec_err(x, "context end %" PRIu64 " lists %" PRIu64 " allocations but freed %" PRIu64, i, n,
                           e->nfreed);
        if (sec_check_count(x, n, 4, "freed allocation") < 0)
            return -1;
        e->n = (size_t)n;
        e->v = sec_alloc(x, e->n, sizeof(*e->v));
        if (!e->v)
            return -1;
        uint64_t addr = 0;
        for (size_t k = 0; k < e->n; k++) {
            struct ot_ctx_freed *f = &e->v[k];
            addr += (uint64_t)S();
            f->address = addr;
            f->size = U();
            f->device = S();
            f->category = U();
            if (x->c.err)
                return sec_item_err(x, "freed allocation", k);
        }
    }
    s->ctx_ends = ends;
    s->nctx_ends = (size_t)count;
    return 0;
}
