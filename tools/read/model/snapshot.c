/* Snapshot parser: file bytes -> struct ot_snapshot. See snapshot.h for the contract and
 * docs/FORMAT.md for the bytes. */
#include "model/snapshot.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <zstd.h>

#define OT_FILE_HEADER_SIZE 32u
#define OT_SECTION_HEADER_SIZE 24u

_Static_assert(sizeof(struct ot_file_header) == OT_FILE_HEADER_SIZE, "file header is 32 bytes");
_Static_assert(sizeof(struct ot_section_header) == OT_SECTION_HEADER_SIZE, "section header is 24 bytes");

/* Sizes of a compressed output buffer we allocate up front without looking at the input: beyond
 * this, and when raw_len is implausibly larger than the compressed bytes, the buffer grows only as
 * output actually arrives. */
#define OT_ZSTD_EAGER_MAX ((uint64_t)64 << 20)
#define OT_ZSTD_PLAUSIBLE_RATIO 64u

const char *ot_section_name(uint32_t type)
{
    static const char *const names[] = {
        "unknown", "META", "DEVICES", "FAILURE", "MODULES", "SYMBOLS", "PYFRAMES", "STACKS",
        "LIVE", "PEAK", "EVENTS", "MARKERS", "POOLS", "MAPPINGS", "PROCESSES", "THREADS", "LIVE_SEQ",
        "PEAK_REF",
    };
    return type < sizeof(names) / sizeof(names[0]) ? names[type] : "unknown";
}

const char *ot_trigger_name(uint64_t trigger)
{
    switch (trigger) {
    case OT_TRIGGER_OOM:
        return "oom";
    case OT_TRIGGER_EXIT:
        return "exit";
    case OT_TRIGGER_SIGNAL:
        return "signal";
    case OT_TRIGGER_API:
        return "api";
    case OT_TRIGGER_FLUSH:
        return "flush";
    default:
        return NULL;
    }
}

/* ---- zstd ---- */

void ot_zbuf_free(struct ot_zbuf *z)
{
    free(z->p);
    ZSTD_freeDCtx(z->dctx);
    memset(z, 0, sizeof(*z));
}

static int ot_zbuf_reserve(struct ot_zbuf *z, size_t want)
{
    /* Never NULL, even for 0 bytes: callers form p + raw_len, and NULL + 0 is undefined in C. */
    if (z->p && z->cap >= want)
        return 0;
    uint8_t *p = realloc(z->p, want ? want : 1);
    if (!p)
        return -1;
    z->p = p;
    z->cap = want;
    return 0;
}

