#include "analyze/breakdown.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/allocview.h"
#include "analyze/breakdown/sites.h"
#include "analyze/stackview.h"
#include "analyze/userline.h"

/* Each row's name in reports and its key in JSON. */
static const struct {
    const char *name, *key;
} rows[OT_BD_NROWS] = {
    [OT_BD_PARAMETERS] = {"parameters", "parameters"},
    [OT_BD_GRADIENTS] = {"gradients", "gradients"},
    [OT_BD_OPTIMIZER] = {"optimizer state", "optimizer_state"},
    [OT_BD_BUFFERS] = {"module buffers", "buffers"},
    [OT_BD_ACTIVATIONS] = {"activations and temporaries", "activations"},
    [OT_BD_PROGRAM] = {"the program's own allocations", "program_allocations"},
    [OT_BD_WORKSPACES] = {"library workspaces", "workspaces"},
    [OT_BD_CACHE] = {"framework cache (reserved, not allocated)", "framework_cache"},
    [OT_BD_CONTEXT] = {"CUDA context and untracked", "context_untracked"},
    [OT_BD_OTHERS] = {"other processes", "other_processes"},
};

const char *ot_bd_row_name(const struct ot_breakdown *b, enum ot_bd_row r)
{
    if (r == OT_BD_CACHE && b && b->cache_is_pools)
        return "stream-ordered pools (reserved, not allocated)";
    return r < OT_BD_NROWS ? rows[r].name : "unknown";
}

const char *ot_bd_row_key(enum ot_bd_row r)
{
    return r < OT_BD_NROWS ? rows[r].key : "unknown";
}

const char *ot_bd_inferred_why(const struct ot_breakdown *b)
{
    if (b->no_model) /* (identity may still name the cache: the allocator's free blocks) */
        return "no model was on the GPU: the companion's scan of the process (every nn.Module and optimizer) found no "
               "parameter, gradient, optimizer state or module buffer there, so PyTorch's tensors live then are the "
               "program's own, by call site";
    if (b->identity)
        return NULL;
    if (b->framework_seen && b->roles_earlier)
        return "the tensors' roles were reported only in an earlier allocator's view, shown below, which no row uses";
    return b->framework_seen ? "the tensors' roles were not reported" : "no framework was on those stacks";
}

/* What a stack says about the memory it allocated, when no identity is known. */
struct guess {
    enum ot_bd_row row;
    const char *part; /* workspaces: the library; NULL otherwise */
    bool torch;       /* the row is PyTorch's (activations, or a model's tensor by its code): the program's own
                       * where the companion found no model (no_model) */
};

static bool file_has(const struct ot_frame *f, const char *s)
{
    return ot_str_contains(f->file, s);
}

static bool fn_has(const struct ot_frame *f, const char *s)
{
    return ot_str_contains(f->function, s);
}

/* The companion scanned the process for modules and optimizers and found no tensor of theirs on the GPU
 * (PyTorch's ROLES record, empty): no model there, so nothing PyTorch allocated that was still live then is a
 * model's tensor. Not beside another framework's pool (CuPy, JAX), which takes its cache from the program's
 * row: PyTorch's tensors there would be taken for it. */
static bool no_model(const struct ot_snapshot *s)
{
    if (!s->fw.present || !s->fw.torch_roles_records || s->fw.nroles)
        return false;
    for (size_t i = 0; i < s->fw.ninfo; i++)
        if (!ot_str_eq(s->fw.info[i].framework, "torch"))
            return false;
    for (size_t i = 0; i < s->fw.nstats; i++)
        if (!ot_str_eq(s->fw.stats[i].framework, "torch"))
            return false;
    return true;
}

/* Library workspaces are named by the library that asked for them; the program's tensors by the
 * framework code that made them: an optimizer's step (torch/optim), a model moved or loaded to the
 * device (Module._apply, load_state_dict, from_pretrained), autograd's backward. The rest of what
 * PyTorch allocated (its Python source or its native libraries on the stack) is activations and
 * temporaries: the guides' name for a framework's other tensors, unless the companion found no model on
 * the GPU (a loop of tensors kept in a list). Without PyTorch on the stack nothing says the memory is
 * activations (a C program's buffers, raw driver calls from Python, CuPy's or JAX's arrays): it is the
 * program's own, and its call sites say what it is. */
