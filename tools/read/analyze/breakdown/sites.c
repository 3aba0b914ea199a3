/* The program's own allocations, split by the call sites that made them (the breakdown's program row). */
#include "analyze/breakdown/sites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/stackview.h"
#include "analyze/userline.h"

int ot_bd_site_add(struct ot_bd_site_bytes *sb, size_t k, uint64_t bytes)
{
    if (k >= sb->cap) {
        size_t cap = sb->cap ? sb->cap : 64;
        while (cap <= k)
            cap *= 2;
        uint64_t *v = realloc(sb->v, cap * sizeof(*v));
        if (!v)
            return -1;
        memset(v + sb->cap, 0, (cap - sb->cap) * sizeof(*v));
        sb->v = v;
        sb->cap = cap;
    }
    sb->v[k] = ot_sat_add(sb->v[k], bytes);
    return 0;
}

/* The call sites of the program's own allocations, each named by the frame that tells it apart from the
 * others: a program that allocates through one helper (train_sim.py's device_alloc, a C program's
 * grab()) reaches it from every site, so the helper's line says nothing; the caller it was called from
 * does ("train_sim.py:43 in forward", "main (my_prog.c:21)"). A site's frames are the program's own
 * Python frames from its innermost outward (comprehensions belong to the function around them), else its
 * native frames from the headline outward (the tracer's and the runtime's plumbing left out). */
#define SITE_CHAIN 48

struct site_chain {
    const struct ot_frame *f[SITE_CHAIN];
    size_t n;
    uint64_t bytes, stack_id;
};

static bool comprehension(const struct ot_frame *f)
{
    return ot_str_contains(f->function, "<listcomp>") || ot_str_contains(f->function, "<genexpr>") ||
           ot_str_contains(f->function, "<dictcomp>") || ot_str_contains(f->function, "<setcomp>");
}

static void chain_of(const struct ot_analysis *a, uint64_t stack_id, struct site_chain *c)
{
    struct ot_stack_info si;
    ot_stack_info(a->res, a->s, stack_id, &si);
    const struct ot_stack *st = ot_snapshot_stack(a->s, stack_id);
    const struct ot_frame *from = si.user ? si.user : si.head;
    bool started = false;
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, a->res, from ? st : NULL, OT_WALK_ALL); c->n < SITE_CHAIN && ot_walk_next(&w);) {
        started = started || w.f == from;
        if (!started || w.py != (from->kind == OT_FRAME_PY))
            continue;
        if (w.py ? comprehension(w.f) : ot_walk_is_plumbing(&w) && !ot_frame_is_unnamed_own(w.f))
            continue;
        c->f[c->n++] = w.f;
    }
    /* A stack with no frame of the program's own and only plumbing past its headline (a Python whose frames
     * the tracer cannot read: ctypes' "ffi_call (libffi.so.8)", then the interpreter) is named by its
     * headline, as the site table names it, not "(unknown stack)" (walk 11, #8). */
    if (!c->n && si.head)
        c->f[c->n++] = si.head;
}

struct site_label {
    char *label;
    uint64_t bytes;
    uint64_t top_bytes, stack_id; /* its largest site's bytes and stack (the smaller id of equal ones) */
};

static int cmp_label(const void *x, const void *y)
{
    return strcmp(((const struct site_label *)x)->label, ((const struct site_label *)y)->label);
}

static int cmp_label_bytes(const void *x, const void *y)
{
    const struct site_label *a = x, *b = y;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    /* Equal bytes in the top call sites' order, so that both tables list tied sites alike (walk 7, #1:
     * site16, site2, site23, site9 against site2, site9, site16, site23): that table ranks a group of sites
     * by its largest, and sites by bytes, then stack id (analyze/sites.c, sitegroups.c). */
    if (a->top_bytes != b->top_bytes)
        return a->top_bytes > b->top_bytes ? -1 : 1;
    if (a->stack_id != b->stack_id)
        return a->stack_id < b->stack_id ? -1 : 1;
    return strcmp(a->label, b->label);
}

static void put_site_part(struct ot_bd_moment *m, size_t slot, const char *label, uint64_t bytes, bool rest)
{
    char *dst = m->site_label[slot];
    size_t n = strlen(label);
    if (n >= OT_BD_SITE_LABEL)
        n = OT_BD_SITE_LABEL - 1;
    memcpy(dst, label, n);
    dst[n] = 0;
    ot_bd_add_part(m, OT_BD_PROGRAM, (struct ot_str){dst, n}, bytes);
    for (size_t i = 0; i < m->nparts; i++)
        if (m->parts[i].label.p == dst)
            m->parts[i].rest = rest;
}