int ot_zstd_decode(struct ot_zbuf *z, const uint8_t *src, size_t n, uint64_t raw_len, char *why, size_t whylen)
{
    if (raw_len > OT_MAX_SECTION_RAW) {
        snprintf(why, whylen, "raw_len %" PRIu64 " is over the 4 GiB limit", raw_len);
        return -1;
    }
    size_t fsize = ZSTD_findFrameCompressedSize(src, n);
    if (ZSTD_isError(fsize)) {
        snprintf(why, whylen, "bad zstd frame (%s)", ZSTD_getErrorName(fsize));
        return -1;
    }
    if (fsize != n) {
        snprintf(why, whylen, "%zu bytes follow the zstd frame", n - fsize);
        return -1;
    }
    unsigned long long fcs = ZSTD_getFrameContentSize(src, n);
    if (fcs == ZSTD_CONTENTSIZE_ERROR) {
        snprintf(why, whylen, "bad zstd frame header");
        return -1;
    }
    if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != raw_len) {
        snprintf(why, whylen, "zstd frame holds %llu bytes but raw_len is %" PRIu64, fcs, raw_len);
        return -1;
    }
    if (!z->dctx && !(z->dctx = ZSTD_createDCtx())) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    bool eager = raw_len <= OT_ZSTD_EAGER_MAX || raw_len / OT_ZSTD_PLAUSIBLE_RATIO <= n;
    if (eager) {
        if (ot_zbuf_reserve(z, (size_t)raw_len) < 0) {
            snprintf(why, whylen, "out of memory for %" PRIu64 " bytes", raw_len);
            return -1;
        }
        size_t r = ZSTD_decompressDCtx(z->dctx, z->p, (size_t)raw_len, src, n);
        if (ZSTD_isError(r)) {
            snprintf(why, whylen, "zstd frame does not decompress to raw_len %" PRIu64 " bytes (%s)", raw_len,
                     ZSTD_getErrorName(r));
            return -1;
        }
        if (r != raw_len) {
            snprintf(why, whylen, "zstd frame decompresses to %zu bytes but raw_len is %" PRIu64, r, raw_len);
            return -1;
        }
        return 0;
    }
    /* Streaming with a growing buffer: memory follows the bytes really produced. */
    size_t cap = n * (size_t)OT_ZSTD_PLAUSIBLE_RATIO;
    if (cap < OT_ZSTD_EAGER_MAX)
        cap = OT_ZSTD_EAGER_MAX;
    if (ot_zbuf_reserve(z, cap) < 0) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only);
    ZSTD_inBuffer in = {src, n, 0};
    /* The buffer may be larger from an earlier call; never let more than raw_len bytes out. */
    ZSTD_outBuffer out = {z->p, z->cap < raw_len ? z->cap : (size_t)raw_len, 0};
    for (;;) {
        size_t r = ZSTD_decompressStream(z->dctx, &out, &in);
        if (ZSTD_isError(r)) {
            snprintf(why, whylen, "bad zstd frame (%s)", ZSTD_getErrorName(r));
            return -1;
        }
        if (r == 0)
            break;
        if (out.pos == out.size) {
            if (out.size >= raw_len) {
                /* All raw_len bytes are out but the frame has not ended: it may only have its
                 * epilogue (a checksum) left, or it may hold more data than raw_len says. */
                uint8_t extra;
                ZSTD_outBuffer probe = {&extra, 1, 0};
                r = ZSTD_decompressStream(z->dctx, &probe, &in);
                if (!ZSTD_isError(r) && r == 0 && probe.pos == 0)
                    break;
                snprintf(why, whylen, "zstd frame holds more than raw_len %" PRIu64 " bytes", raw_len);
                return -1;
            }
            size_t grow = out.size * 2 < raw_len ? out.size * 2 : (size_t)raw_len;
            if (ot_zbuf_reserve(z, grow) < 0) {
                snprintf(why, whylen, "out of memory");
                return -1;
            }
            out.dst = z->p;
            out.size = grow;
        } else if (in.pos == in.size) {
            snprintf(why, whylen, "truncated zstd frame");
            return -1;
        }
    }
    if (out.pos != raw_len) {
        snprintf(why, whylen, "zstd frame decompresses to %zu bytes but raw_len is %" PRIu64, out.pos, raw_len);
        return -1;
    }
    return 0;
}

/* ---- parse context ---- */

struct pctx {
    struct ot_snapshot *snap;
    uint32_t type;
    uint64_t hdr_off;     /* file offset of the section header */
    bool compressed;
    const uint8_t *payload;
    struct ot_cursor c;
    char *err;
};

