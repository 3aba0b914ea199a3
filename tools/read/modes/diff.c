#include "modes/diff.h"

#include <inttypes.h>
#include <stdlib.h>

#include "render/json_writer.h"
#include "analyze/stackview.h"

struct dentry {
    char *key, *loose; /* loose: the same without Python line numbers */
    size_t keylen, looselen;
    bool lines;  /* the key has the native frames' file:line (sites that read alike by names alone) */
    int side; /* 0 base, 1 new */
    uint64_t bytes, count, stack_id;
};

struct drow {
    const char *key, *loose;
    size_t keylen, looselen;
    bool loose_match; /* matched only when Python line numbers were ignored */
    bool lines;       /* matched with the native frames' file:line too */
    bool gone;        /* merged into another row */
    bool in[2];
    uint64_t bytes[2], count[2], stack[2], top_bytes[2]; /* stack: the largest merged site's id */
    int64_t change;
};

struct dside {
    struct ot_loaded *l;
    struct ot_resolver *dump; /* dump-time names only: the same on every machine */
    const struct ot_peak_view *p;
};

/* The name a native frame is matched by: the dump-time (dladdr) name, else the outermost function name
 * debug info gives for the same address. */
static struct ot_str native_name(struct dside *d, uint64_t raw, const struct ot_frame *dumpf)
{
    if (dumpf->function.p && dumpf->function.n)
        return dumpf->function;
    const struct ot_frame *fr;
    size_t n = ot_resolve(d->l->res, raw, &fr);
    if (n && fr[n - 1].function.p && fr[n - 1].function.n)
        return fr[n - 1].function;
    return ot_cstr("?");
}

static void key_put(FILE *m, struct ot_str s)
{
    if (s.p && s.n)
        fwrite(s.p, 1, s.n, m);
}

/* A site's key: its frames by name (native frames by function and module base name, Python frames by function,
 * file and, with lines, line). native_lines adds each native frame's file:line from debug info (inlined calls
 * included), which tells apart two call sites that reach the allocation through one helper. */
static char *make_key(struct dside *d, uint64_t stack_id, bool lines, bool native_lines, size_t *len)
{
    char *p = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&p, &n);
    if (!m)
        return NULL;
    const struct ot_stack *st = ot_snapshot_stack(&d->l->snap, stack_id);
    if (!st) {
        fprintf(m, "missing\x1f%" PRIu64, stack_id);
    } else {
        for (size_t i = 0; i < st->nframes; i++) {
            uint64_t raw = st->frames[i];
            const struct ot_frame *fr;
            ot_resolve(d->dump, raw, &fr); /* one frame: no debug info, no inlining */
            if (fr->kind == OT_FRAME_PY) {
                fputs("P\x1f", m);
                key_put(m, fr->function);
                fputc('\x1f', m);
                key_put(m, fr->file);
                fprintf(m, "\x1f%" PRIu64, lines && fr->has_line ? fr->line : 0);
            } else {
                fputs("N\x1f", m);
                key_put(m, native_name(d, raw, fr));
                fputc('\x1f', m);
                key_put(m, ot_base_name(fr->module));
                const struct ot_frame *dw;
                size_t k = native_lines ? ot_resolve(d->l->res, raw, &dw) : 0;
                for (size_t j = 0; j < k; j++) {
                    fputc('\x1f', m);
                    key_put(m, dw[j].function);
                    fputc('\x1f', m);
                    key_put(m, ot_base_name(dw[j].file));
                    fprintf(m, "\x1f%" PRIu64, dw[j].has_line ? dw[j].line : 0);
                }
            }
            fputc('\x1e', m);
        }
    }
    if (fclose(m) != 0) {
        free(p);
        return NULL;
    }
    *len = n;
    return p;
}

