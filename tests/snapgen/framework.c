/* The frameworks' view, as the Python companion writes it (FRAMEWORK, PROBES): PyTorch's caching
 * allocator, JAX's preallocated pool, CuPy's pool; and, for a framework OOM, the framework's refused
 * request as the snapshot's FAILURE. */
#include "snapgen.h"

#include <inttypes.h>

/* What the torch view holds, for the framework OOM's request and for checks. */
static struct {
    uint64_t reserved, allocated, free_total, largest_free, request;
    uint64_t jax_limit, jax_in_use, jax_largest_free;
    int64_t device;
} fwv;

static void fw_record(struct buf *recs, uint64_t *nrec, uint64_t kind, struct buf *body)
{
    put_uv(recs, kind);
    put_uv(recs, body->n + (cfg.corrupt == C_FW_BODY_LEFTOVER && kind == OT_FW_INFO ? 1 : 0));
    put_bytes(recs, body->p, body->n);
    if (cfg.corrupt == C_FW_BODY_LEFTOVER && kind == OT_FW_INFO)
        put_uv(recs, 0);
    body->n = 0;
    ++*nrec;
}

static void put_u64(struct buf *b, uint64_t v)
{
    put_le(b, v, 8);
}

static void put_stat(struct buf *b, const char *key, int64_t v)
{
    put_cstr(b, key);
    put_sv(b, v);
}

static void put_setting(struct buf *b, const char *key, const char *v)
{
    put_cstr(b, key);
    put_cstr(b, v);
}

#define FW_MAX_SEG 256
#define FW_MAX_BLK (FW_MAX_SEG * 4)

struct fw_seg {
    uint64_t device, address, total, allocated, requested, stream, pool, flags, first, n;
};
struct fw_blk {
    uint64_t address, size, requested, state, segment;
};

static uint64_t round512(uint64_t v)
{
    return v & ~(uint64_t)511;
}

/* PyTorch's caching allocator on device 0: each live driver allocation there is one segment. Every
 * third segment is wholly free (memory the program freed and the allocator kept); the others are split
 * into allocated and free blocks, so the free memory lies in pieces (fragmentation). The last segment
 * belongs to a CUDA graph's private pool; the VMM mappings, when there are any, form one expandable
 * segment. */