static struct guess guess_stack(const struct ot_analysis *a, uint64_t stack_id)
{
    struct guess g = {OT_BD_PROGRAM, NULL, false};
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, a->res, ot_snapshot_stack(a->s, stack_id), OT_WALK_ALL); ot_walk_next(&w);) {
        const struct ot_frame *f = w.f;
        if (!w.py) {
            if (ot_str_starts(w.module, "libcublas"))
                return (struct guess){OT_BD_WORKSPACES, "cuBLAS", false};
            if (ot_str_starts(w.module, "libcudnn"))
                return (struct guess){OT_BD_WORKSPACES, "cuDNN", false};
            if (ot_str_starts(w.module, "libnccl"))
                return (struct guess){OT_BD_WORKSPACES, "NCCL", false};
        }
        /* PyTorch's native libraries or its installed Python source (ot_walk_framework's rule). */
        const char *fw = ot_walk_framework(&w);
        if (fw && strcmp(fw, "torch") == 0)
            g = (struct guess){OT_BD_ACTIVATIONS, NULL, true};
        if (!w.py)
            continue;
        if (file_has(f, "torch/optim/"))
            return (struct guess){OT_BD_OPTIMIZER, NULL, true};
        if ((file_has(f, "torch/nn/modules/module.py") && fn_has(f, "_apply")) || fn_has(f, "load_state_dict") ||
            fn_has(f, "from_pretrained"))
            return (struct guess){OT_BD_PARAMETERS, NULL, true};
        if (file_has(f, "torch/autograd/") && fn_has(f, "backward"))
            return (struct guess){OT_BD_GRADIENTS, NULL, true};
    }
    return g;
}

/* Stack guesses are cached: a 1M-allocation snapshot has a few thousand stacks. */
struct guesser {
    const struct ot_analysis *a;
    struct ot_u64map map; /* stack id -> index into v */
    struct guess *v;
    uint64_t *ids; /* the stack id of each v */
    size_t n, cap, idcap;
};

static uint64_t *realloc_ids(struct guesser *g)
{
    if (g->idcap < g->cap) {
        uint64_t *v = realloc(g->ids, g->cap * sizeof(*v));
        if (!v) {
            free(g->ids);
            return NULL;
        }
        g->idcap = g->cap;
        return v;
    }
    return g->ids;
}

/* Returns the stack's index in the cache (what the program row's call sites are counted by), -1 when
 * out of memory. */
static int64_t guess_cached(struct guesser *g, uint64_t stack_id, struct guess *out)
{
    uint32_t i = ot_u64map_get(&g->map, stack_id);
    if (i != OT_U64MAP_NONE) {
        *out = g->v[i];
        return i;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        struct guess *v = realloc(g->v, cap * sizeof(*v));
        if (!v)
            return -1;
        g->v = v;
        g->cap = cap;
    }
    *out = guess_stack(g->a, stack_id);
    if (g->n >= OT_U64MAP_NONE - 1 || ot_u64map_put(&g->map, stack_id, (uint32_t)g->n) == OT_U64MAP_NONE)
        return -1;
    g->ids = realloc_ids(g);
    if (!g->ids)
        return -1;
    g->ids[g->n] = stack_id;
    g->v[g->n] = *out;
    return (int64_t)g->n++;
}

static int cmp_part(const void *x, const void *y)
{
    const struct ot_bd_part *a = x, *b = y;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    if (a->rest != b->rest)
        return a->rest ? 1 : -1;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank; /* qsort is not stable: equal bytes keep their order */
}

static void add_row(struct ot_bd_moment *m, enum ot_bd_row row, uint64_t bytes, bool inferred)
{
    m->bytes[row] = ot_sat_add(m->bytes[row], bytes);
    m->measured[row] = true;
    if (inferred)
        m->inferred[row] = ot_sat_add(m->inferred[row], bytes);
}

/* Identity: what the framework said about address ranges on the device. Each allocated block of its
 * allocator takes the role of the tensor storage at its address (none: activations and temporaries),
 * each free block is cache; without blocks, each role's storage is its own range. */
struct span {
    uint64_t address, size;
    enum ot_bd_row row;
    struct ot_str label;
};

struct identity {
    struct span *v;
    size_t n;
};

static int cmp_span(const void *x, const void *y)
{
    const struct span *a = x, *b = y;
    return a->address < b->address ? -1 : a->address > b->address;
}

