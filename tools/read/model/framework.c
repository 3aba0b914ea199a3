/* Framework view and probes: payload bytes -> struct ot_framework / ot_probes. See framework.h.
 *
 * Two passes over the records: the first checks each record's envelope and counts its items (each
 * count bounded by the bytes of its body), so the flat arrays are allocated once; the second fills
 * them. Cross-record indexes (segment -> blocks, block -> segment, frames -> block) are resolved last,
 * against the records of the same framework. */
#include "model/framework.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

/* Frameworks in one process are few; more records of one kind than this is a hostile file, and the
 * bound keeps matching records by framework name linear. */
#define OT_FW_MAX_TABLE_RECORDS 16

struct fctx {
    struct ot_arena *a;
    struct ot_cursor c;
    char *why;
    size_t whylen;
    size_t rec;     /* record being read */
    uint64_t kind;
};

static int ferr(struct fctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ferr(struct fctx *x, const char *fmt, ...)
{
    int n = snprintf(x->why, x->whylen, "record %zu (%s): ", x->rec, ot_fw_kind_name(x->kind));
    if (n < 0 || (size_t)n >= x->whylen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->why + n, x->whylen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static size_t left(const struct fctx *x)
{
    return (size_t)(x->c.end - x->c.p);
}

static uint64_t fu(struct fctx *x)
{
    return ot_get_uvarint(&x->c);
}

static struct ot_str fstr(struct fctx *x)
{
    size_t n;
    const char *p = ot_get_str(&x->c, &n);
    return (struct ot_str){p, n};
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A count of items of at least min bytes each, refused when the body cannot hold them. */
static int count_ok(struct fctx *x, uint64_t n, size_t min, const char *what)
{
    if (x->c.err)
        return ferr(x, "runs past the end of its body before the %s count", what);
    if (n > left(x) / min)
        return ferr(x, "%" PRIu64 " %s cannot fit in the %zu bytes left (each takes at least %zu)", n, what,
                    left(x), min);
    return 0;
}

static void *alloc(struct fctx *x, size_t count, size_t size)
{
    void *p = ot_arena_array(x->a, count ? count : 1, size);
    if (!p)
        ferr(x, "out of memory for %zu items", count);
    return p;
}

/* Column widths: SEGMENTS 10 u64 columns, BLOCKS 5, ROLES 3. */
#define SEG_COLS 10
#define BLK_COLS 5
#define ROLE_COLS 3

/* Pass 1 for one body: how many flat items it adds to its kind's array. The cursor covers the body. */
static int count_items(struct fctx *x, uint64_t *items)
{
    *items = 0;
    switch (x->kind) {
    case OT_FW_INFO:
    case OT_FW_STATS:
    case OT_FW_SETTINGS:
    case OT_FW_ERROR:
        *items = 1;
        return 0;
    case OT_FW_SEGMENTS:
    case OT_FW_BLOCKS: {
        fstr(x);
        uint64_t n = fu(x);
        size_t w = (x->kind == OT_FW_SEGMENTS ? SEG_COLS : BLK_COLS) * 8;
        if (count_ok(x, n, w, x->kind == OT_FW_SEGMENTS ? "segments" : "blocks") < 0)
            return -1;
        *items = n;
        return 0;
    }
    case OT_FW_ARRAYS:
    case OT_FW_STEPS:
    case OT_FW_BLOCK_FRAMES: {
        fstr(x);
        uint64_t n = fu(x);
        size_t min = x->kind == OT_FW_ARRAYS ? 5 : x->kind == OT_FW_STEPS ? 5 : 2;
        if (count_ok(x, n, min, "items") < 0)
            return -1;
        *items = n;
        return 0;
    }
    case OT_FW_ROLES: {
        fstr(x);
        uint64_t nl = fu(x);
        if (count_ok(x, nl, 2, "labels") < 0)
            return -1;
        for (uint64_t i = 0; i < nl; i++) {
            fu(x);
            fstr(x);
        }
        uint64_t n = fu(x);
        if (count_ok(x, n, ROLE_COLS * 8, "role entries") < 0)
            return -1;
        *items = n;
        return 0;
    }
    default:
        return 0;
    }
}

/* Records of a table kind (SEGMENTS, BLOCKS, BLOCK_FRAMES) and where their items start in the flat array. */
struct table_rec {
    struct ot_str framework;
    size_t base, n;
    size_t rec; /* its record number, for messages */
};

struct tables {
    struct table_rec seg[OT_FW_MAX_TABLE_RECORDS], blk[OT_FW_MAX_TABLE_RECORDS];
    size_t nseg, nblk;
};

static int add_table(struct fctx *x, struct table_rec *t, size_t *nt, struct ot_str fw, size_t base, size_t n)
{
    for (size_t i = 0; i < *nt; i++)
        if (t[i].framework.n == fw.n && memcmp(t[i].framework.p, fw.p, fw.n) == 0)
            return ferr(x, "a second %s record for the same framework", ot_fw_kind_name(x->kind));
    if (*nt == OT_FW_MAX_TABLE_RECORDS)
        return ferr(x, "more than %d %s records", OT_FW_MAX_TABLE_RECORDS, ot_fw_kind_name(x->kind));
    t[(*nt)++] = (struct table_rec){fw, base, n, x->rec};
    return 0;
}

static const struct table_rec *find_table(const struct table_rec *t, size_t nt, struct ot_str fw)
{
    for (size_t i = 0; i < nt; i++)
        if (t[i].framework.n == fw.n && memcmp(t[i].framework.p, fw.p, fw.n) == 0)
            return &t[i];
    return NULL;
}

/* A block-frames entry waiting for its block (blocks may come after frames in the payload). */
struct pending_frames {
    size_t rec;
    struct ot_str framework;
    uint64_t block;
    size_t nframes;
    struct ot_fw_frame *frames;
};

static int body_end(struct fctx *x)
{
    if (x->c.err)
        return ferr(x, "runs past the end of its body (or has a varint over 10 bytes)");
    if (left(x))
        return ferr(x, "%zu bytes of its body are left after its fields", left(x));
    return 0;
}

static void read_cols(struct fctx *x, uint64_t n, int ncols, uint64_t *out /* ncols x n */)
{
    for (int c = 0; c < ncols; c++)
        for (uint64_t i = 0; i < n; i++)
            out[(size_t)c * n + i] = le64(x->c.p + ((size_t)c * n + i) * 8);
    x->c.p += (size_t)ncols * n * 8;
}

static int parse_body(struct fctx *x, struct ot_framework *f, struct tables *t, struct pending_frames *pf,
                      size_t *npf)
{
    switch (x->kind) {
    case OT_FW_INFO: {
        struct ot_fw_info *i = &f->info[f->ninfo];
        i->framework = fstr(x);
        i->version = fstr(x);
        i->reason = fstr(x);
        i->taken_ns = fu(x);
        i->collect_ns = fu(x);
        if (body_end(x) < 0)
            return -1;
        f->ninfo++;
        return 0;
    }
    case OT_FW_STATS: {
        struct ot_fw_stats *s = &f->stats[f->nstats];
        s->framework = fstr(x);
        s->device = fu(x);
        uint64_t n = fu(x);
        if (count_ok(x, n, 2, "counters") < 0 || !(s->v = alloc(x, (size_t)n, sizeof(*s->v))))
            return -1;
        for (size_t i = 0; i < n; i++) {
            s->v[i].key = fstr(x);
            s->v[i].value = ot_get_svarint(&x->c);
        }
        s->n = (size_t)n;
        if (body_end(x) < 0)
            return -1;
        f->nstats++;
        return 0;
    }
    case OT_FW_SETTINGS: {
        struct ot_fw_settings *s = &f->settings[f->nsettings];
        s->framework = fstr(x);
        uint64_t n = fu(x);
        if (count_ok(x, n, 2, "settings") < 0 || !(s->v = alloc(x, (size_t)n, sizeof(*s->v))))
            return -1;
        for (size_t i = 0; i < n; i++) {
            s->v[i].key = fstr(x);
            s->v[i].value = fstr(x);
        }
        s->n = (size_t)n;
        if (body_end(x) < 0)
            return -1;
        f->nsettings++;
        return 0;
    }
    case OT_FW_SEGMENTS: {
        struct ot_str fw = fstr(x);
        uint64_t n = fu(x);
        if (count_ok(x, n, SEG_COLS * 8, "segments") < 0)
            return -1;
        uint64_t *col = alloc(x, (size_t)n * SEG_COLS, sizeof(uint64_t));
        if (!col)
            return -1;
        read_cols(x, n, SEG_COLS, col);
        if (body_end(x) < 0 || add_table(x, t->seg, &t->nseg, fw, f->nsegments, (size_t)n) < 0)
            return -1;
        for (size_t i = 0; i < n; i++) {
            struct ot_fw_segment *s = &f->segments[f->nsegments + i];
            s->framework = fw;
            s->device = col[0 * n + i];
            s->address = col[1 * n + i];
            s->total_size = col[2 * n + i];
            s->allocated_size = col[3 * n + i];
            s->requested_size = col[4 * n + i];
            s->stream = col[5 * n + i];
            s->pool_id = col[6 * n + i];
            s->flags = col[7 * n + i];
            uint64_t fb = col[8 * n + i], nb = col[9 * n + i];
            if (s->address + s->total_size < s->address)
                return ferr(x, "segment %zu: address 0x%" PRIx64 " + size %" PRIu64 " wraps", i, s->address,
                            s->total_size);
            if (s->allocated_size > s->total_size)
                return ferr(x, "segment %zu: %" PRIu64 " bytes allocated of %" PRIu64, i, s->allocated_size,
                            s->total_size);
            if (fb + nb < fb)
                return ferr(x, "segment %zu: block range wraps", i);
            /* Checked against the blocks once every record is read; kept relative until then. */
            s->first_block = (size_t)(fb > SIZE_MAX ? SIZE_MAX : fb);
            s->nblocks = (size_t)(nb > SIZE_MAX ? SIZE_MAX : nb);
        }
        f->nsegments += (size_t)n;
        return 0;
    }
    case OT_FW_BLOCKS: {
        struct ot_str fw = fstr(x);
        uint64_t n = fu(x);
        if (count_ok(x, n, BLK_COLS * 8, "blocks") < 0)
            return -1;
        uint64_t *col = alloc(x, (size_t)n * BLK_COLS, sizeof(uint64_t));
        if (!col)
            return -1;
        read_cols(x, n, BLK_COLS, col);
        if (body_end(x) < 0 || add_table(x, t->blk, &t->nblk, fw, f->nblocks, (size_t)n) < 0)
            return -1;
        for (size_t i = 0; i < n; i++) {
            struct ot_fw_block *b = &f->blocks[f->nblocks + i];
            b->address = col[0 * n + i];
            b->size = col[1 * n + i];
            b->requested_size = col[2 * n + i];
            b->state = col[3 * n + i];
            uint64_t seg = col[4 * n + i];
            if (b->state > OT_FW_BLOCK_PENDING_FREE)
                return ferr(x, "block %zu: state %" PRIu64 " is not 0, 1 or 2", i, b->state);
            /* A free block's requested size is stale (torch 2.11 keeps the last tensor's): only an
             * allocated block's must fit. */
            if (b->state != OT_FW_BLOCK_INACTIVE && b->requested_size > b->size)
                return ferr(x, "block %zu: %" PRIu64 " bytes requested in a block of %" PRIu64, i,
                            b->requested_size, b->size);
            b->segment = (size_t)(seg > SIZE_MAX ? SIZE_MAX : seg);
        }
        f->nblocks += (size_t)n;
        return 0;
    }
    case OT_FW_ARRAYS: {
        struct ot_str fw = fstr(x);
        uint64_t n = fu(x);
        if (count_ok(x, n, 5, "array groups") < 0)
            return -1;
        for (size_t i = 0; i < n; i++) {
            struct ot_fw_array *r = &f->arrays[f->narrays + i];
            r->framework = fw;
            r->dtype = fstr(x);
            r->shape = fstr(x);
            r->device = fu(x);
            r->count = fu(x);
            r->bytes = fu(x);
        }
        if (body_end(x) < 0)
            return -1;
        f->narrays += (size_t)n;
        return 0;
    }
    case OT_FW_ERROR: {
        struct ot_fw_error *e = &f->errors[f->nerrors];
        e->framework = fstr(x);
        e->text = fstr(x);
        e->device = fu(x);
        e->request_bytes = fu(x);
        if (body_end(x) < 0)
            return -1;
        f->nerrors++;
        return 0;
    }
    case OT_FW_BLOCK_FRAMES: {
        struct ot_str fw = fstr(x);
        uint64_t n = fu(x);
        if (count_ok(x, n, 2, "block stacks") < 0)
            return -1;
        for (size_t i = 0; i < n; i++) {
            struct pending_frames *p = &pf[(*npf)++];
            p->rec = x->rec;
            p->framework = fw;
            p->block = fu(x);
            uint64_t nf = fu(x);
            if (count_ok(x, nf, 3, "frames") < 0 || !(p->frames = alloc(x, (size_t)nf, sizeof(*p->frames))))
                return -1;
            for (size_t k = 0; k < nf; k++) {
                p->frames[k].filename = fstr(x);
                p->frames[k].line = fu(x);
                p->frames[k].name = fstr(x);
            }
            p->nframes = (size_t)nf;
        }
        return body_end(x);
    }
    case OT_FW_ROLES: {
        struct ot_str fw = fstr(x);
        uint64_t nl = fu(x);
        if (count_ok(x, nl, 2, "labels") < 0)
            return -1;
        uint64_t *cat = alloc(x, (size_t)nl, sizeof(uint64_t));
        struct ot_str *lab = cat ? alloc(x, (size_t)nl, sizeof(struct ot_str)) : NULL;
        if (!lab)
            return -1;
        for (size_t i = 0; i < nl; i++) {
            cat[i] = fu(x);
            lab[i] = fstr(x);
        }
        uint64_t n = fu(x);
        if (count_ok(x, n, ROLE_COLS * 8, "role entries") < 0)
            return -1;
        uint64_t *col = alloc(x, (size_t)n * ROLE_COLS, sizeof(uint64_t));
        if (!col)
            return -1;
        read_cols(x, n, ROLE_COLS, col);
        if (body_end(x) < 0)
            return -1;
        for (size_t i = 0; i < n; i++) {
            struct ot_fw_role *r = &f->roles[f->nroles + i];
            uint64_t l = col[2 * n + i];
            if (l >= nl)
                return ferr(x, "entry %zu: label %" PRIu64 " of %" PRIu64, i, l, nl);
            r->framework = fw;
            r->address = col[0 * n + i];
            r->bytes = col[1 * n + i];
            r->category = cat[l];
            r->label = lab[l];
        }
        f->nroles += (size_t)n;
        if (ot_str_eq(fw, "torch"))
            f->torch_roles_records++;
        return 0;
    }
    case OT_FW_STEPS: {
        struct ot_str fw = fstr(x);
        uint64_t n = fu(x);
        if (count_ok(x, n, 5, "steps") < 0)
            return -1;
        for (size_t i = 0; i < n; i++) {
            struct ot_fw_step *s = &f->steps[f->nsteps + i];
            s->framework = fw;
            s->step = fu(x);
            s->t_ns = fu(x);
            s->allocated_bytes = fu(x);
            s->reserved_bytes = fu(x);
            s->input_shapes = fstr(x);
        }
        if (body_end(x) < 0)
            return -1;
        f->nsteps += (size_t)n;
        return 0;
    }
    default:
        f->nunknown_records++;
        return 0;
    }
}

/* Segments and blocks of one framework point at each other; make the indexes flat and check both ways. */
static int link_tables(struct fctx *x, struct ot_framework *f, const struct tables *t)
{
    x->kind = OT_FW_SEGMENTS;
    for (size_t r = 0; r < t->nseg; r++) {
        const struct table_rec *sr = &t->seg[r];
        const struct table_rec *br = find_table(t->blk, t->nblk, sr->framework);
        x->rec = sr->rec;
        size_t nb = br ? br->n : 0;
        for (size_t i = 0; i < sr->n; i++) {
            struct ot_fw_segment *s = &f->segments[sr->base + i];
            if (s->first_block > nb || s->nblocks > nb - s->first_block)
                return ferr(x, "segment %zu: blocks %zu..+%zu, but the framework lists %zu blocks", i,
                            s->first_block, s->nblocks, nb);
            s->first_block += br ? br->base : 0;
            for (size_t k = s->first_block; k < s->first_block + s->nblocks; k++) {
                const struct ot_fw_block *b = &f->blocks[k];
                if (b->segment != i)
                    return ferr(x, "segment %zu lists block %zu, which names segment %zu", i, k - br->base,
                                b->segment);
                if (b->address < s->address || b->size > s->total_size ||
                    b->address - s->address > s->total_size - b->size)
                    return ferr(x, "segment %zu: block %zu (0x%" PRIx64 ", %" PRIu64 " bytes) lies outside it", i,
                                k - br->base, b->address, b->size);
            }
        }
    }
    x->kind = OT_FW_BLOCKS;
    for (size_t r = 0; r < t->nblk; r++) {
        const struct table_rec *br = &t->blk[r];
        const struct table_rec *sr = find_table(t->seg, t->nseg, br->framework);
        x->rec = br->rec;
        size_t ns = sr ? sr->n : 0;
        for (size_t i = 0; i < br->n; i++) {
            struct ot_fw_block *b = &f->blocks[br->base + i];
            if (b->segment >= ns)
                return ferr(x, "block %zu: segment %zu, but the framework lists %zu segments", i, b->segment, ns);
            b->segment += sr->base;
        }
    }
    return 0;
}

int ot_framework_parse(struct ot_arena *a, const uint8_t *p, size_t len, struct ot_framework *out, char *why,
                       size_t whylen)
{
    memset(out, 0, sizeof(*out));
    struct fctx x = {.a = a, .c = {p, p + len, 0}, .why = why, .whylen = whylen};
    out->layout_version = fu(&x);
    uint64_t nrec = fu(&x);
    if (x.c.err) {
        snprintf(why, whylen, "the header runs past the end of the payload");
        return -1;
    }
    if (out->layout_version != OT_FW_LAYOUT_VERSION) {
        snprintf(why, whylen, "layout version %" PRIu64 " (this reader reads %d)", out->layout_version, OT_FW_LAYOUT_VERSION);
        return -1;
    }
    if (nrec > left(&x) / 2) {
        snprintf(why, whylen, "%" PRIu64 " records cannot fit in the %zu bytes left", nrec, left(&x));
        return -1;
    }
    /* Pass 1: envelopes and counts. */
    uint64_t cnt[OT_FW_STEPS + 1] = {0};
    const uint8_t *start = x.c.p;
    for (x.rec = 0; x.rec < nrec; x.rec++) {
        x.kind = fu(&x);
        uint64_t blen = fu(&x);
        if (x.c.err || blen > left(&x)) {
            x.c.err = 0;
            return ferr(&x, "its body runs past the end of the payload");
        }
        struct ot_cursor whole = x.c;
        x.c.end = x.c.p + blen;
        uint64_t items;
        if (count_items(&x, &items) < 0)
            return -1;
        if (x.kind <= OT_FW_STEPS)
            cnt[x.kind] += items; /* each at most body bytes, so the sums stay below len */
        x.c = whole;
        x.c.p += blen;
    }
    if (left(&x)) {
        snprintf(why, whylen, "%zu bytes follow the last of %" PRIu64 " records", left(&x), nrec);
        return -1;
    }
    if (!(out->info = alloc(&x, cnt[OT_FW_INFO], sizeof(*out->info))) ||
        !(out->stats = alloc(&x, cnt[OT_FW_STATS], sizeof(*out->stats))) ||
        !(out->settings = alloc(&x, cnt[OT_FW_SETTINGS], sizeof(*out->settings))) ||
        !(out->segments = alloc(&x, cnt[OT_FW_SEGMENTS], sizeof(*out->segments))) ||
        !(out->blocks = alloc(&x, cnt[OT_FW_BLOCKS], sizeof(*out->blocks))) ||
        !(out->arrays = alloc(&x, cnt[OT_FW_ARRAYS], sizeof(*out->arrays))) ||
        !(out->errors = alloc(&x, cnt[OT_FW_ERROR], sizeof(*out->errors))) ||
        !(out->roles = alloc(&x, cnt[OT_FW_ROLES], sizeof(*out->roles))) ||
        !(out->steps = alloc(&x, cnt[OT_FW_STEPS], sizeof(*out->steps))))
        return -1;
    struct pending_frames *pf = alloc(&x, cnt[OT_FW_BLOCK_FRAMES], sizeof(*pf));
    if (!pf)
        return -1;
    size_t npf = 0;
    static struct tables zero;
    struct tables t = zero;

    /* Pass 2: the bodies. */
    x.c = (struct ot_cursor){start, p + len, 0};
    for (x.rec = 0; x.rec < nrec; x.rec++) {
        x.kind = fu(&x);
        uint64_t blen = fu(&x);
        struct ot_cursor whole = x.c;
        x.c.end = x.c.p + blen;
        if (parse_body(&x, out, &t, pf, &npf) < 0)
            return -1;
        x.c = whole;
        x.c.p += blen;
    }
    out->nrecords = (size_t)nrec;
    if (link_tables(&x, out, &t) < 0)
        return -1;
    x.kind = OT_FW_BLOCK_FRAMES;
    for (size_t i = 0; i < npf; i++) {
        const struct table_rec *br = find_table(t.blk, t.nblk, pf[i].framework);
        x.rec = pf[i].rec;
        size_t nb = br ? br->n : 0;
        if (pf[i].block >= nb)
            return ferr(&x, "stack %zu: block %" PRIu64 ", but the framework lists %zu blocks", i, pf[i].block, nb);
        struct ot_fw_block *b = &out->blocks[br->base + (size_t)pf[i].block];
        if (b->frames)
            return ferr(&x, "stack %zu: block %" PRIu64 " has a stack already", i, pf[i].block);
        b->frames = pf[i].frames;
        b->nframes = pf[i].nframes;
    }
    out->present = true;
    return 0;
}

int ot_probes_parse(struct ot_arena *a, const uint8_t *p, size_t len, struct ot_probes *out, char *why,
                    size_t whylen)
{
    memset(out, 0, sizeof(*out));
    struct ot_cursor c = {p, p + len, 0};
    uint64_t n = ot_get_uvarint(&c);
    if (c.err || n > (size_t)(c.end - c.p) / 4) {
        snprintf(why, whylen, "%" PRIu64 " snapshots cannot fit in the %zu bytes left", n, (size_t)(c.end - c.p));
        return -1;
    }
    if (!(out->v = ot_arena_array(a, n ? (size_t)n : 1, sizeof(*out->v)))) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        size_t sl;
        const char *s = ot_get_str(&c, &sl);
        out->v[i].file_name = (struct ot_str){s, sl};
        out->v[i].failure_seq = ot_get_uvarint(&c);
        out->v[i].requested_bytes = ot_get_uvarint(&c);
        out->v[i].device = ot_get_uvarint(&c);
        if (c.err) {
            snprintf(why, whylen, "snapshot %zu of %" PRIu64 " runs past the end of the payload", i, n);
            return -1;
        }
    }
    out->n = (size_t)n;
    out->present = true;
    return 0;
}