static int perr(struct pctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct pctx *x, const char *fmt, ...)
{
    int n = snprintf(x->err, OT_ERRBUF, "section %u (%s) at offset %" PRIu64 ": ", x->type,
                     ot_section_name(x->type), x->hdr_off);
    if (n < 0 || n >= OT_ERRBUF)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err + n, OT_ERRBUF - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static size_t ppos(const struct pctx *x)
{
    return (size_t)(x->c.p - x->payload);
}

static size_t pleft(const struct pctx *x)
{
    return (size_t)(x->c.end - x->c.p);
}

/* The cursor failed inside item `index` of kind `what` (index SIZE_MAX: a field outside any list). */
static int item_err(struct pctx *x, const char *what, size_t index)
{
    char where[64];
    size_t total = (size_t)(x->c.end - x->payload);
    if (x->compressed)
        snprintf(where, sizeof(where), "byte %zu of %zu of the decompressed payload", ppos(x), total);
    else
        snprintf(where, sizeof(where), "byte %zu of %zu of the payload", ppos(x), total);
    const char *how = x->c.p >= x->c.end ? "runs past the end of the payload"
                                         : "has a varint over 10 bytes or a string longer than the payload";
    if (index == SIZE_MAX)
        return perr(x, "%s %s, at %s", what, how, where);
    return perr(x, "%s %zu %s, at %s", what, index, how, where);
}

/* Refuses a count that cannot possibly fit in what is left, before anything is allocated for it. */
static int check_count(struct pctx *x, uint64_t count, size_t min_item_bytes, const char *what)
{
    if (x->c.err) /* a field before the count failed */
        return item_err(x, "a field", SIZE_MAX);
    if (count > pleft(x) / min_item_bytes)
        return perr(x, "%s count %" PRIu64 " cannot fit in the %zu bytes left (each takes at least %zu)", what,
                    count, pleft(x), min_item_bytes);
    return 0;
}

static void *palloc(struct pctx *x, size_t count, size_t size)
{
    void *p = ot_arena_array(&x->snap->arena, count ? count : 1, size);
    if (!p)
        perr(x, "out of memory for %zu items", count);
    return p;
}

#define U() ot_get_uvarint(&x->c)
#define S() ot_get_svarint(&x->c)

static struct ot_str get_str(struct pctx *x)
{
    size_t n;
    const char *p = ot_get_str(&x->c, &n);
    return (struct ot_str){p, n};
}
#define STR() get_str(x)

/* ---- sections ---- */

static int parse_meta(struct pctx *x)
{
    struct ot_meta *m = &x->snap->meta;
    m->tracer_version = STR();
    m->trigger = U();
    m->reason = STR();
    m->pid = U();
    m->ppid = U();
    m->host = STR();
    uint64_t argc = U();
    if (check_count(x, argc, 1, "argv") < 0)
        return -1;
    m->argc = (size_t)argc;
    if (!(m->argv = palloc(x, m->argc, sizeof(*m->argv))))
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
        return item_err(x, "META field", SIZE_MAX);
    return 0;
}

static int parse_devices(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 12, "device") < 0)
        return -1;
    if (!(s->devices = palloc(x, (size_t)count, sizeof(*s->devices))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_device *d = &s->devices[i];
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
            return item_err(x, "device", i);
        if (ncat > pleft(x))
            return perr(x, "device %zu: %" PRIu64 " categories cannot fit in the %zu bytes left", i, ncat, pleft(x));
        d->ncat = (size_t)ncat;
        if (!(d->by_category = palloc(x, d->ncat, sizeof(uint64_t))))
            return -1;
        for (size_t k = 0; k < d->ncat; k++)
            d->by_category[k] = U();
        if (x->c.err)
            return item_err(x, "device", i);
        for (size_t j = 0; j < i; j++)
            if (s->devices[j].ordinal == d->ordinal)
                return perr(x, "device ordinal %" PRId64 " is listed twice", d->ordinal);
        s->ndevices = i + 1;
    }
    return 0;
}

static int parse_failure(struct pctx *x)
{
    struct ot_failure *f = &x->snap->failure;
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
        return item_err(x, "FAILURE field", SIZE_MAX);
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

static int parse_modules(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 5, "module") < 0)
        return -1;
    if (!(s->modules = palloc(x, (size_t)count, sizeof(*s->modules))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_module *m = &s->modules[i];
        m->path = STR();
        m->start = U();
        m->end = U();
        m->load_bias = U();
        m->build_id = STR();
        if (x->c.err)
            return item_err(x, "module", i);
        if (m->end < m->start)
            return perr(x, "module %zu ends (0x%" PRIx64 ") before it starts (0x%" PRIx64 ")", i, m->end, m->start);
    }
    s->nmodules = (size_t)count;
    if (s->nmodules > 1)
        qsort(s->modules, s->nmodules, sizeof(*s->modules), cmp_module);
    return 0;
}

static int parse_symbols(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 3, "symbol") < 0)
        return -1;
    if (!(s->symbols = palloc(x, (size_t)count, sizeof(*s->symbols))))
        return -1;
    if (ot_u64map_init(&s->symbol_index, (size_t)count) < 0)
        return perr(x, "out of memory");
    for (size_t i = 0; i < count; i++) {
        struct ot_symbol *y = &s->symbols[i];
        y->address = U();
        y->name = STR();
        y->offset = U();
        if (x->c.err)
            return item_err(x, "symbol", i);
        /* A repeated address is harmless (the writer resolved it twice): the first one wins. */
        if (ot_u64map_put(&s->symbol_index, y->address, (uint32_t)i) == OT_U64MAP_NONE)
            return perr(x, "out of memory");
    }
    s->nsymbols = (size_t)count;
    return 0;
}

