/* The sections that are plain lists: META, DEVICES, FAILURE, MODULES, SYMBOLS, PYFRAMES, STACKS,
 * EVENTS (chunk index only), MARKERS, POOLS, MAPPINGS, PROCESSES, THREADS. Their fields are read by the
 * format header's lists (fields.h); what is here is what the file's bytes must satisfy beyond them. */
#include "model/section.h"

#include <inttypes.h>
#include <stdlib.h>

/* Modules in address order, markers in seq order. */
static int cmp_module(const void *a, const void *b)
{
    const struct ot_module *x = a, *y = b;
    int c = ot_cmp_u64(x->start, y->start);
    return c ? c : ot_cmp_u64(x->end, y->end);
}

static int cmp_marker(const void *a, const void *b)
{
    const struct snap_marker *x = a, *y = b;
    int c = ot_cmp_u64(x->seq, y->seq);
    return c ? c : ot_cmp_u64(x->time_ns, y->time_ns);
}

/* A list of items of `fields`, into *items, its length into *n: count, then the items, sorted by cmp
 * when one is given. With an index (items looked up by id), it is sized before the items are read, and
 * each puts them in it. */
#define SEC_READ_LIST(x, items, n, min_bytes, what, fields, index, each, cmp)                          \
    sec_read_list((x), (void **)(items), (n), (min_bytes), sizeof(**(items)), (what), (fields),        \
                  OT_NFIELDS(fields), (index), (each), (cmp))

static int sec_read_list(struct sec_ctx *x, void **items, size_t *n, size_t min_bytes, size_t size, const char *what,
                         const struct ot_field *f, size_t nf, struct ot_u64map *index,
                         int (*each)(struct sec_ctx *, void *, size_t), int (*cmp)(const void *, const void *))
{
    uint64_t count;
    if (!(*items = sec_list(x, min_bytes, size, what, &count)))
        return -1;
    if (index && ot_u64map_init(index, (size_t)count) < 0)
        return sec_err(x, "out of memory");
    if (sec_items(x, *items, count, size, f, nf, what, each) < 0)
        return -1;
    *n = (size_t)count;
    if (cmp && *n > 1)
        qsort(*items, *n, size, cmp);
    return 0;
}

/* An id already in index: the file lists it twice. */
static int sec_index(struct sec_ctx *x, struct ot_u64map *index, uint64_t id, size_t i, const char *what)
{
    uint32_t got = ot_u64map_put(index, id, (uint32_t)i);
    if (got == OT_U64MAP_NONE)
        return sec_err(x, "out of memory");
    if (got != i)
        return sec_err(x, "%s id %" PRIu64 " is listed twice", what, id);
    return 0;
}

static const struct ot_field meta_head[] = {OT_META_FIELDS_HEAD(OT_FIELD_OF, struct ot_meta)};
static const struct ot_field meta_tail[] = {OT_META_FIELDS_TAIL(OT_FIELD_OF, struct ot_meta)};

int parse_meta(struct sec_ctx *x)
{
    struct ot_meta *m = &x->snap->meta;
    ot_read_fields(&x->c, m, meta_head, OT_NFIELDS(meta_head));
    if (sec_check_count(x, m->argc, 1, "argv") < 0)
        return -1;
    if (!(m->argv = sec_alloc(x, m->argc, sizeof(*m->argv))))
        return -1;
    for (size_t i = 0; i < m->argc; i++)
        m->argv[i] = STR();
    return sec_fields(x, m, meta_tail, OT_NFIELDS(meta_tail), "META field");
}

static const struct ot_field device_fields[] = {OT_DEVICE_FIELDS(OT_FIELD_OF, struct snap_device)};

/* After a device's fields: its bytes by category, and an ordinal no other device has. */
static int device_rest(struct sec_ctx *x, void *item, size_t i)
{
    struct ot_snapshot *s = x->snap;
    struct snap_device *d = item;
    if (d->ncat > sec_left(x))
        return sec_err(x, "device %zu: %" PRIu64 " categories cannot fit in the %zu bytes left", i, (uint64_t)d->ncat,
                       sec_left(x));
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
    return 0;
}