static int cmp_entry(const void *x, const void *y)
{
    const struct dentry *a = x, *b = y;
    int c = ot_mem_cmp(a->key, a->keylen, b->key, b->keylen);
    if (c)
        return c;
    if (a->side != b->side)
        return a->side - b->side;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

static uint64_t mag(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

static int cmp_row(const void *x, const void *y)
{
    const struct drow *a = x, *b = y;
    if (mag(a->change) != mag(b->change))
        return mag(a->change) > mag(b->change) ? -1 : 1;
    if (a->bytes[1] != b->bytes[1])
        return a->bytes[1] > b->bytes[1] ? -1 : 1;
    return ot_mem_cmp(a->key, a->keylen, b->key, b->keylen);
}

static int64_t sdiff(uint64_t b, uint64_t a)
{
    if (b >= a)
        return b - a > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(b - a);
    return a - b > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)(a - b);
}

struct diff {
    struct dside side[2];
    struct dentry *e;
    size_t ne;
    struct drow *rows;
    size_t nrows;
    struct ot_parting *part; /* per row: the caller that tells it from a row of the same headline */
};

static int cmp_loose(const void *x, const void *y)
{
    const struct drow *a = *(const struct drow *const *)x, *b = *(const struct drow *const *)y;
    int c = ot_mem_cmp(a->loose, a->looselen, b->loose, b->looselen);
    if (c)
        return c;
    return a < b ? -1 : a > b;
}

/* Sites present on one side only are matched again with Python line numbers ignored: an edit that moves
 * the lines of a script's outer frames should not make every site look new. A group is merged only when
 * it holds sites of both sides. */
static void loose_pass(struct diff *d)
{
    struct drow **one = malloc((d->nrows ? d->nrows : 1) * sizeof(*one));
    if (!one)
        return;
    size_t n = 0;
    for (size_t i = 0; i < d->nrows; i++)
        if (d->rows[i].in[0] != d->rows[i].in[1])
            one[n++] = &d->rows[i];
    if (n > 1)
        qsort(one, n, sizeof(*one), cmp_loose);
    for (size_t i = 0; i < n;) {
        size_t k = i + 1;
        while (k < n && one[k]->looselen == one[i]->looselen && memcmp(one[k]->loose, one[i]->loose, one[i]->looselen) == 0)
            k++;
        bool sides[2] = {false, false};
        for (size_t m = i; m < k; m++)
            sides[one[m]->in[1]] = true;
        if (sides[0] && sides[1]) {
            struct drow *into = one[i];
            into->loose_match = true;
            for (size_t m = i + 1; m < k; m++) {
                struct drow *r = one[m];
                for (int s = 0; s < 2; s++) {
                    if (!r->in[s])
                        continue;
                    if (!into->in[s] || r->top_bytes[s] > into->top_bytes[s]) {
                        into->stack[s] = r->stack[s];
                        into->top_bytes[s] = r->top_bytes[s];
                    }
                    into->in[s] = true;
                    into->bytes[s] = ot_sat_add(into->bytes[s], r->bytes[s]);
                    into->count[s] += r->count[s];
                }
                r->gone = true;
            }
        }
        i = k;
    }
    free(one);
    size_t w = 0;
    for (size_t i = 0; i < d->nrows; i++)
        if (!d->rows[i].gone)
            d->rows[w++] = d->rows[i];
    d->nrows = w;
}

/* The side whose stack a row shows: the new snapshot when it has the site. */
static int show_side(const struct drow *r)
{
    return r->in[1] ? 1 : 0;
}

/* How a row was matched, said after its stack id. */
static const char *matched_note(const struct drow *r)
{
    return r->loose_match ? "; matched with Python line numbers ignored" : r->lines ? "; matched with native file:line" : "";
}

static int diff_build(struct diff *d, struct ot_loaded *base, struct ot_loaded *cur)
{
    memset(d, 0, sizeof(*d));
    struct ot_loaded *ls[2] = {base, cur};
    size_t total = 0;
    for (int s = 0; s < 2; s++) {
        d->side[s].l = ls[s];
        d->side[s].p = ls[s]->an.peak;
        d->side[s].dump = ot_resolver_new(&ls[s]->snap, NULL);
        if (!d->side[s].dump)
            return -1;
        if (d->side[s].p && d->side[s].p->has_sites)
            total += d->side[s].p->sites.n;
    }
    d->e = calloc(total ? total : 1, sizeof(*d->e));
    d->rows = calloc(total ? total : 1, sizeof(*d->rows));
    if (!d->e || !d->rows)
        return -1;
    for (int s = 0; s < 2; s++) {
        const struct ot_peak_view *p = d->side[s].p;
        if (!p || !p->has_sites)
            continue;
        for (size_t i = 0; i < p->sites.n; i++) {
            struct dentry *x = &d->e[d->ne];
            x->key = make_key(&d->side[s], p->sites.v[i].stack_id, true, false, &x->keylen);
            x->loose = make_key(&d->side[s], p->sites.v[i].stack_id, false, false, &x->looselen);
            if (!x->key || !x->loose)
                return -1;
            x->side = s;
            x->bytes = p->sites.v[i].bytes;
            x->count = p->sites.v[i].count;
            x->stack_id = p->sites.v[i].stack_id;
            d->ne++;
        }
    }
    if (d->ne > 1)
        qsort(d->e, d->ne, sizeof(*d->e), cmp_entry);
    /* Sites of one snapshot whose stacks read the same by names (two lines of main calling one helper) would
     * merge into one row: on both sides, such keys get the native frames' file:line, and are sorted again. */
    bool refined = false;
    for (size_t i = 0; i < d->ne;) {
        size_t k = i + 1, per[2] = {0, 0};
        while (k < d->ne && d->e[k].keylen == d->e[i].keylen && memcmp(d->e[k].key, d->e[i].key, d->e[i].keylen) == 0)
            k++;
        for (size_t m = i; m < k; m++)
            per[d->e[m].side]++;
        for (size_t m = i; m < k && (per[0] > 1 || per[1] > 1); m++)
            d->e[m].lines = refined = true;
        i = k;
    }
    for (size_t i = 0; i < d->ne; i++) {
        struct dentry *x = &d->e[i];
        if (!x->lines)
            continue;
        free(x->key);
        x->key = make_key(&d->side[x->side], x->stack_id, true, true, &x->keylen);
        if (!x->key)
            return -1;
    }
    if (refined && d->ne > 1)
        qsort(d->e, d->ne, sizeof(*d->e), cmp_entry);
    for (size_t i = 0; i < d->ne; i++) {
        struct dentry *x = &d->e[i];
        struct drow *r = d->nrows ? &d->rows[d->nrows - 1] : NULL;
        if (!r || r->keylen != x->keylen || memcmp(r->key, x->key, x->keylen) != 0) {
            r = &d->rows[d->nrows++];
            r->key = x->key;
            r->keylen = x->keylen;
            r->loose = x->loose;
            r->looselen = x->looselen;
            r->lines = x->lines;
        }
        int s = x->side;
        if (!r->in[s] || x->bytes > r->top_bytes[s]) {
            r->stack[s] = x->stack_id;
            r->top_bytes[s] = x->bytes;
        }
        r->in[s] = true;
        r->bytes[s] = ot_sat_add(r->bytes[s], x->bytes);
        r->count[s] += x->count;
    }
    loose_pass(d);
    for (size_t i = 0; i < d->nrows; i++)
        d->rows[i].change = sdiff(d->rows[i].bytes[1], d->rows[i].bytes[0]);
    if (d->nrows > 1)
        qsort(d->rows, d->nrows, sizeof(*d->rows), cmp_row);
    /* Rows whose headlines read the same (each from the side it shows) are told apart by a caller. */
    struct ot_stack_ref *refs = calloc(d->nrows ? d->nrows : 1, sizeof(*refs));
    d->part = calloc(d->nrows ? d->nrows : 1, sizeof(*d->part));
    if (!refs || !d->part) {
        free(refs);
        return -1;
    }
    for (size_t i = 0; i < d->nrows; i++) {
        int s = show_side(&d->rows[i]);
        refs[i] = (struct ot_stack_ref){d->side[s].l->res, &d->side[s].l->snap, d->rows[i].stack[s]};
    }
    int rc = ot_headline_partings(refs, d->nrows, d->part);
    free(refs);
    return rc;
}

static void diff_free(struct diff *d)
{
    for (size_t i = 0; i < d->ne; i++) {
        free(d->e[i].key);
        free(d->e[i].loose);
    }
    free(d->e);
    free(d->rows);
    free(d->part);
    for (int s = 0; s < 2; s++)
        ot_resolver_free(d->side[s].dump);
    memset(d, 0, sizeof(*d));
}

static void put_signed_bytes(FILE *f, int64_t v)
{
    char b[32];
    fprintf(f, "%c%s", v < 0 ? '-' : '+', ot_fmt_bytes(b, mag(v)));
}

static const char *trig(const struct ot_snapshot *s)
{
    const char *t = ot_trigger_name(s->meta.trigger);
    return t ? t : "unknown";
}

static void text_side(FILE *f, const char *label, const struct dside *d)
{
    char b1[32];
    const struct ot_snapshot *s = &d->l->snap;
    fprintf(f, "  %s ", label);
    ot_fput_safe_max(f, ot_cstr(d->l->path), 512);
    if (d->p)
        fprintf(f, ": peak %s on device %" PRId64 " (seq %" PRIu64 ")", ot_fmt_bytes(b1, d->p->bytes), d->p->device, d->p->seq);
    else
        fputs(": peak unknown", f);
    fprintf(f, "; %s snapshot of pid %" PRIu64, trig(s), s->meta.pid);
    if (s->meta.rank >= 0)
        fprintf(f, ", rank %" PRId64, s->meta.rank);
    fputc('\n', f);
    if (d->p && !d->p->has_sites)
        fprintf(f, "    (device %" PRId64 ": the live set at its peak was not recorded, so it has no site table)\n", d->p->device);
}

int ot_diff_text(FILE *f, struct ot_loaded *base, struct ot_loaded *cur, const struct ot_report_opts *o)
{
    struct diff d;
    if (diff_build(&d, base, cur) < 0) {
        diff_free(&d);
        return -1;
    }
    char b1[32], b2[32], b3[32], b4[32];
    fputs("oomtrace-read --diff: peak bytes by call site, base -> new\n", f);
    text_side(f, "base:", &d.side[0]);
    text_side(f, "new: ", &d.side[1]);
    if (d.side[0].p && d.side[1].p) {
        uint64_t pb = d.side[0].p->bytes, pn = d.side[1].p->bytes;
        fputs("  peak change: ", f);
        put_signed_bytes(f, sdiff(pn, pb));
        if (pb)
            fprintf(f, " (%+.1f%%)", 100.0 * ((double)pn - (double)pb) / (double)pb);
        fprintf(f, ", from %s to %s\n", ot_fmt_bytes(b1, pb), ot_fmt_bytes(b2, pn));
    }
    size_t changed = 0;
    for (size_t i = 0; i < d.nrows; i++)
        changed += d.rows[i].change != 0;
    fprintf(f, "\nCall sites by change in peak bytes, largest first (%zu site%s, %zu changed; matched by function names,\n"
               "Python file:line and module names, not addresses, and by native file:line where sites of one snapshot\n"
               "read the same by names; sites found on one side only, again without Python line numbers):\n",
            d.nrows, d.nrows == 1 ? "" : "s", changed);
    size_t shown = 0;
    for (size_t i = 0; i < d.nrows && shown < o->top; i++) {
        const struct drow *r = &d.rows[i];
        if (!r->change)
            continue;
        shown++;
        fprintf(f, "  %2zu. ", shown);
        put_signed_bytes(f, r->change);
        fputs(": ", f);
        if (r->in[0])
            fprintf(f, "%s in %s", ot_fmt_bytes(b1, r->bytes[0]), ot_fmt_count(b2, r->count[0]));
        else
            fputs("absent", f);
        fputs(" -> ", f);
        if (r->in[1])
            fprintf(f, "%s in %s", ot_fmt_bytes(b3, r->bytes[1]), ot_fmt_count(b4, r->count[1]));
        else
            fputs("absent", f);
        fputs(": ", f);
        int s = show_side(r);
        struct ot_stack_info si;
        ot_stack_info(d.side[s].l->res, &d.side[s].l->snap, r->stack[s], &si);
        ot_put_headline(f, &si, true);
        ot_put_parting(f, &d.part[i]);
        fprintf(f, " (%s stack %" PRIu64 "%s)\n", s ? "new" : "base", r->stack[s], matched_note(r));
        if (o->native || !ot_put_stack_python_first(f, d.side[s].l->res, &d.side[s].l->snap, r->stack[s], "        ", o->frames))
            ot_put_stack_native(f, d.side[s].l->res, &d.side[s].l->snap, r->stack[s], "        ", o->frames);
    }
    if (changed > shown)
        fprintf(f, "  ... %zu more changed site%s (--top)\n", changed - shown, changed - shown == 1 ? "" : "s");
    if (!changed)
        fputs("  (no call site changed)\n", f);
    if (d.nrows > changed)
        fprintf(f, "  %zu site%s unchanged\n", d.nrows - changed, d.nrows - changed == 1 ? "" : "s");
    diff_free(&d);
    return ferror(f) ? -1 : 0;
}

/* ---- markdown and HTML ---- */

static void doc_side(struct ot_doc *o, const char *label, const struct dside *d)
{
    char b1[32];
    const struct ot_snapshot *s = &d->l->snap;
    ot_doc_item(o);
    ot_doc_bold(o, label);
    ot_doc_printf(o, " ");
    ot_doc_code(o, ot_cstr(d->l->path), 512);
    if (d->p)
        ot_doc_printf(o, ": peak %s on device %" PRId64 " (seq %" PRIu64 ")", ot_fmt_bytes(b1, d->p->bytes), d->p->device,
                      d->p->seq);
    else
        ot_doc_printf(o, ": peak unknown");
    ot_doc_printf(o, "; %s snapshot of pid %" PRIu64, trig(s), s->meta.pid);
    if (s->meta.rank >= 0)
        ot_doc_printf(o, ", rank %" PRId64, s->meta.rank);
    if (d->p && !d->p->has_sites)
        ot_doc_printf(o, " (device %" PRId64 ": the live set at its peak was not recorded, so it has no site table)",
                      d->p->device);
    ot_doc_item_end(o);
}

static void doc_amount(struct ot_doc *o, bool in, uint64_t bytes, uint64_t count)
{
    char b1[32], b2[32];
    ot_doc_cell(o);
    if (in)
        ot_doc_printf(o, "%s in %s", ot_fmt_bytes(b1, bytes), ot_fmt_count(b2, count));
    else
        ot_doc_printf(o, "absent");
    ot_doc_cell_end(o);
}

int ot_diff_doc(FILE *f, struct ot_loaded *base, struct ot_loaded *cur, const struct ot_report_opts *opts,
                enum ot_doc_kind kind)
{
    struct diff d;
    if (diff_build(&d, base, cur) < 0) {
        diff_free(&d);
        return -1;
    }
    struct ot_doc o = {.f = f, .kind = kind};
    char b1[32], b2[32];
    ot_doc_page(&o, "oomtrace: peak bytes by call site, base \xe2\x86\x92 new");
    doc_side(&o, "base:", &d.side[0]);
    doc_side(&o, "new:", &d.side[1]);
    ot_doc_list_end(&o);
    if (d.side[0].p && d.side[1].p) {
        uint64_t pb = d.side[0].p->bytes, pn = d.side[1].p->bytes;
        int64_t ch = sdiff(pn, pb);
        ot_doc_para(&o);
        ot_doc_bold(&o, "Peak change:");
        ot_doc_printf(&o, " %c%s", ch < 0 ? '-' : '+', ot_fmt_bytes(b1, mag(ch)));
        if (pb)
            ot_doc_printf(&o, " (%+.1f%%)", 100.0 * ((double)pn - (double)pb) / (double)pb);
        ot_doc_printf(&o, ", from %s to %s", ot_fmt_bytes(b1, pb), ot_fmt_bytes(b2, pn));
        ot_doc_para_end(&o);
    }
    size_t changed = 0, shown = 0;
    for (size_t i = 0; i < d.nrows; i++)
        changed += d.rows[i].change != 0;
    if (changed) {
        static const char *const heads[] = {"#", "Change", "Base", "New", "Where (the stack of the new snapshot, else the base's)"};
        ot_doc_table(&o, heads, "rrrrl");
    }
    for (size_t i = 0; i < d.nrows && shown < opts->top; i++) {
        const struct drow *r = &d.rows[i];
        if (!r->change)
            continue;
        ot_doc_row(&o);
        ot_doc_cell(&o);
        ot_doc_printf(&o, "%zu", ++shown);
        ot_doc_cell_end(&o);
        ot_doc_cell(&o);
        ot_doc_printf(&o, "%c%s", r->change < 0 ? '-' : '+', ot_fmt_bytes(b1, mag(r->change)));
        ot_doc_cell_end(&o);
        doc_amount(&o, r->in[0], r->bytes[0], r->count[0]);
        doc_amount(&o, r->in[1], r->bytes[1], r->count[1]);
        int sd = show_side(r);
        struct ot_stack_info si;
        ot_stack_info(d.side[sd].l->res, &d.side[sd].l->snap, r->stack[sd], &si);
        char *hl = ot_headline_str(&si, true), *pt = ot_parting_str(&d.part[i]);
        ot_doc_cell(&o);
        char *both = NULL;
        if (asprintf(&both, "%s%s", hl ? hl : "?", pt ? pt : "") < 0)
            both = NULL;
        ot_doc_code(&o, ot_cstr(both ? both : "?"), 600);
        free(both);
        ot_doc_printf(&o, " (%s stack %" PRIu64 "%s)", sd ? "new" : "base", r->stack[sd], matched_note(r));
        ot_doc_cell_end(&o);
        free(hl);
        free(pt);
        ot_doc_row_end(&o);
    }
    if (changed)
        ot_doc_table_end(&o);
    ot_doc_para(&o);
    ot_doc_printf(&o, "%zu call site%s, %zu changed", d.nrows, d.nrows == 1 ? "" : "s", changed);
    if (changed > shown)
        ot_doc_printf(&o, " (%zu not shown: --top)", changed - shown);
    ot_doc_printf(&o, ", %zu unchanged. Sites are matched by function names, Python file:line and module names, not "
                  "addresses, and by native file:line where sites of one snapshot read the same by names; sites found "
                  "on one side only, again without Python line numbers.", d.nrows - changed);
    ot_doc_para_end(&o);
    ot_doc_page_end(&o);
    diff_free(&d);
    return ferror(f) ? -1 : 0;
}

static void json_side(struct ot_json *j, const char *key, const struct dside *d)
{
    const struct ot_snapshot *s = &d->l->snap;
    ot_json_obj(j, key);
    ot_json_cstr(j, "file", d->l->path);
    ot_json_cstr(j, "trigger", ot_trigger_name(s->meta.trigger));
    ot_json_u64(j, "pid", s->meta.pid);
    ot_json_str(j, "host", s->meta.host);
    ot_json_i64_or_null(j, "rank", s->meta.rank >= 0, s->meta.rank);
    ot_json_i64_or_null(j, "peak_device", d->p != NULL, d->p ? d->p->device : 0);
    ot_json_u64_or_null(j, "peak_bytes", d->p != NULL, d->p ? d->p->bytes : 0);
    ot_json_u64_or_null(j, "peak_seq", d->p != NULL, d->p ? d->p->seq : 0);
    ot_json_bool(j, "has_sites", d->p && d->p->has_sites);
    ot_json_obj_end(j);
}

static void json_key_frames(struct ot_json *j, struct dside *d, uint64_t stack_id)
{
    const struct ot_stack *st = ot_snapshot_stack(&d->l->snap, stack_id);
    if (!st) {
        ot_json_null(j, "frames");
        return;
    }
    ot_json_arr(j, "frames");
    for (size_t i = 0; i < st->nframes; i++) {
        const struct ot_frame *fr;
        ot_resolve(d->dump, st->frames[i], &fr);
        ot_json_obj(j, NULL);
        if (fr->kind == OT_FRAME_PY) {
            ot_json_cstr(j, "kind", "python");
            ot_json_str(j, "function", fr->function);
            ot_json_str(j, "file", fr->file);
            ot_json_u64_or_null(j, "line", fr->has_line, fr->line);
            ot_json_null(j, "module");
        } else {
            ot_json_cstr(j, "kind", "native");
            ot_json_str(j, "function", native_name(d, st->frames[i], fr));
            ot_json_null(j, "file");
            ot_json_null(j, "line");
            ot_json_str(j, "module", ot_base_name(fr->module));
        }
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
}

int ot_diff_json(FILE *f, struct ot_loaded *base, struct ot_loaded *cur, const struct ot_report_opts *o)
{
    struct diff d;
    if (diff_build(&d, base, cur) < 0) {
        diff_free(&d);
        return -1;
    }
    struct ot_json j;
    ot_json_init(&j, f);
    ot_json_obj(&j, NULL);
    ot_json_cstr(&j, "schema", "oomtrace-diff/1");
    json_side(&j, "base", &d.side[0]);
    json_side(&j, "new", &d.side[1]);
    bool both = d.side[0].p && d.side[1].p;
    uint64_t pb = both ? d.side[0].p->bytes : 0, pn = both ? d.side[1].p->bytes : 0;
    ot_json_i64_or_null(&j, "peak_change_bytes", both, sdiff(pn, pb));
    if (both && pb)
        ot_json_f64(&j, "peak_change_percent", 100.0 * ((double)pn - (double)pb) / (double)pb);
    else
        ot_json_null(&j, "peak_change_percent");
    size_t changed = 0;
    for (size_t i = 0; i < d.nrows; i++)
        changed += d.rows[i].change != 0;
    ot_json_u64(&j, "sites_total", d.nrows);
    ot_json_u64(&j, "sites_changed", changed);
    size_t n = d.nrows;
    if (o->top_given && o->top < n)
        n = o->top;
    ot_json_arr(&j, "sites");
    for (size_t i = 0; i < n; i++) {
        const struct drow *r = &d.rows[i];
        int s = show_side(r);
        ot_json_obj(&j, NULL);
        ot_json_i64(&j, "change_bytes", r->change);
        ot_json_u64_or_null(&j, "base_bytes", r->in[0], r->bytes[0]);
        ot_json_u64_or_null(&j, "base_count", r->in[0], r->count[0]);
        ot_json_u64_or_null(&j, "new_bytes", r->in[1], r->bytes[1]);
        ot_json_u64_or_null(&j, "new_count", r->in[1], r->count[1]);
        ot_json_u64_or_null(&j, "base_stack_id", r->in[0], r->stack[0]);
        ot_json_u64_or_null(&j, "new_stack_id", r->in[1], r->stack[1]);
        ot_json_cstr(&j, "matched_by", r->loose_match ? "names_without_python_lines" : r->lines ? "names_and_native_lines" : "names");
        struct ot_stack_info si;
        ot_stack_info(d.side[s].l->res, &d.side[s].l->snap, r->stack[s], &si);
        char *hl = ot_headline_str(&si, true);
        ot_json_cstr(&j, "headline", hl);
        free(hl);
        char *pt = d.part[i].frame ? ot_short_frame_str(d.part[i].frame) : NULL;
        if (pt)
            ot_json_cstr(&j, "parted_by", pt);
        else
            ot_json_null(&j, "parted_by");
        free(pt);
        json_key_frames(&j, &d.side[s], r->stack[s]);
        ot_json_obj_end(&j);
    }
    ot_json_arr_end(&j);
    ot_json_obj_end(&j);
    ot_json_end(&j);
    diff_free(&d);
    return ferror(f) ? -1 : 0;
}