static int parse_pyframes(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 4, "Python frame") < 0)
        return -1;
    if (!(s->pyframes = palloc(x, (size_t)count, sizeof(*s->pyframes))))
        return -1;
    if (ot_u64map_init(&s->pyframe_index, (size_t)count) < 0)
        return perr(x, "out of memory");
    for (size_t i = 0; i < count; i++) {
        struct ot_pyframe *f = &s->pyframes[i];
        f->id = U();
        f->function = STR();
        f->file = STR();
        f->line = U();
        if (x->c.err)
            return item_err(x, "Python frame", i);
        uint32_t got = ot_u64map_put(&s->pyframe_index, f->id, (uint32_t)i);
        if (got == OT_U64MAP_NONE)
            return perr(x, "out of memory");
        if (got != i)
            return perr(x, "Python frame id %" PRIu64 " is listed twice", f->id);
    }
    s->npyframes = (size_t)count;
    return 0;
}

static int parse_stacks(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 3, "stack") < 0)
        return -1;
    if (!(s->stacks = palloc(x, (size_t)count, sizeof(*s->stacks))))
        return -1;
    if (ot_u64map_init(&s->stack_index, (size_t)count) < 0)
        return perr(x, "out of memory");
    for (size_t i = 0; i < count; i++) {
        struct ot_stack *st = &s->stacks[i];
        st->id = U();
        st->flags = U();
        uint64_t nframes = U();
        if (x->c.err)
            return item_err(x, "stack", i);
        if (nframes > pleft(x))
            return perr(x, "stack %zu (id %" PRIu64 "): %" PRIu64 " frames cannot fit in the %zu bytes left", i,
                        st->id, nframes, pleft(x));
        uint64_t *frames = palloc(x, (size_t)nframes, sizeof(uint64_t));
        if (!frames)
            return -1;
        for (size_t k = 0; k < nframes; k++)
            frames[k] = U();
        if (x->c.err)
            return item_err(x, "stack", i);
        st->nframes = (size_t)nframes;
        st->frames = frames;
        uint32_t got = ot_u64map_put(&s->stack_index, st->id, (uint32_t)i);
        if (got == OT_U64MAP_NONE)
            return perr(x, "out of memory");
        if (got != i)
            return perr(x, "stack id %" PRIu64 " is listed twice", st->id);
        s->nstacks = i + 1;
    }
    return 0;
}

#define OT_RECORD_MIN_BYTES 10u

static int parse_records(struct pctx *x, size_t *nout, struct ot_record **out)
{
    uint64_t count = U();
    if (check_count(x, count, OT_RECORD_MIN_BYTES, "record") < 0)
        return -1;
    struct ot_record *r = palloc(x, (size_t)count, sizeof(*r));
    if (!r)
        return -1;
    for (size_t i = 0; i < count; i++) {
        r[i].address = U();
        r[i].size = U();
        r[i].device = S();
        r[i].category = U();
        r[i].api = U();
        r[i].flags = U();
        r[i].stack_id = U();
        r[i].tid = U();
        r[i].time_ns = U();
        r[i].seq = U();
        if (x->c.err)
            return item_err(x, "record", i);
    }
    *nout = (size_t)count;
    *out = r;
    return 0;
}

static int parse_live(struct pctx *x)
{
    if (x->snap->has_live)
        return perr(x, "a second live set (the file has both LIVE and LIVE_SEQ)");
    if (parse_records(x, &x->snap->nlive, &x->snap->live) < 0)
        return -1;
    x->snap->has_live = true;
    return 0;
}

/* LIVE_SEQ: the records of LIVE in seq order, stored column by column: all addresses, then all sizes,
 * and so on in record order. address and time_ns are signed deltas and seq an unsigned delta from the
 * record before (the first from zero). */
