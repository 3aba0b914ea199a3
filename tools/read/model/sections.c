/* The sections that are plain lists: META, DEVICES, FAILURE, MODULES, SYMBOLS, PYFRAMES, STACKS,
 * EVENTS (chunk index only), MARKERS, POOLS, MAPPINGS, PROCESSES, THREADS. */
#include "model/section.h"

#include <inttypes.h>
#include <stdlib.h>

int parse_meta(struct sec_ctx *x)
{
    struct ot_meta *m = &x->snap->meta;
    m->tracer_version = STR();
    m->trigger = U();
    m->reason = STR();
    m->pid = U();
    m->ppid = U();
    m->host = STR();
    uint64_t argc = U();
    if (sec_check_count(x, argc, 1, "argv") < 0)
        return -1;
    m->argc = (size_t)argc;
    if (!(m->argv = sec_alloc(x, m->argc, sizeof(*m->argv))))
        return -1;
    for (size_t i = 0; i < m->argc; i++)
        m->argv[i] = STR();
    m->exe = STR();
    m->wall_ns = U();
    m->mono_ns = U();
    m->start_mono_ns = U();
    m->rank = S();
    m->local_rank = S();
    m->world_size = S();
    m->rank_source = STR();
    m->events_recorded = U();
    m->events_kept = U();
    m->events_dropped = U();
    m->chunks_dropped = U();
    m->ring_budget_bytes = U();
    m->ring_used_bytes = U();
    m->snapshot_seq = U();
    m->python_version = STR();
    m->cuda_visible_devices = STR();
    if (x->c.err)
        return sec_item_err(x, "META field", SIZE_MAX);
    return 0;
}

int parse_devices(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 12, "device") < 0)
        return -1;
    if (!(s->devices = sec_alloc(x, (size_t)count, sizeof(*s->devices))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct snap_device *d = &s->devices[i];
        d->ordinal = S();
        d->name = STR();
        d->uuid = STR();
        d->flags = U();
        d->total_bytes = U();
        d->free_bytes = U();
        d->baseline_used_bytes = U();
        d->tracked_bytes = U();
        d->peak_bytes = U();
        d->peak_time_ns = U();
        d->peak_seq = U();
        uint64_t ncat = U();
        if (x->c.err)
            return sec_item_err(x, "device", i);
        if (ncat > sec_left(x))
            return sec_err(x, "device %zu: %" PRIu64 " categories cannot fit in the %zu bytes left", i, ncat, sec_left(x));
        d->ncat = (size_t)ncat;
        if (!(d->by_category = sec_alloc(x, d->ncat, sizeof(uint64_t))))
            return -1;
        for (size_t k = 0; k < d->ncat; k++)
            d->by_category[k] = U();
        if (x->c.err)
            return sec_item_err(x, "device", i);
        for (size_t j = 0; j < i; j++)
            if (s->devices[j].ordinal == d->ordinal)
                return sec_err(x, "device ordinal %" PRId64 " is listed twice", d->ordinal);
        s->ndevices = i + 1;
    }
    return 0;
}

int parse_failure(struct sec_ctx *x)
{
    struct snap_failure *f = &x->snap->failure;
    f->api = U();
    f->category = U();
    f->device = S();
    f->requested_bytes = U();
    f->result_code = U();
    f->time_ns = U();
    f->tid = U();
    f->stack_id = U();
    f->seq = U();
    if (x->c.err)
        return sec_item_err(x, "FAILURE field", SIZE_MAX);
    x->snap->has_failure = true;
    return 0;
}

static int cmp_module(const void *a, const void *b)
{
    const struct ot_module *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

int parse_modules(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 5, "module") < 0)
        return -1;
    if (!(s->modules = sec_alloc(x, (size_t)count, sizeof(*s->modules))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_module *m = &s->modules[i];
        m->path = STR();
        m->start = U();
        m->end = U();
        m->load_bias = U();
        m->build_id = STR();
        if (x->c.err)
            return sec_item_err(x, "module", i);
        if (m->end < m->start)
            return sec_err(x, "module %zu ends (0x%" PRIx64 ") before it starts (0x%" PRIx64 ")", i, m->end, m->start);
    }
    s->nmodules = (size_t)count;
    if (s->nmodules > 1)
        qsort(s->modules, s->nmodules, sizeof(*s->modules), cmp_module);
    return 0;
}

int parse_symbols(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 3, "symbol") < 0)
        return -1;
    if (!(s->symbols = sec_alloc(x, (size_t)count, sizeof(*s->symbols))))
        return -1;
    if (ot_u64map_init(&s->symbol_index, (size_t)count) < 0)
        return sec_err(x, "out of memory");
    for (size_t i = 0; i < count; i++) {
        struct ot_symbol *y = &s->symbols[i];
        y->address = U();
        y->name = STR();
        y->offset = U();
        if (x->c.err)
            return sec_item_err(x, "symbol", i);
        /* A repeated address is harmless (the writer resolved it twice): the first one wins. */
        if (ot_u64map_put(&s->symbol_index, y->address, (uint32_t)i) == OT_U64MAP_NONE)
            return sec_err(x, "out of memory");
    }
    s->nsymbols = (size_t)count;
    return 0;
}