int parse_devices(struct sec_ctx *x)
{
    size_t n;
    return SEC_READ_LIST(x, &x->snap->devices, &n, 12, "device", device_fields, NULL, device_rest, NULL);
}

static const struct ot_field failure_fields[] = {OT_FAILURE_FIELDS(OT_FIELD_OF, struct snap_failure)};

int parse_failure(struct sec_ctx *x)
{
    if (sec_fields(x, &x->snap->failure, failure_fields, OT_NFIELDS(failure_fields), "FAILURE field") < 0)
        return -1;
    x->snap->has_failure = true;
    return 0;
}

static const struct ot_field module_fields[] = {OT_MODULE_FIELDS(OT_FIELD_OF, struct ot_module)};

static int module_check(struct sec_ctx *x, void *item, size_t i)
{
    const struct ot_module *m = item;
    if (m->end < m->start)
        return sec_err(x, "module %zu ends (0x%" PRIx64 ") before it starts (0x%" PRIx64 ")", i, m->end, m->start);
    return 0;
}

int parse_modules(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    return SEC_READ_LIST(x, &s->modules, &s->nmodules, 5, "module", module_fields, NULL, module_check, cmp_module);
}

static const struct ot_field symbol_fields[] = {OT_SYMBOL_FIELDS(OT_FIELD_OF, struct ot_symbol)};

/* A repeated address is harmless (the writer resolved it twice): the first one wins. */
static int symbol_index(struct sec_ctx *x, void *item, size_t i)
{
    if (ot_u64map_put(&x->snap->symbol_index, ((struct ot_symbol *)item)->address, (uint32_t)i) == OT_U64MAP_NONE)
        return sec_err(x, "out of memory");
    return 0;
}

int parse_symbols(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    return SEC_READ_LIST(x, &s->symbols, &s->nsymbols, 3, "symbol", symbol_fields, &s->symbol_index, symbol_index,
                         NULL);
}

static const struct ot_field pyframe_fields[] = {OT_PYFRAME_FIELDS(OT_FIELD_OF, struct ot_pyframe)};

static int pyframe_index(struct sec_ctx *x, void *item, size_t i)
{
    return sec_index(x, &x->snap->pyframe_index, ((struct ot_pyframe *)item)->id, i, "Python frame");
}

int parse_pyframes(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    return SEC_READ_LIST(x, &s->pyframes, &s->npyframes, 4, "Python frame", pyframe_fields, &s->pyframe_index,
                         pyframe_index, NULL);
}

static const struct ot_field stack_fields[] = {OT_STACK_FIELDS(OT_FIELD_OF, struct ot_stack)};

/* After a stack's fields: its frame words, and an id no other stack has. */
static int stack_rest(struct sec_ctx *x, void *item, size_t i)
{
    struct ot_stack *st = item;
    if (st->nframes > sec_left(x))
        return sec_err(x, "stack %zu (id %" PRIu64 "): %" PRIu64 " frames cannot fit in the %zu bytes left", i, st->id,
                       (uint64_t)st->nframes, sec_left(x));
    uint64_t *frames = sec_alloc(x, st->nframes, sizeof(uint64_t));
    if (!frames)
        return -1;
    for (size_t k = 0; k < st->nframes; k++)
        frames[k] = U();
    if (x->c.err)
        return sec_item_err(x, "stack", i);
    st->frames = frames;
    if (sec_index(x, &x->snap->stack_index, st->id, i, "stack") < 0)
        return -1;
    x->snap->nstacks = i + 1;
    return 0;
}

int parse_stacks(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    size_t n;
    return SEC_READ_LIST(x, &s->stacks, &n, 3, "stack", stack_fields, &s->stack_index, stack_rest, NULL);
}

/* Smallest encoded event: nine one-byte varints (kind, api, category, device, dt, tid, addr, size,
 * stack). A chunk claiming more events than raw_len / 9 is refused before anything is decoded. */
#define OT_EVENT_MIN_BYTES 9u

static const struct ot_field chunk_fields[] = {OT_CHUNK_FIELDS(OT_FIELD_OF, struct ot_chunk)};