static enum ot_bd_row role_row(uint64_t category)
{
    switch (category) {
    case OT_FW_ROLE_PARAMETERS:
        return OT_BD_PARAMETERS;
    case OT_FW_ROLE_GRADIENTS:
        return OT_BD_GRADIENTS;
    case OT_FW_ROLE_OPTIMIZER_STATE:
        return OT_BD_OPTIMIZER;
    case OT_FW_ROLE_BUFFERS:
        return OT_BD_BUFFERS;
    default:
        return OT_BD_ACTIVATIONS;
    }
}

/* The role whose storage starts inside [a, a + size), from roles sorted by address; NULL when none. */
static const struct span *role_in(const struct span *roles, size_t n, uint64_t a, uint64_t size)
{
    size_t lo = ot_lower_bound_u64(roles, n, sizeof(*roles), offsetof(struct span, address), a);
    return lo < n && roles[lo].address - a < size ? &roles[lo] : NULL;
}

static int identity_build(const struct ot_snapshot *s, int64_t device, struct identity *id)
{
    const struct ot_framework *fw = &s->fw;
    memset(id, 0, sizeof(*id));
    /* Without roles the free blocks still say what is cache; the allocated ones are left to the stacks. */
    if (!fw->present || (!fw->nroles && !fw->nblocks))
        return 0;
    struct span *roles = malloc((fw->nroles + 1) * sizeof(*roles));
    size_t nblocks = 0;
    for (size_t i = 0; i < fw->nblocks; i++)
        if (fw->blocks[i].segment < fw->nsegments && (int64_t)fw->segments[fw->blocks[i].segment].device == device)
            nblocks++;
    id->v = malloc((nblocks + fw->nroles + 1) * sizeof(*id->v));
    if (!roles || !id->v) {
        free(roles);
        free(id->v);
        id->v = NULL;
        return -1;
    }
    for (size_t i = 0; i < fw->nroles; i++) {
        const struct ot_fw_role *r = &fw->roles[i];
        roles[i] = (struct span){r->address, r->bytes, role_row(r->category), r->label};
    }
    qsort(roles, fw->nroles, sizeof(*roles), cmp_span);
    if (nblocks) {
        for (size_t i = 0; i < fw->nblocks; i++) {
            const struct ot_fw_block *b = &fw->blocks[i];
            if (b->segment >= fw->nsegments || (int64_t)fw->segments[b->segment].device != device || !b->size)
                continue;
            struct span x = {b->address, b->size, OT_BD_CACHE, {NULL, 0}};
            if (b->state != OT_FW_BLOCK_INACTIVE) {
                if (!fw->nroles)
                    continue;
                const struct span *r = role_in(roles, fw->nroles, b->address, b->size);
                x.row = r ? r->row : OT_BD_ACTIVATIONS;
                x.label = r ? r->label : (struct ot_str){NULL, 0};
            }
            id->v[id->n++] = x;
        }
    } else {
        /* Roles without the allocator's blocks: each storage as reported (a framework without a caching
         * allocator view). */
        memcpy(id->v, roles, fw->nroles * sizeof(*roles));
        id->n = fw->nroles;
    }
    free(roles);
    qsort(id->v, id->n, sizeof(*id->v), cmp_span);
    return 0;
}

