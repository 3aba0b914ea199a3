/* The simulated run: persistent allocations (still live at the end), steps of temporaries allocated and
 * freed again, one large step (the peak), markers, and for --trigger oom a final failed allocation. Every
 * number of every section comes from here, so the sections agree with one another. The events go into
 * the ring's chunks as the tracer encodes them (docs/FORMAT.md, EVENTS). */
#include "snapgen.h"

#include <inttypes.h>

struct sim sim;

static void flush_chunk(bool last)
{
    if (!sim.c_n)
        return;
    size_t raw_len = sim.raw.n;
    if (last && cfg.corrupt == C_EVENT_TRUNCATED)
        raw_len -= 3; /* the last event loses its tail */
    size_t bound = ZSTD_compressBound(raw_len);
    uint8_t *frame = malloc(bound);
    if (!frame)
        oom();
    size_t z = ZSTD_compressCCtx(sim.cctx, frame, bound, sim.raw.p, raw_len, 1);
    if (ZSTD_isError(z)) {
        fprintf(stderr, "snapgen: zstd: %s\n", ZSTD_getErrorName(z));
        exit(1);
    }
    if (sim.nchunks == sim.capchunks) {
        sim.capchunks = sim.capchunks ? sim.capchunks * 2 : 64;
        sim.chunks = realloc(sim.chunks, sim.capchunks * sizeof(*sim.chunks));
        if (!sim.chunks)
            oom();
    }
    sim.chunks[sim.nchunks++] = (struct chunk){sim.c_first, sim.c_n, sim.c_t0, raw_len, frame, z};
    sim.raw.n = 0;
    sim.c_n = 0;
}

static void emit(uint64_t kind, uint64_t api, uint64_t cat, int64_t dev, uint64_t tid, uint64_t addr, uint64_t size,
                 uint64_t stack, const char *label)
{
    uint64_t prev_t = sim.t;
    sim.t += 200 + below(5000);
    uint64_t seq = ++sim.seq;
    if (sim.c_n == 0) {
        sim.c_first = seq;
        sim.c_t0 = prev_t; /* so the first event's dt is not always 0 */
        sim.c_prev_t = prev_t;
        sim.c_prev_addr = 0;
    }
    struct buf *b = &sim.raw;
    put_uv(b, kind);
    put_uv(b, api);
    put_uv(b, cat);
    put_sv(b, dev);
    put_uv(b, sim.t - sim.c_prev_t);
    put_uv(b, tid);
    put_sv(b, (int64_t)(addr - sim.c_prev_addr));
    put_uv(b, size);
    put_uv(b, stack);
    if (kind == OT_EV_MARKER)
        put_cstr(b, label);
    sim.c_prev_t = sim.t;
    sim.c_prev_addr = addr;
    if (++sim.c_n == cfg.chunk)
        flush_chunk(sim.seq == sim.total);
}

static const struct gstack *pick_stack(void)
{
    /* Skewed: a few sites take most allocations, as in real programs. */
    uint64_t u = below(1000);
    return &stacks[(size_t)(u * u / 1000 * nstacks / 1000)];
}

static void note_peak(int64_t d)
{
    if (d < 0)
        return;
    struct dev_state *ds = &sim.dev[d];
    if (ds->tracked <= ds->peak)
        return;
    ds->peak = ds->tracked;
    ds->peak_t = sim.t;
    ds->peak_seq = sim.seq;
    /* Persistent allocations are never freed, so the live set at any moment is a prefix of them
     * plus the temporaries of the current step. */
    ds->peak_npersist = sim.npersist;
    ds->peak_ntemps = sim.ntemps;
    memcpy(ds->peak_temps, sim.temps, sim.ntemps * sizeof(struct rec));
}

static uint64_t api_for(uint32_t cat)
{
    switch (cat) {
    case OT_CAT_ASYNC:
        return OT_API_cuMemAllocAsync;
    case OT_CAT_VMM:
        return OT_API_cuMemCreate;
    case OT_CAT_MANAGED:
        return OT_API_cuMemAllocManaged;
    case OT_CAT_HOST_PINNED:
        return OT_API_cuMemHostAlloc;
    default:
        return OT_API_cuMemAlloc_v2;
    }
}