int parse_pyframes(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 4, "Python frame") < 0)
        return -1;
    if (!(s->pyframes = sec_alloc(x, (size_t)count, sizeof(*s->pyframes))))
        return -1;
    if (ot_u64map_init(&s->pyframe_index, (size_t)count) < 0)
        return sec_err(x, "out of memory");
    for (size_t i = 0; i < count; i++) {
        struct ot_pyframe *f = &s->pyframes[i];
        f->id = U();
        f->function = STR();
        f->file = STR();
        f->line = U();
        if (x->c.err)
            return sec_item_err(x, "Python frame", i);
        uint32_t got = ot_u64map_put(&s->pyframe_index, f->id, (uint32_t)i);
        if (got == OT_U64MAP_NONE)
            return sec_err(x, "out of memory");
        if (got != i)
            return sec_err(x, "Python frame id %" PRIu64 " is listed twice", f->id);
    }
    s->npyframes = (size_t)count;
    return 0;
}

int parse_stacks(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 3, "stack") < 0)
        return -1;
    if (!(s->stacks = sec_alloc(x, (size_t)count, sizeof(*s->stacks))))
        return -1;
    if (ot_u64map_init(&s->stack_index, (size_t)count) < 0)
        return sec_err(x, "out of memory");
    for (size_t i = 0; i < count; i++) {
        struct ot_stack *st = &s->stacks[i];
        st->id = U();
        st->flags = U();
        uint64_t nframes = U();
        if (x->c.err)
            return sec_item_err(x, "stack", i);
        if (nframes > sec_left(x))
            return sec_err(x, "stack %zu (id %" PRIu64 "): %" PRIu64 " frames cannot fit in the %zu bytes left", i,
                        st->id, nframes, sec_left(x));
        uint64_t *frames = sec_alloc(x, (size_t)nframes, sizeof(uint64_t));
        if (!frames)
            return -1;
        for (size_t k = 0; k < nframes; k++)
            frames[k] = U();
        if (x->c.err)
            return sec_item_err(x, "stack", i);
        st->nframes = (size_t)nframes;
        st->frames = frames;
        uint32_t got = ot_u64map_put(&s->stack_index, st->id, (uint32_t)i);
        if (got == OT_U64MAP_NONE)
            return sec_err(x, "out of memory");
        if (got != i)
            return sec_err(x, "stack id %" PRIu64 " is listed twice", st->id);
        s->nstacks = i + 1;
    }
    return 0;
}

/* Smallest encoded event: nine one-byte varints (kind, api, category, device, dt, tid, addr, size,
 * stack). A chunk claiming more events than raw_len / 9 is refused before anything is decoded. */
#define OT_EVENT_MIN_BYTES 9u

int parse_events(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 5, "chunk") < 0)
        return -1;
    if (!(s->chunks = sec_alloc(x, (size_t)count, sizeof(*s->chunks))))
        return -1;
    uint64_t raw_total = 0;
    for (size_t i = 0; i < count; i++) {
        struct ot_chunk *ch = &s->chunks[i];
        ch->first_seq = U();
        ch->nevents = U();
        ch->t0_ns = U();
        ch->raw_len = U();
        struct ot_str f = STR();
        if (x->c.err)
            return sec_item_err(x, "chunk", i);
        if (ch->raw_len > OT_MAX_SECTION_RAW)
            return sec_err(x, "chunk %zu: raw_len %" PRIu64 " is over the 4 GiB limit", i, ch->raw_len);
        if (ch->nevents > ch->raw_len / OT_EVENT_MIN_BYTES)
            return sec_err(x, "chunk %zu: %" PRIu64 " events cannot fit in raw_len %" PRIu64 " bytes", i, ch->nevents,
                        ch->raw_len);
        ch->frame = (const uint8_t *)f.p;
        ch->frame_len = f.n;
        /* Each report decodes every chunk: their raw bytes together stay within the memory budget, so a
         * few kilobytes of frames cannot claim a billion events. */
        raw_total += ch->raw_len;
        if (raw_total > s->arena.limit)
            return sec_err(x, "the event chunks decompress to more than %zu bytes, the reader's memory budget (%u x "
                              "the file's size + %u MiB)", s->arena.limit, OT_READ_RATIO, OT_READ_BASE_MIB);
        s->chunk_events += ch->nevents;
        if (ch->raw_len > s->max_chunk_raw)
            s->max_chunk_raw = ch->raw_len;
    }
    s->nchunks = (size_t)count;
    s->events_offset = x->hdr_off;
    return 0;
}