static void fw_torch(struct buf *recs, uint64_t *nrec)
{
    static struct fw_seg seg[FW_MAX_SEG];
    static struct fw_blk blk[FW_MAX_BLK];
    size_t ns = 0, nb = 0;
    for (size_t i = 0; i < sim.npersist && ns + 2 < FW_MAX_SEG; i++) {
        const struct rec *r = &sim.persist[i];
        if (r->cat != OT_CAT_DEVICE || r->dev != 0 || r->size < 4096)
            continue;
        struct fw_seg *g = &seg[ns];
        *g = (struct fw_seg){.device = 0, .address = r->addr, .total = r->size, .stream = 0,
                             .flags = r->size > (1u << 20) ? OT_FW_SEG_LARGE_POOL : 0, .first = nb};
        if (ns % 3 == 1) {
            blk[nb++] = (struct fw_blk){r->addr, r->size, 0, OT_FW_BLOCK_INACTIVE, ns};
        } else {
            uint64_t a = round512(r->size * 3 / 8), f1 = round512(r->size / 8), b2 = round512(r->size * 3 / 8);
            uint64_t f2 = r->size - a - f1 - b2;
            blk[nb++] = (struct fw_blk){r->addr, a, a - (a > 1024 ? 1000 : 0), OT_FW_BLOCK_ALLOCATED, ns};
            blk[nb++] = (struct fw_blk){r->addr + a, f1, 0, OT_FW_BLOCK_INACTIVE, ns};
            blk[nb++] = (struct fw_blk){r->addr + a + f1, b2, b2, ns % 7 == 5 ? OT_FW_BLOCK_PENDING_FREE
                                                                              : OT_FW_BLOCK_ALLOCATED, ns};
            blk[nb++] = (struct fw_blk){r->addr + a + f1 + b2, f2, 0, OT_FW_BLOCK_INACTIVE, ns};
        }
        g->n = nb - g->first;
        ns++;
    }
    if (ns > 1) { /* the last one: a graph's private pool */
        seg[ns - 1].pool = (1ULL << 32) ^ 7;
        seg[ns - 1].flags |= OT_FW_SEG_PRIVATE_POOL;
    }
    /* The VMM mappings (laid out as write_rest lays them, from 0x7fa000000000 in record order) as one
     * expandable segment: the leading run of device 0's. */
    uint64_t va = 0x7fa000000000ULL, vsize = 0;
    for (size_t i = 0; i < sim.npersist; i++) {
        if (sim.persist[i].cat != OT_CAT_VMM)
            continue;
        if (sim.persist[i].dev != 0)
            break;
        vsize += (sim.persist[i].size + 0x1fffff) & ~(uint64_t)0x1fffff;
    }
    if (vsize) {
        struct fw_seg *g = &seg[ns];
        *g = (struct fw_seg){.device = 0, .address = va, .total = vsize, .flags = OT_FW_SEG_EXPANDABLE | OT_FW_SEG_LARGE_POOL,
                             .first = nb, .n = 2};
        uint64_t half = round512(vsize / 2);
        blk[nb++] = (struct fw_blk){va, half, half, OT_FW_BLOCK_ALLOCATED, ns};
        blk[nb++] = (struct fw_blk){va + half, vsize - half, 0, OT_FW_BLOCK_INACTIVE, ns};
        ns++;
    }
    fwv.reserved = fwv.allocated = fwv.free_total = fwv.largest_free = 0;
    uint64_t inactive_split = 0, active = 0;
    for (size_t i = 0; i < ns; i++) {
        for (size_t k = seg[i].first; k < seg[i].first + seg[i].n; k++) {
            if (blk[k].state != OT_FW_BLOCK_INACTIVE) {
                seg[i].allocated += blk[k].size;
                seg[i].requested += blk[k].requested;
                active += blk[k].size;
                continue;
            }
            fwv.free_total += blk[k].size;
            if (seg[i].n > 1)
                inactive_split += blk[k].size;
            if (blk[k].size > fwv.largest_free && !(seg[i].flags & OT_FW_SEG_PRIVATE_POOL))
                fwv.largest_free = blk[k].size;
        }
        fwv.reserved += seg[i].total;
        fwv.allocated += seg[i].allocated;
    }
    uint64_t total = device_total(0);
    uint64_t limit = cfg.fraction_pct ? total / 100 * cfg.fraction_pct : 0;
    /* The framework's request: beyond the largest free block (fragmentation), or beyond the fraction. */
    if (cfg.fraction_pct)
        fwv.request = limit > fwv.reserved ? round512(limit - fwv.reserved) + (64ULL << 20) : (64ULL << 20);
    else
        fwv.request = round512(fwv.largest_free + (fwv.free_total - fwv.largest_free) / 2) + 512;
    fwv.device = 0;

    struct buf b = {0};
    put_cstr(&b, "torch");
    put_uv(&b, 0);
    put_uv(&b, 10 + (cfg.fraction_pct ? 2 : 0) + (cfg.corrupt == C_FW_STATS_COUNT ? 1000 : 0));
    put_stat(&b, "allocated_bytes", (int64_t)fwv.allocated);
    put_stat(&b, "allocated_peak_bytes", (int64_t)(fwv.allocated + (fwv.allocated >> 2)));
    put_stat(&b, "reserved_bytes", (int64_t)fwv.reserved);
    put_stat(&b, "reserved_peak_bytes", (int64_t)fwv.reserved);
    put_stat(&b, "active_bytes", (int64_t)active);
    put_stat(&b, "inactive_split_bytes", (int64_t)inactive_split);
    put_stat(&b, "num_alloc_retries", 1);
    put_stat(&b, "num_ooms", cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM ? 1 : 0);
    put_stat(&b, "num_device_alloc", (int64_t)ns + 4);
    put_stat(&b, "num_device_free", 4);
    if (cfg.fraction_pct) {
        put_stat(&b, "memory_fraction_limit_bytes", (int64_t)limit);
        put_stat(&b, "memory_fraction_ppm", (int64_t)cfg.fraction_pct * 10000);
    }
    fw_record(recs, nrec, OT_FW_STATS, &b);

    put_cstr(&b, "torch");
    put_uv(&b, 6);
    put_setting(&b, "backend", "native");
    /* The setting governs new segments; the expandable one was made while it was on (it can change at run time). */
    put_setting(&b, "expandable_segments", "False");
    put_setting(&b, "max_split_size", "");
    put_setting(&b, "garbage_collection_threshold", "0");
    put_setting(&b, "PYTORCH_CUDA_ALLOC_CONF", "");
    char frac[32];
    if (cfg.fraction_pct && cfg.fraction_pct < 100)
        snprintf(frac, sizeof(frac), "0.%02" PRIu64, cfg.fraction_pct);
    else
        snprintf(frac, sizeof(frac), "1.0");
    if (cfg.corrupt == C_FW_SETTINGS_SHORT)
        put_uv(&b, 200); /* a key that runs past the body */
    else
        put_setting(&b, "per_process_memory_fraction", frac);
    fw_record(recs, nrec, OT_FW_SETTINGS, &b);

    if (cfg.corrupt == C_FW_SEGMENT_WRAP && ns)
        seg[0].total = UINT64_MAX - seg[0].address + 2;
    if (cfg.corrupt == C_FW_SEGMENT_BLOCKS && ns)
        seg[0].n = nb + 5;
    if (cfg.corrupt == C_FW_BLOCK_STATE && nb)
        blk[0].state = 9;
    if (cfg.corrupt == C_FW_BLOCK_SEGMENT && nb)
        blk[nb - 1].segment = ns + 3;
    if (cfg.corrupt == C_FW_BLOCK_OUTSIDE && nb)
        blk[0].address -= 4096;
    for (int rep = 0; rep < (cfg.corrupt == C_FW_DUP_SEGMENTS ? 2 : 1); rep++) {
        put_cstr(&b, "torch");
        put_uv(&b, ns);
        const size_t cols = cfg.corrupt == C_FW_SEGMENT_COLUMNS ? 9 : 10; /* one column short */
        for (size_t c = 0; c < cols; c++)
            for (size_t i = 0; i < ns; i++) {
                const struct fw_seg *g = &seg[i];
                const uint64_t v[10] = {g->device, g->address, g->total, g->allocated, g->requested,
                                        g->stream, g->pool, g->flags, g->first, g->n};
                put_u64(&b, v[c]);
            }
        fw_record(recs, nrec, OT_FW_SEGMENTS, &b);
    }
    put_cstr(&b, "torch");
    put_uv(&b, nb);
    for (int c = 0; c < 5; c++)
        for (size_t i = 0; i < nb; i++) {
            const uint64_t v[5] = {blk[i].address, blk[i].size, blk[i].requested, blk[i].state, blk[i].segment};
            put_u64(&b, v[c]);
        }
    fw_record(recs, nrec, OT_FW_BLOCKS, &b);

    /* Python stacks of the first allocated blocks (OOMTRACE_TORCH_STACKS=python). */
    size_t nfr = 0;
    for (size_t i = 0; i < nb && nfr < 3; i++)
        nfr += blk[i].state == OT_FW_BLOCK_ALLOCATED;
    put_cstr(&b, "torch");
    put_uv(&b, nfr);
    for (size_t i = 0, k = 0; i < nb && k < nfr; i++) {
        if (blk[i].state != OT_FW_BLOCK_ALLOCATED)
            continue;
        put_uv(&b, cfg.corrupt == C_FW_FRAMES_BLOCK ? nb + 1 : i);
        put_uv(&b, 2);
        put_cstr(&b, "/opt/conda/lib/python3.12/site-packages/torch/nn/modules/linear.py");
        put_uv(&b, 125);
        put_cstr(&b, "forward");
        put_cstr(&b, "train.py");
        put_uv(&b, 40 + k);
        put_cstr(&b, cfg.hostile ? "step\x1b[31m\xff" : "train_step");
        k++;
    }
    fw_record(recs, nrec, OT_FW_BLOCK_FRAMES, &b);

    /* Roles of the allocated blocks: parameters, gradients, Adam's two states (--no-model: none, the record
     * empty, as the companion writes it when its scan finds no model on the GPU). */
    static const char *const labels[] = {"", "", "Adam.exp_avg", "Adam.exp_avg_sq", ""};
    static const uint64_t cats[] = {OT_FW_ROLE_PARAMETERS, OT_FW_ROLE_GRADIENTS, OT_FW_ROLE_OPTIMIZER_STATE,
                                    OT_FW_ROLE_OPTIMIZER_STATE, OT_FW_ROLE_BUFFERS};
    const int nlabels = cfg.no_model ? 0 : 5;
    put_cstr(&b, "torch");
    put_uv(&b, (uint64_t)nlabels);
    for (int i = 0; i < nlabels; i++) {
        put_uv(&b, cats[i]);
        put_cstr(&b, labels[i]);
    }
    size_t nrole = 0;
    for (size_t i = 0; i < nb && !cfg.no_model; i++)
        nrole += blk[i].state == OT_FW_BLOCK_ALLOCATED;
    put_uv(&b, nrole);
    for (int c = 0; c < 3; c++)
        for (size_t i = 0, k = 0; i < nb && nrole; i++) {
            if (blk[i].state != OT_FW_BLOCK_ALLOCATED)
                continue;
            uint64_t lab = k % 5;
            if (cfg.corrupt == C_FW_ROLES_LABEL && k == 0)
                lab = 5;
            put_u64(&b, c == 0 ? blk[i].address : c == 1 ? blk[i].size : lab);
            k++;
        }
    fw_record(recs, nrec, OT_FW_ROLES, &b);

    if (cfg.no_model) /* the optimizer-step hook saw no optimizer: no steps */
        return;
    put_cstr(&b, "torch");
    put_uv(&b, 4);
    for (uint64_t i = 0; i < 4; i++) {
        put_uv(&b, 97 + i);
        put_uv(&b, sim.t - (4 - i) * 1000000000ULL);
        put_uv(&b, fwv.allocated - (3 - i) * (fwv.allocated / 16));
        put_uv(&b, fwv.reserved);
        if (cfg.corrupt == C_FW_STEPS_SHORT && i == 3)
            break;
        put_cstr(&b, i == 3 ? "(64, 2048)" : "(64, 1024)");
    }
    fw_record(recs, nrec, OT_FW_STEPS, &b);
}

