/* The diff built: each side's peak sites keyed by their stacks' names, matched, merged and sorted. */
#include "modes/diff/diff_int.h"

#include <inttypes.h>
#include <stdlib.h>

#include "analyze/stackview.h"
#include "analyze/userline.h"

/* The name a native frame is matched by: the dump-time (dladdr) name, else the outermost function name
 * debug info gives for the same address. */
struct ot_str ot_diff_native_name(struct dside *d, uint64_t raw, const struct ot_frame *dumpf)
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
        struct ot_frame_walk w; /* the dump's names: one frame a word, no debug info, no inlining */
        for (ot_walk_begin(&w, d->dump, st, OT_WALK_ALL); ot_walk_next(&w);) {
            uint64_t raw = w.word;
            const struct ot_frame *fr = w.f;
            if (w.py) {
                fputs("P\x1f", m);
                key_put(m, fr->function);
                fputc('\x1f', m);
                /* The file as the reports spell it (its package path, else its base name): the same program
                 * from two checkouts, two CI workspaces or a laptop and a cluster differs in the directory. */
                key_put(m, ot_site_file(fr->file));
                fprintf(m, "\x1f%" PRIu64, lines && fr->has_line ? fr->line : 0);
            } else {
                fputs("N\x1f", m);
                key_put(m, ot_diff_native_name(d, raw, fr));
                fputc('\x1f', m);
                key_put(m, w.module);
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

static int cmp_row(const void *x, const void *y)
{
    const struct drow *a = x, *b = y;
    if (ot_diff_mag(a->change) != ot_diff_mag(b->change))
        return ot_diff_mag(a->change) > ot_diff_mag(b->change) ? -1 : 1;
    if (a->bytes[1] != b->bytes[1])
        return a->bytes[1] > b->bytes[1] ? -1 : 1;
    return ot_mem_cmp(a->key, a->keylen, b->key, b->keylen);
}


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


int ot_diff_build(struct diff *d, struct ot_loaded *base, struct ot_loaded *cur)
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
        d->rows[i].change = ot_diff_sdiff(d->rows[i].bytes[1], d->rows[i].bytes[0]);
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
        int s = ot_diff_show_side(&d->rows[i]);
        refs[i] = (struct ot_stack_ref){d->side[s].l->res, &d->side[s].l->snap, d->rows[i].stack[s]};
    }
    int rc = ot_headline_partings(refs, d->nrows, d->part);
    free(refs);
    return rc;
}

void ot_diff_free(struct diff *d)
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