static int cmp_marker(const void *a, const void *b)
{
    const struct snap_marker *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

int parse_markers(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 4, "marker") < 0)
        return -1;
    if (!(s->markers = sec_alloc(x, (size_t)count, sizeof(*s->markers))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct snap_marker *m = &s->markers[i];
        m->seq = U();
        m->time_ns = U();
        m->tid = U();
        m->label = STR();
        if (x->c.err)
            return sec_item_err(x, "marker", i);
    }
    s->nmarkers = (size_t)count;
    /* "Before the peak" is a seq comparison, so keep them in seq order whatever order they came in. */
    if (s->nmarkers > 1)
        qsort(s->markers, s->nmarkers, sizeof(*s->markers), cmp_marker);
    return 0;
}

int parse_pools(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 5, "pool") < 0)
        return -1;
    if (!(s->pools = sec_alloc(x, (size_t)count, sizeof(*s->pools))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct snap_pool *p = &s->pools[i];
        p->handle = U();
        p->device = S();
        p->flags = U();
        p->reserved_bytes = U();
        p->used_bytes = U();
        if (x->c.err)
            return sec_item_err(x, "pool", i);
    }
    s->npools = (size_t)count;
    return 0;
}

int parse_mappings(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 4, "mapping") < 0)
        return -1;
    if (!(s->mappings = sec_alloc(x, (size_t)count, sizeof(*s->mappings))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_mapping *m = &s->mappings[i];
        m->address = U();
        m->size = U();
        m->handle = U();
        m->offset = U();
        if (x->c.err)
            return sec_item_err(x, "mapping", i);
    }
    s->nmappings = (size_t)count;
    return 0;
}

int parse_processes(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    s->processes_source = U();
    s->processes_note = STR();
    uint64_t count = U();
    if (sec_check_count(x, count, 4, "process") < 0)
        return -1;
    if (!(s->processes = sec_alloc(x, (size_t)count, sizeof(*s->processes))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_process *p = &s->processes[i];
        p->device = S();
        p->pid = U();
        p->used_bytes = U();
        p->name = STR();
        if (x->c.err)
            return sec_item_err(x, "process", i);
    }
    s->nprocesses = (size_t)count;
    s->has_processes = true;
    return 0;
}

int parse_threads(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 2, "thread") < 0)
        return -1;
    if (!(s->threads = sec_alloc(x, (size_t)count, sizeof(*s->threads))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        s->threads[i].tid = U();
        s->threads[i].name = STR();
        if (x->c.err)
            return sec_item_err(x, "thread", i);
    }
    s->nthreads = (size_t)count;
    return 0;
}

int parse_borrowed(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (sec_check_count(x, count, 2, "borrowed stack") < 0)
        return -1;
    if (!(s->borrowed = sec_alloc(x, (size_t)count, 2 * sizeof(uint64_t))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        s->borrowed[2 * i] = U();
        s->borrowed[2 * i + 1] = U();
        if (x->c.err)
            return sec_item_err(x, "borrowed stack", i);
    }
    s->nborrowed = (size_t)count;
    s->borrowed_off = x->hdr_off;
    return 0;
}

int sec_resolve_borrowed(struct ot_snapshot *s, char *errbuf)
{
    struct sec_ctx x = {.snap = s, .type = OT_SEC_BORROWED, .hdr_off = s->borrowed_off, .err = errbuf};
    for (size_t i = 0; i < s->nborrowed; i++) {
        uint64_t id = s->borrowed[2 * i], tid = s->borrowed[2 * i + 1];
        uint32_t k = ot_u64map_get(&s->stack_index, id);
        if (k == OT_U64MAP_NONE)
            return sec_err(&x, "entry %zu names stack %" PRIu64 ", which the file does not hold", i, id);
        if (!(s->stacks[k].flags & OT_STACK_BORROWED))
            return sec_err(&x, "entry %zu names stack %" PRIu64 ", which is not marked borrowed", i, id);
        if (tid > UINT32_MAX)
            return sec_err(&x, "entry %zu: thread id %" PRIu64 " is out of range", i, tid);
        s->stacks[k].lender_tid = tid;
    }
    return 0;
}

/* FRAMEWORK and PROBES: the payload alone goes to framework.c's parsers. */
int parse_framework(struct sec_ctx *x)
{
    char why[OT_ERRBUF - 96];
    if (ot_framework_parse(&x->snap->arena, x->c.p, sec_left(x), &x->snap->fw, why, sizeof(why)) < 0)
        return sec_err(x, "%s", why);
    return 0;
}

int parse_probes(struct sec_ctx *x)
{
    char why[OT_ERRBUF - 96];
    if (ot_probes_parse(&x->snap->arena, x->c.p, sec_left(x), &x->snap->probes, why, sizeof(why)) < 0)
        return sec_err(x, "%s", why);
    return 0;
}