static int parse_live_seq(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    if (s->has_live)
        return perr(x, "a second live set (the file has both LIVE and LIVE_SEQ)");
    uint64_t count = U();
    if (check_count(x, count, OT_RECORD_MIN_BYTES, "record") < 0)
        return -1;
    struct ot_record *r = palloc(x, (size_t)count, sizeof(*r));
    if (!r)
        return -1;
    static const char *const column[] = {"address", "size", "device", "category", "api",
                                         "flags", "stack_id", "tid", "time_ns", "seq"};
    for (int c = 0; c < 10; c++) {
        uint64_t acc = 0;
        for (size_t i = 0; i < count; i++) {
            switch (c) {
            case 0: r[i].address = acc += (uint64_t)S(); break;
            case 1: r[i].size = U(); break;
            case 2: r[i].device = S(); break;
            case 3: r[i].category = U(); break;
            case 4: r[i].api = U(); break;
            case 5: r[i].flags = U(); break;
            case 6: r[i].stack_id = U(); break;
            case 7: r[i].tid = U(); break;
            case 8: r[i].time_ns = acc += (uint64_t)S(); break;
            default: {
                uint64_t d = U();
                if (!x->c.err && acc + d < acc)
                    return perr(x, "record %zu: seq overflows 64 bits", i);
                r[i].seq = acc += d;
            }
            }
            if (x->c.err)
                return perr(x, "the %s column ends at record %zu of %" PRIu64 " (byte %zu of the payload)",
                            column[c], i, count, ppos(x));
        }
    }
    s->nlive = (size_t)count;
    s->live = r;
    s->has_live = true;
    return 0;
}

static int add_peak(struct pctx *x, const struct ot_peak *p)
{
    struct ot_snapshot *s = x->snap;
    for (size_t i = 0; i < s->npeaks; i++)
        if (s->peaks[i].device == p->device)
            return perr(x, "a second peak for device %" PRId64, p->device);
    /* Peaks are few (one per device); a fresh array per section keeps the arena simple. */
    struct ot_peak *np = palloc(x, s->npeaks + 1, sizeof(*np));
    if (!np)
        return -1;
    if (s->npeaks)
        memcpy(np, s->peaks, s->npeaks * sizeof(*np));
    np[s->npeaks++] = *p;
    s->peaks = np;
    return 0;
}

static int parse_peak_head(struct pctx *x, struct ot_peak *p)
{
    p->device = S();
    p->peak_bytes = U();
    p->peak_time_ns = U();
    p->peak_seq = U();
    if (x->c.err)
        return item_err(x, "PEAK field", SIZE_MAX);
    return 0;
}

static int parse_peak(struct pctx *x)
{
    struct ot_peak p = {0};
    if (parse_peak_head(x, &p) < 0 || parse_records(x, &p.count, &p.recs) < 0)
        return -1;
    return add_peak(x, &p);
}

/* PEAK_REF: resolved once the live set is known (ot_snapshot_parse, resolve_peak_refs). */
static int parse_peak_ref(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    struct ot_peak_ref r = {.hdr_off = x->hdr_off};
    if (parse_peak_head(x, &r.peak) < 0)
        return -1;
    r.count = U();
    r.peak.lost = U();
    if (x->c.err)
        return item_err(x, "PEAK_REF field", SIZE_MAX);
    if (parse_records(x, &r.peak.count, &r.peak.recs) < 0)
        return -1;
    if (r.peak.count > r.count)
        return perr(x, "%zu records freed since the peak, more than the %" PRIu64 " of the peak set",
                    r.peak.count, r.count);
    struct ot_peak_ref *n = palloc(x, s->npeak_refs + 1, sizeof(*n));
    if (!n)
        return -1;
    if (s->npeak_refs)
        memcpy(n, s->peak_refs, s->npeak_refs * sizeof(*n));
    n[s->npeak_refs++] = r;
    s->peak_refs = n;
    return 0;
}

static bool shared_with_peak(const struct ot_record *l, const struct ot_peak *p)
{
    return l->device == p->device && l->category >= OT_CAT_DEVICE && l->category <= OT_CAT_ARRAY &&
           l->seq <= p->peak_seq;
}

/* The peak set of a PEAK_REF: the live records on its device, in device categories, made at or before
 * the peak (seq <= peak_seq), then the retained ones. Their number must be the one the writer counted. */