/* JAX with its default preallocation: 75% of the device reserved at start, arrays inside it. */
static void fw_jax(struct buf *recs, uint64_t *nrec)
{
    uint64_t total = device_total((int64_t)cfg.jax_device);
    fwv.jax_limit = total / 4 * 3;
    fwv.jax_in_use = fwv.jax_limit - fwv.jax_limit / 16;
    fwv.jax_largest_free = fwv.jax_limit / 32;
    struct buf b = {0};
    put_cstr(&b, "jax");
    put_uv(&b, cfg.jax_device);
    put_uv(&b, 7);
    put_stat(&b, "bytes_in_use", (int64_t)fwv.jax_in_use);
    put_stat(&b, "peak_bytes_in_use", (int64_t)fwv.jax_in_use);
    put_stat(&b, "bytes_limit", (int64_t)fwv.jax_limit);
    put_stat(&b, "bytes_reserved", 0);
    put_stat(&b, "largest_free_block_bytes", (int64_t)fwv.jax_largest_free);
    put_stat(&b, "pool_bytes", (int64_t)fwv.jax_limit);
    put_stat(&b, "num_allocs", 212);
    fw_record(recs, nrec, OT_FW_STATS, &b);
    put_cstr(&b, "jax");
    put_uv(&b, 4);
    put_setting(&b, "XLA_PYTHON_CLIENT_PREALLOCATE", "");
    put_setting(&b, "XLA_PYTHON_CLIENT_MEM_FRACTION", "");
    put_setting(&b, "XLA_PYTHON_CLIENT_ALLOCATOR", "");
    put_setting(&b, "preallocate_effective", "true");
    fw_record(recs, nrec, OT_FW_SETTINGS, &b);
    put_cstr(&b, "jax");
    static const char *const shapes[] = {"(8192, 8192)", "(4096, 16384)", "(1024,)"};
    static const char *const dtypes[] = {"float32", "bfloat16", "int32"};
    static const uint64_t counts[] = {180, 40, 3};
    static const uint64_t each[] = {8192ULL * 8192 * 4, 4096ULL * 16384 * 2, 1024 * 4};
    put_uv(&b, 3);
    for (int i = 0; i < 3; i++) {
        put_cstr(&b, dtypes[i]);
        put_cstr(&b, shapes[i]);
        put_uv(&b, cfg.jax_device);
        put_uv(&b, counts[i]);
        if (cfg.corrupt == C_FW_ARRAYS_SHORT && i == 2)
            break;
        put_uv(&b, counts[i] * each[i]);
    }
    fw_record(recs, nrec, OT_FW_ARRAYS, &b);
    if (!(cfg.frameworks & FW_TORCH)) {
        fwv.request = fwv.jax_largest_free * 2 + 4096;
        fwv.device = 0;
    }
}

