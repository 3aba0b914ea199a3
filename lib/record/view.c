/* The recorder's view for the snapshot writer: read-only answers about the state, asked while the
 * writer holds the recorder still (ot_record_hold), so that no file outside record/ touches the state. */
#include <stdlib.h>
#include <string.h>

#include "common/defs.h"
#include "record/state.h"

#define S ot_state

int ot_record_hold(int bounded)
{
    if (!bounded) {
        ot_lock_take();
        return 0;
    }
    return ot_lock_take_within(1000000000ull);
}

int ot_record_sources(struct trace_sources *out, int bounded)
{
    if (ot_record_hold(bounded) != 0)
        return -1;
    out->devices = 0;
    for (int d = 0; d < OT_MAX_DEVICES; d++)
        if (S.dev[d].seen || S.dev[d].peak || S.dev[d].by_cat[OT_CAT_IMPORTED])
            out->devices |= 1ull << d;
    if (S.failure.valid && S.failure.req.device >= 0 && S.failure.req.device < OT_MAX_DEVICES)
        out->devices |= 1ull << S.failure.req.device;
    out->async_devices = S.async_devices;
    out->npools = S.npools;
    memcpy(out->pools, S.pools, (size_t)S.npools * sizeof *S.pools);
    ot_lock_give();
    return 0;
}

void ot_record_release(void)
{
    ot_lock_give();
}

uint64_t ot_record_events(void)
{
    return S.seq; /* every event takes one seq */
}

const struct ot_liveset *ot_record_live(void)
{
    return &S.live;
}

const struct ot_liveset *ot_record_mappings(void)
{
    return &S.maps;
}

const struct trace_device *ot_record_device(int ordinal)
{
    return ot_devslot(ordinal);
}

static int cmp_marker(const void *a, const void *b)
{
    uint64_t x = (*(const struct trace_marker *const *)a)->seq, y = (*(const struct trace_marker *const *)b)->seq;
    return x < y ? -1 : x > y;
}

size_t ot_record_markers(const struct trace_marker **v)
{
    size_t n = 0;
    uint64_t recent = S.nmarkers < OT_MAX_MARKERS ? S.nmarkers : OT_MAX_MARKERS;
    for (uint64_t i = S.nmarkers - recent; i < S.nmarkers; i++)
        v[n++] = &S.markers[i % OT_MAX_MARKERS];
    for (int d = 0; d < OT_MAX_DEVICES; d++)
        for (int i = 0; i < OT_PEAK_MARKERS; i++)
            if (S.peak_markers[d][i].seq)
                v[n++] = &S.peak_markers[d][i];
    qsort(v, n, sizeof *v, cmp_marker);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!k || v[i]->seq != v[k - 1]->seq)
            v[k++] = v[i];
    return k;
}

size_t ot_record_ctx_ends(const struct ot_ctx_end **v)
{
    uint64_t n = S.nctx_ends < OT_MAX_CTX_ENDS ? S.nctx_ends : OT_MAX_CTX_ENDS;
    for (uint64_t i = 0; i < n; i++)
        v[i] = &S.ctx_ends[(S.nctx_ends - n + i) % OT_MAX_CTX_ENDS];
    return (size_t)n;
}

uint64_t ot_record_last_seq(void)
{
    return __atomic_load_n(&S.seq, __ATOMIC_RELAXED);
}