/* The program row's split by call site, when the row is still exactly its sites' bytes (a framework's
 * pool that took some of it as cache, or JAX's arrays, say what it holds instead). */
static bool has_site(const struct ot_bd_site_bytes *sb, size_t k)
{
    return sb && k < sb->cap && sb->v[k];
}

int ot_bd_site_parts(const struct ot_analysis *a, const uint64_t *ids, size_t nids, struct ot_bd_moment *m,
                     const struct ot_bd_site_bytes *sb, const struct ot_bd_site_bytes *other)
{
    uint64_t sum = 0;
    size_t nsites = 0;
    for (size_t k = 0; k < sb->cap && k < nids; k++)
        if (sb->v[k]) {
            sum = ot_sat_add(sum, sb->v[k]);
            nsites++;
        }
    if (!nsites || sum != m->bytes[OT_BD_PROGRAM])
        return 0;
    for (size_t i = 0; i < m->nparts; i++)
        if (m->parts[i].row == OT_BD_PROGRAM)
            return 0;
    /* The other moment's sites (the peak's for the failure's table, and back) count in what names a site:
     * one label per call site across both tables, so an allocation live at both is one row (walk 8, #32:
     * the weights read "oldpeak.py:10" at the peak, where two sites shared the helper, and "oldpeak.py:7
     * in alloc" at the failure). */
    size_t nall = nsites;
    for (size_t k = 0; other && k < other->cap && k < nids; k++)
        nall += other->v[k] && !has_site(sb, k);
    struct site_chain *c = calloc(nall, sizeof(*c));
    struct site_label *l = calloc(nsites, sizeof(*l));
    int rc = c && l ? 0 : -1;
    size_t n = 0, na = nsites;
    for (size_t k = 0; rc == 0 && k < nids && (k < sb->cap || (other && k < other->cap)); k++) {
        if (has_site(sb, k)) {
            chain_of(a, ids[k], &c[n]);
            c[n].stack_id = ids[k];
            c[n++].bytes = sb->v[k];
        } else if (has_site(other, k)) {
            chain_of(a, ids[k], &c[na]);
            c[na++].stack_id = ids[k];
        }
    }
    /* The innermost frames every site shares: none name a site. Sites whose frames are all the same (one
     * site, or paths that differ only below the program's line) are named by their innermost frame. */
    size_t common = rc == 0 ? c[0].n : 0;
    bool same = true;
    for (size_t i = 1; i < na; i++) {
        size_t j = 0;
        while (j < common && j < c[i].n && ot_frame_same_line(c[0].f[j], c[i].f[j]))
            j++;
        common = j;
    }
    for (size_t i = 0; i < na; i++)
        same = same && c[i].n == common;
    if (same)
        common = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t at = common < c[i].n ? common : c[i].n ? c[i].n - 1 : 0;
        l[i].label = c[i].n ? ot_short_frame_str(c[i].f[at]) : strdup("(unknown stack)");
        l[i].bytes = c[i].bytes;
        l[i].stack_id = c[i].stack_id;
        l[i].top_bytes = c[i].bytes;
        if (!l[i].label)
            rc = -1;
    }
    size_t nl = 0;
    if (rc == 0) {
        /* Sites that differ only below the frame that names them are one. */
        qsort(l, n, sizeof(*l), cmp_label);
        for (size_t i = 0; i < n; i++) {
            if (nl && strcmp(l[nl - 1].label, l[i].label) == 0) {
                l[nl - 1].bytes = ot_sat_add(l[nl - 1].bytes, l[i].bytes);
                if (l[i].top_bytes > l[nl - 1].top_bytes ||
                    (l[i].top_bytes == l[nl - 1].top_bytes && l[i].stack_id < l[nl - 1].stack_id)) {
                    l[nl - 1].top_bytes = l[i].top_bytes;
                    l[nl - 1].stack_id = l[i].stack_id;
                }
                free(l[i].label);
                continue;
            }
            l[nl++] = l[i];
        }
        qsort(l, nl, sizeof(*l), cmp_label_bytes);
        size_t shown = nl <= OT_BD_SITE_PARTS + 1 ? nl : OT_BD_SITE_PARTS;
        uint64_t rest = 0;
        for (size_t i = 0; i < nl; i++) {
            if (i < shown)
                put_site_part(m, i, l[i].label, l[i].bytes, false);
            else
                rest = ot_sat_add(rest, l[i].bytes);
        }
        if (shown < nl) {
            char more[48];
            snprintf(more, sizeof(more), "%zu more call sites", nl - shown);
            put_site_part(m, OT_BD_SITE_PARTS, more, rest, true);
        }
    }
    for (size_t i = 0; l && i < (rc == 0 ? nl : n); i++)
        free(l[i].label);
    free(l);
    free(c);
    return rc;
}