static int resolve_peak_refs(struct ot_snapshot *s, char *errbuf)
{
    for (size_t k = 0; k < s->npeak_refs; k++) {
        struct ot_peak_ref *r = &s->peak_refs[k];
        struct pctx x = {.snap = s, .type = OT_SEC_PEAK_REF, .hdr_off = r->hdr_off, .err = errbuf};
        if (!s->has_live)
            return perr(&x, "refers to the live set, but the file has no LIVE or LIVE_SEQ section");
        uint64_t shared = 0;
        for (size_t i = 0; i < s->nlive; i++)
            shared += shared_with_peak(&s->live[i], &r->peak);
        if (shared + r->peak.count != r->count)
            return perr(&x, "device %" PRId64 ": the live set gives %" PRIu64 " records at the peak and %zu were"
                        " freed since, but the section counts %" PRIu64, r->peak.device, shared, r->peak.count,
                        r->count);
        struct ot_peak p = r->peak;
        p.count = (size_t)r->count;
        p.recs = palloc(&x, p.count, sizeof(*p.recs));
        if (!p.recs)
            return -1;
        size_t j = 0;
        for (size_t i = 0; i < s->nlive; i++)
            if (shared_with_peak(&s->live[i], &r->peak))
                p.recs[j++] = s->live[i];
        memcpy(p.recs + j, r->peak.recs, r->peak.count * sizeof(*p.recs));
        if (add_peak(&x, &p) < 0)
            return -1;
    }
    s->npeak_refs = 0;
    s->peak_refs = NULL;
    return 0;
}

/* Smallest encoded event: nine one-byte varints (kind, api, category, device, dt, tid, addr, size,
 * stack). A chunk claiming more events than raw_len / 9 is refused before anything is decoded. */
#define OT_EVENT_MIN_BYTES 9u

static int parse_events(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 5, "chunk") < 0)
        return -1;
    if (!(s->chunks = palloc(x, (size_t)count, sizeof(*s->chunks))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_chunk *ch = &s->chunks[i];
        ch->first_seq = U();
        ch->nevents = U();
        ch->t0_ns = U();
        ch->raw_len = U();
        struct ot_str f = STR();
        if (x->c.err)
            return item_err(x, "chunk", i);
        if (ch->raw_len > OT_MAX_SECTION_RAW)
            return perr(x, "chunk %zu: raw_len %" PRIu64 " is over the 4 GiB limit", i, ch->raw_len);
        if (ch->nevents > ch->raw_len / OT_EVENT_MIN_BYTES)
            return perr(x, "chunk %zu: %" PRIu64 " events cannot fit in raw_len %" PRIu64 " bytes", i, ch->nevents,
                        ch->raw_len);
        ch->frame = (const uint8_t *)f.p;
        ch->frame_len = f.n;
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
    const struct ot_marker *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

static int parse_markers(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 4, "marker") < 0)
        return -1;
    if (!(s->markers = palloc(x, (size_t)count, sizeof(*s->markers))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_marker *m = &s->markers[i];
        m->seq = U();
        m->time_ns = U();
        m->tid = U();
        m->label = STR();
        if (x->c.err)
            return item_err(x, "marker", i);
    }
    s->nmarkers = (size_t)count;
    /* "Before the peak" is a seq comparison, so keep them in seq order whatever order they came in. */
    if (s->nmarkers > 1)
        qsort(s->markers, s->nmarkers, sizeof(*s->markers), cmp_marker);
    return 0;
}

static int parse_pools(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 5, "pool") < 0)
        return -1;
    if (!(s->pools = palloc(x, (size_t)count, sizeof(*s->pools))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_pool *p = &s->pools[i];
        p->handle = U();
        p->device = S();
        p->flags = U();
        p->reserved_bytes = U();
        p->used_bytes = U();
        if (x->c.err)
            return item_err(x, "pool", i);
    }
    s->npools = (size_t)count;
    return 0;
}

static int parse_mappings(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 4, "mapping") < 0)
        return -1;
    if (!(s->mappings = palloc(x, (size_t)count, sizeof(*s->mappings))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_mapping *m = &s->mappings[i];
        m->address = U();
        m->size = U();
        m->handle = U();
        m->offset = U();
        if (x->c.err)
            return item_err(x, "mapping", i);
    }
    s->nmappings = (size_t)count;
    return 0;
}