/* CuPy's default pool holding memory the program freed. */
static void fw_cupy(struct buf *recs, uint64_t *nrec)
{
    uint64_t used = 6ULL << 30, freeb = 84ULL << 30;
    struct buf b = {0};
    put_cstr(&b, "cupy");
    put_uv(&b, OT_FW_DEVICE_ALL);
    put_uv(&b, 4);
    put_stat(&b, "pool_used_bytes", (int64_t)used);
    put_stat(&b, "pool_total_bytes", (int64_t)(used + freeb));
    put_stat(&b, "pool_free_bytes", (int64_t)freeb);
    put_stat(&b, "pinned_pool_free_blocks", 2);
    fw_record(recs, nrec, OT_FW_STATS, &b);
    if (!(cfg.frameworks & (FW_TORCH | FW_JAX))) {
        fwv.request = 2ULL << 30;
        fwv.device = 0;
    }
}

static const char *fw_main_name(void)
{
    return cfg.frameworks & FW_TORCH ? "torch" : cfg.frameworks & FW_JAX ? "jax" : "cupy";
}

void write_framework(void)
{
    if (!cfg.frameworks)
        return;
    struct buf recs = {0}, b = {0};
    uint64_t nrec = 0;
    const bool fatal = cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM;
    /* --fw-earlier: the last report is the one the companion wrote at a framework OOM 60% into the run, which
     * the program survived (as a batch-size search does); its message is that failure's. */
    const bool earlier = cfg.fw_earlier;
    put_cstr(&b, fw_main_name());
    put_cstr(&b, cfg.frameworks & FW_TORCH ? "2.11.0+cu130" : cfg.frameworks & FW_JAX ? "0.11.2" : "14.0.0");
    put_cstr(&b, fatal || earlier ? "oom"
                 : cfg.trigger == OT_TRIGGER_OOM ? "driver-oom"
                 : cfg.trigger == OT_TRIGGER_API ? "api"
                                                 : "exit");
    put_uv(&b, earlier ? sim.start_t + (sim.t - sim.start_t) / 10 * 6 : sim.t);
    if (cfg.corrupt != C_FW_INFO_SHORT)
        put_uv(&b, 3500000);
    fw_record(&recs, &nrec, OT_FW_INFO, &b);
    if (cfg.frameworks & FW_TORCH)
        fw_torch(&recs, &nrec);
    if (cfg.frameworks & FW_JAX)
        fw_jax(&recs, &nrec);
    if (cfg.frameworks & FW_CUPY)
        fw_cupy(&recs, &nrec);
    if (fatal || earlier) {
        char text[512];
        char rq[32];
        snprintf(rq, sizeof(rq), "%.2f GiB", (double)fwv.request / (1 << 30));
        if (cfg.frameworks & FW_TORCH)
            snprintf(text, sizeof(text),
                     "CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of 79.19 GiB of which"
                     " 1.02 GiB is free. Of the allocated memory %.2f GiB is allocated by PyTorch, and %.2f GiB is"
                     " reserved by PyTorch but unallocated.%s",
                     rq, (double)fwv.allocated / (1 << 30), (double)(fwv.reserved - fwv.allocated) / (1 << 30),
                     cfg.hostile ? " \x1b[2J\xff" : "");
        else if (cfg.frameworks & FW_JAX)
            snprintf(text, sizeof(text), "RESOURCE_EXHAUSTED: Out of memory while trying to allocate %" PRIu64
                     " bytes.", fwv.request);
        else
            snprintf(text, sizeof(text), "Out of memory allocating %" PRIu64 " bytes (allocated so far: %llu"
                     " bytes).", fwv.request, 6ULL << 30);
        put_cstr(&b, fw_main_name());
        put_cstr(&b, text);
        put_uv(&b, (uint64_t)fwv.device);
        if (cfg.corrupt != C_FW_ERROR_SHORT)
            put_uv(&b, fwv.request);
        fw_record(&recs, &nrec, OT_FW_ERROR, &b);
    }
    /* A record of a kind from a later layout: skipped by length. */
    put_cstr(&b, "from a later companion");
    fw_record(&recs, &nrec, 200, &b);

    put_uv(&b, cfg.corrupt == C_FW_LAYOUT ? 2 : OT_FW_LAYOUT_VERSION);
    put_uv(&b, nrec);
    put_bytes(&b, recs.p, cfg.corrupt == C_FW_RECORD_PAST_END ? recs.n - 3 : recs.n);
    free_buf(&recs);
    section(OT_SEC_FRAMEWORK, &b, cfg.compress);

    if (fatal && !cfg.no_probes) {
        put_uv(&b, cfg.probes + (cfg.corrupt == C_PROBES_COUNT ? 100 : 0));
        for (uint64_t i = 0; i < cfg.probes; i++) {
            char name[96];
            snprintf(name, sizeof(name), "oomtrace-snapgen-host-4242-%" PRIu64 "-oom.oomt", i + 1);
            put_cstr(&b, name);
            put_uv(&b, sim.seq - cfg.probes + i);
            put_uv(&b, i == 0 ? (2ULL << 30) + (30ULL << 20) : fwv.request);
            put_uv(&b, 0);
        }
        section(OT_SEC_PROBES, &b, false);
    }
}

/* The framework's refused request: no driver call failed, so the API is the framework's allocator. */
void write_framework_failure(void)
{
    struct buf b = {0};
    put_uv(&b, OT_API_framework_allocator);
    put_uv(&b, OT_CAT_DEVICE);
    put_sv(&b, fwv.device);
    put_uv(&b, fwv.request);
    put_uv(&b, 2); /* CUDA_ERROR_OUT_OF_MEMORY */
    put_uv(&b, sim.t);
    put_uv(&b, 1000);
    put_uv(&b, stacks[0].id);
    put_uv(&b, sim.seq);
    section(OT_SEC_FAILURE, &b, false);
}