static struct rec do_alloc(bool persistent, bool big)
{
    const struct gstack *st = pick_stack();
    struct rec r = {0};
    uint64_t c = below(100);
    r.cat = !persistent ? (c < 80 ? OT_CAT_DEVICE : OT_CAT_ASYNC)
            : c < 70    ? OT_CAT_DEVICE
            : c < 80    ? OT_CAT_ASYNC
            : c < 85    ? OT_CAT_VMM
            : c < 90    ? OT_CAT_MANAGED
                        : OT_CAT_HOST_PINNED;
    r.dev = r.cat == OT_CAT_HOST_PINNED ? -1 : (int64_t)below(cfg.devices);
    r.api = (uint32_t)api_for(r.cat);
    r.size = st->base_size * (1 + below(4)) * (big ? 8 : 1);
    r.stack = st->id;
    r.tid = 1000 + below(3);
    uint64_t aligned = (r.size + 0x1fffff) & ~(uint64_t)0x1fffff;
    if (r.cat == OT_CAT_HOST_PINNED) {
        r.addr = 0x7e0000000000ULL + sim.host_bump;
        sim.host_bump += aligned;
    } else if (r.cat == OT_CAT_VMM) {
        r.addr = ++sim.vmm_handle; /* a CUmemGenericAllocationHandle, not an address */
    } else if (persistent) {
        struct dev_state *ds = &sim.dev[r.dev];
        r.addr = 0x7f0000000000ULL + ((uint64_t)r.dev << 40) + ds->bump;
        ds->bump += aligned;
    } else {
        /* Temporaries reuse one region per device, as a caching allocator would. */
        struct dev_state *ds = &sim.dev[r.dev];
        r.addr = 0x7f8000000000ULL + ((uint64_t)r.dev << 40) + ds->temp_bump;
        ds->temp_bump += aligned;
    }
    emit(OT_EV_ALLOC, r.api, r.cat, r.dev, r.tid, r.addr, r.size, r.stack, NULL);
    r.t = sim.t;
    r.seq = sim.seq;
    if (r.dev >= 0) {
        sim.dev[r.dev].tracked += r.size;
        sim.dev[r.dev].by_cat[r.cat] += r.size;
    }
    return r;
}

static void add_persistent(void)
{
    struct rec r = do_alloc(true, false);
    if (sim.npersist == sim.cappersist) {
        sim.cappersist = sim.cappersist ? sim.cappersist * 2 : 64;
        sim.persist = realloc(sim.persist, sim.cappersist * sizeof(*sim.persist));
        if (!sim.persist)
            oom();
    }
    sim.persist[sim.npersist++] = r;
    note_peak(r.dev);
}

static void add_temp(bool big)
{
    struct rec r = do_alloc(false, big);
    sim.temps[sim.ntemps++] = r;
    note_peak(r.dev);
}

static void free_temp(void)
{
    size_t i = (size_t)below(sim.ntemps);
    struct rec r = sim.temps[i];
    sim.temps[i] = sim.temps[--sim.ntemps];
    uint64_t api = r.cat == OT_CAT_ASYNC ? OT_API_cuMemFreeAsync : OT_API_cuMemFree_v2;
    emit(OT_EV_FREE, api, r.cat, r.dev, r.tid, r.addr, r.size, 0, NULL);
    sim.dev[r.dev].tracked -= r.size;
    sim.dev[r.dev].by_cat[r.cat] -= r.size;
    if (sim.ntemps == 0)
        for (uint64_t d = 0; d < cfg.devices; d++)
            sim.dev[d].temp_bump = 0;
}

/* A context's end frees every temporary at once: one event, and the list for CTX_FREED. */
static void end_context(void)
{
    struct ctx_end *ce = &sim.ctx_ends[sim.nctx_ends++];
    uint64_t bytes = 0;
    ce->n = sim.ntemps;
    for (size_t i = 0; i < sim.ntemps; i++) {
        const struct rec *r = &sim.temps[i];
        ce->v[i] = *r;
        bytes += r->size;
        sim.dev[r->dev].tracked -= r->size;
        sim.dev[r->dev].by_cat[r->cat] -= r->size;
    }
    emit(OT_EV_CONTEXT_END, OT_API_cuDevicePrimaryCtxReset_v2, 0, sim.temps[0].dev, 1000, 0xc7000000 + sim.nctx_ends,
         bytes, stacks[0].id, NULL);
    ce->seq = sim.seq;
    sim.ntemps = 0;
    for (uint64_t d = 0; d < cfg.devices; d++)
        sim.dev[d].temp_bump = 0;
}