/* Attributes the part of record [a, a + size) that identity covers; returns the bytes covered. */
static uint64_t identity_apply(const struct identity *id, struct ot_bd_moment *m, uint64_t a, uint64_t size)
{
    if (!id->n)
        return 0;
    size_t lo = 0, hi = id->n;
    while (lo < hi) { /* the first span ending after a */
        size_t mid = lo + (hi - lo) / 2;
        if (id->v[mid].address + id->v[mid].size <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t covered = 0, end = a + size;
    for (size_t i = lo; i < id->n && id->v[i].address < end; i++) {
        const struct span *x = &id->v[i];
        uint64_t from = x->address > a ? x->address : a;
        uint64_t to = x->address + x->size < end ? x->address + x->size : end;
        if (to <= from)
            continue;
        uint64_t n = to - from;
        if (covered + n > size)
            n = size - covered; /* overlapping spans from a damaged view: never more than the record */
        add_row(m, x->row, n, false);
        if (x->row == OT_BD_OPTIMIZER && x->label.n)
            ot_bd_add_part(m, x->row, x->label, n);
        covered += n;
    }
    return covered;
}

/* The program's own allocations at one moment: every device-memory record on the device, by stack. */
/* same_as_now: for the peak, which of its records are the very allocations live at the snapshot (the
 * identity describes those only); NULL for the snapshot's own records. */
/* sb: the program row's bytes by the guesser's stack index. */
/* nm: the companion found no model at the snapshot (no_model): PyTorch's allocations live then are the
 * program's own. */
static int add_records(struct guesser *g, const struct identity *id, const struct ot_u64map *live_by_address,
                       const struct ot_snapshot *s, struct ot_bd_moment *m, const struct ot_record *recs, size_t n,
                       int64_t device, struct ot_bd_site_bytes *sb, bool nm)
{
    for (int r = OT_BD_PARAMETERS; r <= OT_BD_WORKSPACES; r++)
        m->measured[r] = true;
    /* Neighbouring records often share a stack (a loop's allocations): the last guess is reused without
     * a lookup. */
    uint64_t last_id = 0;
    int64_t last_k = -1;
    struct guess last_g = {OT_BD_PROGRAM, NULL, false};
    for (size_t i = 0; i < n; i++) {
        const struct ot_record *r = &recs[i];
        if (r->device != device || !ot_category_is_device64(r->category))
            continue;
        uint64_t covered = 0;
        bool same = true;
        if (live_by_address) {
            uint32_t k = ot_u64map_get(live_by_address, r->address);
            same = k != OT_U64MAP_NONE && s->live[k].seq == r->seq;
        }
        if (same)
            covered = identity_apply(id, m, r->address, r->size);
        if (covered >= r->size)
            continue;
        struct guess gs = last_g;
        int64_t k = last_k >= 0 && r->stack_id == last_id ? last_k : guess_cached(g, r->stack_id, &gs);
        last_id = r->stack_id;
        last_k = k;
        last_g = gs;
        if (nm && same && gs.torch) {
            gs.row = OT_BD_PROGRAM;
            m->no_model_bytes = ot_sat_add(m->no_model_bytes, r->size - covered);
        }
        if (k < 0 || (gs.row == OT_BD_PROGRAM && ot_bd_site_add(sb, (size_t)k, r->size - covered) < 0))
            return -1;
        add_row(m, gs.row, r->size - covered, true);
        if (gs.part)
            ot_bd_add_part(m, gs.row, ot_cstr(gs.part), r->size - covered);
    }
    m->known = true;
    return 0;
}

/* Memory outside the program's allocations, measured when the snapshot was written. */
static void add_outside(const struct ot_analysis *a, struct ot_bd_moment *m, int64_t device)
{
    const struct ot_snapshot *s = a->s;
    struct ot_pool_totals pt = ot_pools_of(s, device);
    uint64_t pooled = pt.reserved_bytes > pt.used_bytes ? pt.reserved_bytes - pt.used_bytes : 0;
    if (pt.count) {
        /* Beside a framework's own cache, the pools' part is named (alone, the row is named for them). */
        if (m->bytes[OT_BD_CACHE] && pooled)
            ot_bd_add_part(m, OT_BD_CACHE, ot_cstr("stream-ordered pools"), pooled);
        add_row(m, OT_BD_CACHE, pooled, false);
    }
    size_t nother = 0;
    uint64_t others = ot_other_process_bytes(s, device, &nother);
    if (s->has_processes)
        add_row(m, OT_BD_OTHERS, others, false);
    const struct snap_device *d = ot_snapshot_device(s, device);
    if (!d)
        return;
    /* NVML's line for this process is the direct measure of what it holds (context included); without
     * it, what the device uses beyond this process's allocations and the other processes. */
    uint64_t self = 0;
    for (size_t i = 0; i < s->nprocesses; i++)
        if (s->processes[i].device == device && s->processes[i].pid == s->meta.pid)
            self = s->processes[i].used_bytes;
    /* A pool's reservation is in NVML's figure for this process, but not in tracked (only what the pool
     * hands out is an allocation). */
    uint64_t mine = ot_sat_add(d->tracked_bytes, pooled);
    if (self) {
        add_row(m, OT_BD_CONTEXT, self > mine ? self - mine : 0, false);
    } else if ((d->flags & OT_DEV_MEMINFO_KNOWN) && d->total_bytes >= d->free_bytes) {
        uint64_t used = d->total_bytes - d->free_bytes;
        uint64_t known = ot_sat_add(mine, others);
        add_row(m, OT_BD_CONTEXT, used > known ? used - known : 0, false);
    }
    if ((d->flags & OT_DEV_MEMINFO_KNOWN) && d->total_bytes >= d->free_bytes) {
        m->whole = d->total_bytes - d->free_bytes;
        m->whole_is_used = true;
    }
}

/* Other frameworks' pools (CuPy's default pool, XLA's allocator for JAX) hand out memory from driver
 * allocations the stacks call the program's own (or, next to PyTorch, activations). What the pool holds
 * beyond its arrays is cache: memory the program freed (or XLA reserved at start) that the pool keeps.
 * Their counters are read at the snapshot; only stack-inferred bytes move, never identity's. */
static uint64_t take_inferred(struct ot_bd_moment *m, enum ot_bd_row from, uint64_t bytes)
{
    if (bytes > m->inferred[from])
        bytes = m->inferred[from];
    m->bytes[from] -= bytes;
    m->inferred[from] -= bytes;
    return bytes;
}

static void take_from_program(struct ot_bd_moment *m, enum ot_bd_row row, const char *label, uint64_t bytes)
{
    uint64_t took = take_inferred(m, OT_BD_PROGRAM, bytes);
    took += take_inferred(m, OT_BD_ACTIVATIONS, bytes - took);
    if (!took)
        return;
    add_row(m, row, took, false);
    ot_bd_add_part(m, row, ot_cstr(label), took);
}

static void split_pools(const struct ot_snapshot *s, struct ot_bd_moment *m, int64_t device)
{
    uint64_t freeb, limit, pool, in_use;
    if (ot_fw_stat(s, "cupy", (uint64_t)device, "pool_free_bytes", &freeb))
        take_from_program(m, OT_BD_CACHE, OT_BD_PART_CUPY_POOL, freeb);
    if (!ot_fw_stat(s, "jax", (uint64_t)device, "bytes_in_use", &in_use))
        return;
    /* Preallocated, XLA's pool is its limit, taken at start; else what it reserved so far. */
    bool pre = ot_str_eq(ot_fw_setting_get(&s->fw, "jax", "preallocate_effective"), "true");
    if (pre ? ot_fw_stat(s, "jax", (uint64_t)device, "bytes_limit", &limit)
            : ot_fw_stat(s, "jax", (uint64_t)device, "pool_bytes", &limit)) {
        pool = limit;
        if (pool > in_use)
            take_from_program(m, OT_BD_CACHE, pre ? "XLA's preallocated pool (JAX)" : "XLA's pool (JAX)", pool - in_use);
    }
    /* The rest of the program's own allocations holds JAX's arrays: say so. */
    uint64_t arrays = in_use < m->inferred[OT_BD_PROGRAM] ? in_use : m->inferred[OT_BD_PROGRAM];
    if (arrays)
        ot_bd_add_part(m, OT_BD_PROGRAM, ot_cstr("JAX arrays"), arrays);
}

static void finish(struct ot_bd_moment *m)
{
    uint64_t sum = 0;
    for (int r = 0; r < OT_BD_NROWS; r++)
        sum = ot_sat_add(sum, m->bytes[r]);
    if (m->whole < sum) {
        m->whole = sum;
        m->whole_is_used = false;
    }
    qsort(m->parts, m->nparts, sizeof(m->parts[0]), cmp_part);
}

static bool moment_empty(const struct ot_bd_moment *m)
{
    for (int r = 0; r < OT_BD_NROWS; r++)
        if (m->bytes[r])
            return false;
    return true;
}

/* A table with no row says nothing; the sentence says why it is empty (walk 7, #13: the most common
 * first-day OOM, a first request off by 1000x, showed a heading over an empty table). */
static void nothing_held(const struct ot_snapshot *s, struct ot_breakdown *b)
{
    if (!b->now.known || !moment_empty(&b->now) || (b->peak.known && !moment_empty(&b->peak)))
        return;
    const struct snap_device *d = ot_snapshot_device(s, b->device);
    const char *when = b->at_failure ? "when the request failed" : "at the snapshot";
    if (d && !d->peak_bytes)
        snprintf(b->nothing_held, sizeof(b->nothing_held),
                 "nothing: no allocation of this process was live on device %" PRId64 " %s, nor before%s", b->device,
                 when, b->at_failure ? " (its first allocation on the device failed)" : " (it allocated nothing there)");
    else
        snprintf(b->nothing_held, sizeof(b->nothing_held),
                 "nothing: no allocation of this process was live on device %" PRId64 " %s%s", b->device, when,
                 b->peak.known ? "" : " (the live set at its peak was not recorded)");
}

int ot_breakdown_build(const struct ot_analysis *a, struct ot_breakdown *out)
{
    memset(out, 0, sizeof(*out));
    const struct ot_snapshot *s = a->s;
    if (s->has_failure) {
        out->device = s->failure.device;
        out->has_device = true;
        out->at_failure = true;
    } else if (a->peak) {
        out->device = a->peak->device;
        out->has_device = true;
    }
    if (!out->has_device || out->device < 0)
        return 0;
    struct guesser g = {.a = a};
    struct identity id;
    struct ot_u64map live = {0};
    struct ot_bd_site_bytes sb_now = {0}, sb_peak = {0};
    if (ot_u64map_init(&g.map, 64) < 0)
        return -1;
    int rc = identity_build(s, out->device, &id);
    out->identity = id.n > 0;
    const bool nm = no_model(s);
    if (rc == 0 && s->has_live) {
        rc = add_records(&g, &id, NULL, s, &out->now, s->live, s->nlive, out->device, &sb_now, nm);
        split_pools(s, &out->now, out->device);
    }
    const struct ot_peak_view *p = a->peak;
    bool at_peak = p && p->device == out->device && p->section;
    if (rc == 0 && at_peak) {
        /* Identity holds at the peak only for allocations still live at the snapshot, and so does the scan that
         * found no model. */
        bool by_address = (id.n || nm) && s->has_live;
        if (by_address) {
            rc = ot_u64map_init(&live, s->nlive);
            for (size_t i = 0; rc == 0 && i < s->nlive && i < OT_U64MAP_NONE; i++)
                if (ot_u64map_put(&live, s->live[i].address, (uint32_t)i) == OT_U64MAP_NONE)
                    rc = -1;
        }
        if (rc == 0)
            rc = add_records(&g, by_address ? &id : &(struct identity){0}, by_address ? &live : NULL, s, &out->peak,
                             p->section->recs, p->section->count, out->device, &sb_peak, nm && by_address);
        /* The pools' counters describe the snapshot: the peak gets them when its allocations are the
         * snapshot's (nothing allocated or freed on the device since). */
        const struct snap_device *d = ot_snapshot_device(s, out->device);
        if (rc == 0 && d && s->has_live && d->tracked_bytes == p->bytes)
            split_pools(s, &out->peak, out->device);
    }
    /* Both moments' sites are known before either is named: one label per site across the two tables. */
    if (rc == 0 && s->has_live) {
        rc = ot_bd_site_parts(g.a, g.ids, g.n, &out->now, &sb_now, at_peak ? &sb_peak : NULL);
        uint64_t before = out->now.bytes[OT_BD_CACHE];
        add_outside(a, &out->now, out->device);
        out->cache_is_pools = !before && out->now.bytes[OT_BD_CACHE];
        finish(&out->now);
    }
    if (rc == 0 && at_peak) {
        rc = ot_bd_site_parts(g.a, g.ids, g.n, &out->peak, &sb_peak, s->has_live ? &sb_now : NULL);
        out->peak.whole = p->bytes;
        finish(&out->peak);
    }
    for (size_t i = 0; i < g.n && !out->framework_seen; i++)
        out->framework_seen = ot_stack_framework(a, g.ids[i]) != NULL;
    out->roles_earlier = s->fw_earlier.nroles && !s->fw.nroles;
    /* Said only where it changed a row: PyTorch's allocations live at the scan were counted as the program's. */
    out->no_model = out->now.no_model_bytes || out->peak.no_model_bytes;
    nothing_held(s, out);
    ot_u64map_free(&live);
    ot_u64map_free(&g.map);
    free(sb_now.v);
    free(sb_peak.v);
    free(g.ids);
    free(g.v);
    free(id.v);
    return rc;
}

enum ot_bd_row ot_bd_guess(const struct ot_analysis *a, uint64_t stack_id)
{
    return guess_stack(a, stack_id).row;
}

const char *ot_stack_framework(const struct ot_analysis *a, uint64_t stack_id)
{
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, a->res, ot_snapshot_stack(a->s, stack_id), OT_WALK_ALL); ot_walk_next(&w);) {
        const char *fw = ot_walk_framework(&w);
        if (fw)
            return fw;
    }
    return NULL;
}