static int parse_processes(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    s->processes_source = U();
    s->processes_note = STR();
    uint64_t count = U();
    if (check_count(x, count, 4, "process") < 0)
        return -1;
    if (!(s->processes = palloc(x, (size_t)count, sizeof(*s->processes))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        struct ot_process *p = &s->processes[i];
        p->device = S();
        p->pid = U();
        p->used_bytes = U();
        p->name = STR();
        if (x->c.err)
            return item_err(x, "process", i);
    }
    s->nprocesses = (size_t)count;
    s->has_processes = true;
    return 0;
}

static int parse_threads(struct pctx *x)
{
    struct ot_snapshot *s = x->snap;
    uint64_t count = U();
    if (check_count(x, count, 2, "thread") < 0)
        return -1;
    if (!(s->threads = palloc(x, (size_t)count, sizeof(*s->threads))))
        return -1;
    for (size_t i = 0; i < count; i++) {
        s->threads[i].tid = U();
        s->threads[i].name = STR();
        if (x->c.err)
            return item_err(x, "thread", i);
    }
    s->nthreads = (size_t)count;
    return 0;
}

typedef int (*ot_section_parser)(struct pctx *);

static const ot_section_parser section_parsers[] = {
    [OT_SEC_META] = parse_meta,         [OT_SEC_DEVICES] = parse_devices,   [OT_SEC_FAILURE] = parse_failure,
    [OT_SEC_MODULES] = parse_modules,   [OT_SEC_SYMBOLS] = parse_symbols,   [OT_SEC_PYFRAMES] = parse_pyframes,
    [OT_SEC_STACKS] = parse_stacks,     [OT_SEC_LIVE] = parse_live,         [OT_SEC_PEAK] = parse_peak,
    [OT_SEC_EVENTS] = parse_events,     [OT_SEC_MARKERS] = parse_markers,   [OT_SEC_POOLS] = parse_pools,
    [OT_SEC_MAPPINGS] = parse_mappings, [OT_SEC_PROCESSES] = parse_processes, [OT_SEC_THREADS] = parse_threads,
    [OT_SEC_LIVE_SEQ] = parse_live_seq, [OT_SEC_PEAK_REF] = parse_peak_ref,
};
#define OT_NPARSERS (sizeof(section_parsers) / sizeof(section_parsers[0]))

/* ---- file ---- */

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int parse_section(struct ot_snapshot *s, const uint8_t *hdr, const uint8_t *payload, uint64_t off,
                         struct ot_zbuf *z, char *errbuf)
{
    struct pctx x = {.snap = s, .type = le32(hdr), .hdr_off = off, .err = errbuf};
    uint32_t flags = le32(hdr + 4);
    uint64_t stored_len = le64(hdr + 8), raw_len = le64(hdr + 16);

    if (flags & ~OT_SECTION_ZSTD)
        return perr(&x, "unknown section flags 0x%x", flags);
    if (x.type != OT_SEC_PEAK && x.type != OT_SEC_PEAK_REF && x.type < 32 && (s->seen & (1u << x.type)))
        return perr(&x, "appears twice; the format allows one");
    size_t plen;
    if (flags & OT_SECTION_ZSTD) {
        char why[160];
        if (ot_zstd_decode(z, payload, (size_t)stored_len, raw_len, why, sizeof(why)) < 0)
            return perr(&x, "%s", why);
        /* The decompressed payload becomes part of the model: strings point into it. */
        uint8_t *owned = z->p;
        if (ot_arena_adopt(&s->arena, owned) < 0)
            return perr(&x, "out of memory");
        z->p = NULL;
        z->cap = 0;
        payload = owned;
        plen = (size_t)raw_len;
        x.compressed = true;
    } else {
        if (raw_len != stored_len)
            return perr(&x, "raw_len %" PRIu64 " differs from stored_len %" PRIu64 " in an uncompressed section",
                        raw_len, stored_len);
        plen = (size_t)stored_len;
    }
    x.payload = payload;
    x.c = (struct ot_cursor){payload, payload + plen, 0};
    s->seen |= 1u << x.type;
    /* Bytes after the fields this reader knows are a later minor version's additions: ignored. */
    return section_parsers[x.type](&x);
}

int ot_snapshot_parse(const uint8_t *buf, size_t len, struct ot_snapshot *snap, char errbuf[OT_ERRBUF])
{
    memset(snap, 0, sizeof(*snap));
    errbuf[0] = 0;
    if (len < OT_FILE_HEADER_SIZE) {
        snprintf(errbuf, OT_ERRBUF, "truncated file header: %zu bytes, a snapshot starts with 32", len);
        return -1;
    }
    if (memcmp(buf, OT_MAGIC, 8) != 0) {
        snprintf(errbuf, OT_ERRBUF, "not an oomtrace snapshot (bad magic)");
        return -1;
    }
    snap->version_major = le16(buf + 8);
    snap->version_minor = le16(buf + 10);
    snap->file_flags = le32(buf + 12);
    if (snap->version_major != OT_VERSION_MAJOR) {
        snprintf(errbuf, OT_ERRBUF, "unsupported format version %u.%u (this reader reads %u.x)",
                 snap->version_major, snap->version_minor, OT_VERSION_MAJOR);
        return -1;
    }

    struct ot_zbuf z = {0};
    uint64_t off = OT_FILE_HEADER_SIZE;
    int rc = 0;
    while (off < len) {
        if (len - off < OT_SECTION_HEADER_SIZE) {
            snprintf(errbuf, OT_ERRBUF,
                     "truncated section header at offset %" PRIu64 ": %" PRIu64 " bytes left, a header takes 24",
                     off, (uint64_t)len - off);
            rc = -1;
            break;
        }
        const uint8_t *hdr = buf + off;
        uint32_t type = le32(hdr);
        uint64_t stored_len = le64(hdr + 8), raw_len = le64(hdr + 16);
        uint64_t payload_off = off + OT_SECTION_HEADER_SIZE;
        if (stored_len > len - payload_off) {
            snprintf(errbuf, OT_ERRBUF,
                     "section %u (%s) at offset %" PRIu64 " runs past end of file: payload of %" PRIu64
                     " bytes, %" PRIu64 " left",
                     type, ot_section_name(type), off, stored_len, (uint64_t)len - payload_off);
            rc = -1;
            break;
        }
        if (raw_len > OT_MAX_SECTION_RAW) {
            snprintf(errbuf, OT_ERRBUF, "section %u (%s) at offset %" PRIu64 ": raw_len %" PRIu64
                     " is over the 4 GiB limit", type, ot_section_name(type), off, raw_len);
            rc = -1;
            break;
        }
        snap->nsections++;
        if (type >= OT_NPARSERS || !section_parsers[type]) {
            snap->nunknown_sections++;
        } else if (parse_section(snap, hdr, buf + payload_off, off, &z, errbuf) < 0) {
            rc = -1;
            break;
        }
        off = payload_off + stored_len;
    }
    ot_zbuf_free(&z);
    if (rc == 0 && resolve_peak_refs(snap, errbuf) < 0)
        rc = -1;
    if (rc == 0 && !(snap->seen & (1u << OT_SEC_META))) {
        snprintf(errbuf, OT_ERRBUF, "no META section (%zu sections read)", snap->nsections);
        rc = -1;
    }
    if (rc < 0) {
        ot_snapshot_free(snap);
        return -1;
    }
    return 0;
}

void ot_snapshot_free(struct ot_snapshot *snap)
{
    ot_u64map_free(&snap->stack_index);
    ot_u64map_free(&snap->pyframe_index);
    ot_u64map_free(&snap->symbol_index);
    ot_arena_free(&snap->arena);
    memset(snap, 0, sizeof(*snap));
}

/* ---- lookups ---- */

const struct ot_stack *ot_snapshot_stack(const struct ot_snapshot *s, uint64_t id)
{
    uint32_t i = ot_u64map_get(&s->stack_index, id);
    return i == OT_U64MAP_NONE ? NULL : &s->stacks[i];
}

const struct ot_pyframe *ot_snapshot_pyframe(const struct ot_snapshot *s, uint64_t id)
{
    uint32_t i = ot_u64map_get(&s->pyframe_index, id);
    return i == OT_U64MAP_NONE ? NULL : &s->pyframes[i];
}

const struct ot_symbol *ot_snapshot_symbol(const struct ot_snapshot *s, uint64_t address)
{
    uint32_t i = ot_u64map_get(&s->symbol_index, address);
    return i == OT_U64MAP_NONE ? NULL : &s->symbols[i];
}

const struct ot_module *ot_snapshot_module(const struct ot_snapshot *s, uint64_t address)
{
    /* Last module starting at or below the address; modules may overlap in a hostile file, in which
     * case the answer is one of them, which is all a reader can do. */
    size_t lo = 0, hi = s->nmodules;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->modules[mid].start <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct ot_module *m = &s->modules[lo - 1];
    return address < m->end ? m : NULL;
}

const struct ot_device *ot_snapshot_device(const struct ot_snapshot *s, int64_t ordinal)
{
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].ordinal == ordinal)
            return &s->devices[i];
    return NULL;
}

const struct ot_peak *ot_snapshot_peak(const struct ot_snapshot *s, int64_t device)
{
    for (size_t i = 0; i < s->npeaks; i++)
        if (s->peaks[i].device == device)
            return &s->peaks[i];
    return NULL;
}