static void add_marker(uint64_t step)
{
    struct marker *m = &sim.markers[sim.nmarkers++ % 1024];
    snprintf(m->label, sizeof(m->label), "step %" PRIu64 " seq_len=%u", step, 512u << (step % 4));
    if (cfg.hostile && step == 1)
        snprintf(m->label, sizeof(m->label), "bad\x07label\x01\xff end");
    emit(OT_EV_MARKER, OT_API_oomtrace_mark, 0, -1, 1000, 0, 0, 0, m->label);
    m->seq = sim.seq;
    m->t = sim.t;
    m->tid = 1000;
}

uint64_t device_total(int64_t d)
{
    uint64_t t = 80ULL << 30, need_ = sim.dev[d].peak + (3ULL << 30);
    return need_ > t ? (need_ + (1ULL << 30)) & ~((1ULL << 30) - 1) : t;
}

uint64_t device_free(int64_t d)
{
    uint64_t used = BASELINE + sim.dev[d].tracked + CONTEXT + (d == 0 ? OTHER_PROC : 0);
    uint64_t total = device_total(d);
    return used < total ? total - used : 0;
}

void simulate(void)
{
    sim.cctx = ZSTD_createCCtx();
    if (!sim.cctx)
        oom();
    sim.start_t = sim.t = 1000ULL * 1000000000ULL;
    uint64_t every = cfg.markers_every;
    uint64_t n = cfg.events, failed = cfg.trigger == OT_TRIGGER_OOM ? 1 : 0;
    uint64_t markers = every ? n / every : 0;
    if (n < cfg.live + markers + failed)
        n = cfg.live + markers + failed;
    sim.total = n;
    uint64_t rest = n - cfg.live - markers - failed;
    if (rest % 2) {
        markers++; /* temporaries come in pairs; one more marker makes the count exact */
        rest--;
    }
    uint64_t pairs = rest / 2, total_pairs = pairs;
    uint64_t persist_left = cfg.live, markers_left = markers, step = 0;
    /* Persistent allocations are spread over the first half, so that the large step at 70% is the
     * peak rather than the end. */
    uint64_t spacing = cfg.live ? (n / 2) / cfg.live : 0, next_persist = 0;
    uint64_t alloc_left = 0, free_left = 0, batches = 0;
    bool bulged = false, big = false;
    for (uint64_t i = 0; i < n; i++) {
        if (failed && i == n - 1) {
            sim.has_failed = true;
            break;
        }
        if (markers_left && every && (i + 1) % every == 0) {
            add_marker(++step);
            markers_left--;
        } else if (persist_left && i >= next_persist) {
            add_persistent();
            persist_left--;
            next_persist += spacing;
        } else if (alloc_left) {
            add_temp(big);
            alloc_left--;
        } else if (free_left && cfg.ctx_ends && free_left == sim.ntemps && batches % 5 == 4 &&
                   sim.nctx_ends < sizeof(sim.ctx_ends) / sizeof(sim.ctx_ends[0])) {
            /* One event for the step's frees: the events it does not take go to more pairs (and a marker
             * for an odd one), so that the run still has its number of events. */
            uint64_t spare = free_left - 1;
            end_context();
            free_left = 0;
            pairs += spare / 2;
            markers_left += spare % 2;
        } else if (free_left) {
            free_temp();
            free_left--;
        } else if (pairs) {
            uint64_t k = 1 + below(16);
            big = false;
            if (!bulged && (total_pairs - pairs) * 10 >= total_pairs * 7) {
                k = MAX_TEMPS;
                big = bulged = true;
            }
            if (k > pairs)
                k = pairs;
            pairs -= k;
            batches++;
            add_temp(big);
            alloc_left = k - 1;
            free_left = k;
        } else if (persist_left) {
            add_persistent();
            persist_left--;
        } else if (markers_left) {
            add_marker(++step);
            markers_left--;
        }
    }
    if (sim.has_failed) {
        const struct gstack *st = &stacks[0];
        uint64_t tr = sim.dev[0].tracked; /* the request: more than the device has free */
        sim.failed = (struct rec){.size = device_free(0) + tr / 8 + ((uint64_t)1 << 30), .stack = st->id, .tid = 1000, .dev = 0,
                                  .cat = OT_CAT_DEVICE, .api = OT_API_cuMemAlloc_v2};
        emit(OT_EV_FAILED, sim.failed.api, sim.failed.cat, 0, 1000, 0, sim.failed.size, st->id, NULL);
        sim.failed.t = sim.t;
        sim.failed.seq = sim.seq;
    }
    flush_chunk(true);
}