static int chunk_check(struct sec_ctx *x, void *item, size_t i)
{
    struct ot_snapshot *s = x->snap;
    const struct ot_chunk *ch = item;
    if (ch->raw_len > OT_MAX_SECTION_RAW)
        return sec_err(x, "chunk %zu: raw_len %" PRIu64 " is over the 4 GiB limit", i, ch->raw_len);
    if (ch->nevents > ch->raw_len / OT_EVENT_MIN_BYTES)
        return sec_err(x, "chunk %zu: %" PRIu64 " events cannot fit in raw_len %" PRIu64 " bytes", i, ch->nevents,
                       ch->raw_len);
    /* Each report decodes every chunk: their raw bytes together stay within the memory budget, so a
     * few kilobytes of frames cannot claim a billion events. */
    x->sum += ch->raw_len;
    if (x->sum > s->arena.limit)
        return sec_over_budget(x, "its event history");
    s->chunk_events += ch->nevents;
    if (ch->raw_len > s->max_chunk_raw)
        s->max_chunk_raw = ch->raw_len;
    return 0;
}

int parse_events(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    if (SEC_READ_LIST(x, &s->chunks, &s->nchunks, 5, "chunk", chunk_fields, NULL, chunk_check, NULL) < 0)
        return -1;
    s->events_offset = x->hdr_off;
    return 0;
}

static const struct ot_field marker_fields[] = {OT_MARKER_FIELDS(OT_FIELD_OF, struct snap_marker)};

int parse_markers(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    /* "Before the peak" is a seq comparison, so keep them in seq order whatever order they came in. */
    return SEC_READ_LIST(x, &s->markers, &s->nmarkers, 4, "marker", marker_fields, NULL, NULL, cmp_marker);
}

static const struct ot_field pool_fields[] = {OT_POOL_FIELDS(OT_FIELD_OF, struct snap_pool)};

int parse_pools(struct sec_ctx *x)
{
    return SEC_READ_LIST(x, &x->snap->pools, &x->snap->npools, 5, "pool", pool_fields, NULL, NULL, NULL);
}

static const struct ot_field mapping_fields[] = {OT_MAPPING_FIELDS(OT_FIELD_OF, struct ot_mapping)};

int parse_mappings(struct sec_ctx *x)
{
    return SEC_READ_LIST(x, &x->snap->mappings, &x->snap->nmappings, 4, "mapping", mapping_fields, NULL, NULL, NULL);
}

struct processes_head {
    uint64_t source;
    struct ot_str note;
};
static const struct ot_field processes_fields[] = {OT_PROCESSES_FIELDS(OT_FIELD_OF, struct processes_head)};
static const struct ot_field process_fields[] = {OT_PROCESS_FIELDS(OT_FIELD_OF, struct ot_process)};
static const struct ot_field process_detail_fields[] = {OT_PROCESS_DETAIL_FIELDS(OT_FIELD_OF, struct ot_process)};

int parse_processes(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    struct processes_head h;
    ot_read_fields(&x->c, &h, processes_fields, OT_NFIELDS(processes_fields));
    s->processes_source = h.source;
    s->processes_note = h.note;
    if (SEC_READ_LIST(x, &s->processes, &s->nprocesses, 4, "process", process_fields, NULL, NULL, NULL) < 0)
        return -1;
    s->has_processes = true;
    /* Since 1.3 each process's relation and command follow, one per process in the list's order; a 1.2
     * file ends here. */
    if (!sec_left(x))
        return 0;
    uint64_t n = U();
    if (x->c.err)
        return sec_item_err(x, "process details count", SIZE_MAX);
    if (n != s->nprocesses)
        return sec_err(x, "%" PRIu64 " process details for %zu processes", n, s->nprocesses);
    for (size_t i = 0; i < s->nprocesses; i++) {
        struct ot_process *p = &s->processes[i];
        ot_read_fields(&x->c, p, process_detail_fields, OT_NFIELDS(process_detail_fields));
        if (x->c.err)
            return sec_item_err(x, "process details", i);
    }
    return 0;
}

static const struct ot_field thread_fields[] = {OT_THREAD_FIELDS(OT_FIELD_OF, struct snap_thread)};

int parse_threads(struct sec_ctx *x)
{
    return SEC_READ_LIST(x, &x->snap->threads, &x->snap->nthreads, 2, "thread", thread_fields, NULL, NULL, NULL);
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
