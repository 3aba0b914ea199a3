/* The text report's site tables. A row is a line of the program with the sites under it (analyze's
 * groups), or one site (a group of one, or --split): its bytes, allocations and share, what it is, and
 * the stack that shows where. */
#include "render/sitetable.h"

#include <inttypes.h>
#include <stdlib.h>

#include "analyze/allocview.h"
#include "analyze/stackview.h"
#include "analyze/userline.h"

#define OT_GROUP_MEMBERS_SHOWN 5 /* a group's sites listed under its line */

struct st {
    FILE *f;
    const struct ot_analysis *a;
    const struct ot_snapshot *s;
    const struct ot_report_opts *o;
    bool segments_now; /* the table is of the moment the frameworks' view describes */
};

/* A row whose driver allocations are a framework's segments: those hold the framework's cache and
 * whatever tensors it placed in them since, so the row says what they hold now rather than let the
 * line that made them read as the holder of every tensor inside (issue 11's fragmentation). */
static void segments_note(struct st *t, const struct ot_sites *st, const size_t *idx, size_t n)
{
    struct ot_fw_creator sum = {0};
    for (size_t i = 0; i < n; i++) {
        const struct ot_fw_creator *c = ot_allocview_creator(t->a->fw, st->v[idx[i]].stack_id);
        if (!c)
            continue;
        if (!sum.nsegments)
            sum.framework = c->framework;
        sum.nsegments += c->nsegments;
        sum.reserved_bytes = ot_sat_add(sum.reserved_bytes, c->reserved_bytes);
        sum.allocated_bytes = ot_sat_add(sum.allocated_bytes, c->allocated_bytes);
        sum.free_bytes = ot_sat_add(sum.free_bytes, c->free_bytes);
    }
    if (!sum.nsegments || !ot_fw_segments_misread(sum.reserved_bytes, sum.free_bytes))
        return;
    char b1[32], b2[32], b3[32];
    const char *fw = ot_fw_display_name(sum.framework);
    fputs("        ", t->f);
    if (fw)
        fputs(fw, t->f);
    else
        ot_fput_safe_max(t->f, sum.framework, 40);
    fprintf(t->f, "'s segments made here: %s reserved in %zu segment%s; now %s of it allocated to tensors and %s free in "
                  "the cache (this line made the segments, not necessarily the tensors in them)\n",
            ot_fmt_bytes(b1, sum.reserved_bytes), sum.nsegments, sum.nsegments == 1 ? "" : "s",
            ot_fmt_bytes(b2, sum.allocated_bytes), ot_fmt_bytes(b3, sum.free_bytes));
}

void ot_text_stack(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o, uint64_t stack_id,
                   const char *indent)
{
    if (!o->native && ot_put_stack_python_first(f, a->res, a->s, stack_id, indent, o->frames))
        return;
    ot_put_stack_native(f, a->res, a->s, stack_id, indent, o->frames);
}

/* "  1. 17.2 GiB in 11 allocations, 12.4% of peak": the start of a row. */
static void row_head(FILE *o, size_t rank, uint64_t bytes, uint64_t count, uint64_t whole, const char *share_of)
{
    char b1[32], b2[32];
    fprintf(o, "  %2zu. %s in %s allocation%s", rank, ot_fmt_bytes(b1, bytes), ot_fmt_count(b2, count),
            count == 1 ? "" : "s");
    if (whole)
        fprintf(o, ", %.1f%% of %s", 100.0 * (double)bytes / (double)whole, share_of);
}

/* One site's row: bytes, count, share, headline (with the caller that tells it from another row of the
 * same headline), then its stack. */
static void site_row(struct st *t, size_t rank, const struct ot_sites *st, const struct ot_site *x, uint64_t whole,
                     const char *share_of, const struct ot_parting *part)
{
    FILE *o = t->f;
    row_head(o, rank, x->bytes, x->count, whole, share_of);
    struct ot_stack_info si;
    ot_stack_info(t->a->res, t->s, x->stack_id, &si);
    fputs(": ", o);
    ot_put_headline(o, &si, false);
    ot_put_parting(o, part);
    fprintf(o, " (stack %" PRIu64 ")\n", x->stack_id);
    size_t k = (size_t)(x - st->v);
    if (t->segments_now)
        segments_note(t, st, &k, 1);
    ot_text_stack(t->f, t->a, t->o, x->stack_id, "        ");
}

/* A group of sites under one line: the line with the sums, its members largest first (what each one
 * adds below the line), then the line's callers from the largest member's stack. */
static void group_row(struct st *t, size_t rank, const struct ot_sites *st, const struct ot_site_group *g, uint64_t whole,
                      const char *share_of)
{
    FILE *o = t->f;
    char b1[32], b2[32];
    row_head(o, rank, g->bytes, g->count, whole, share_of);
    fputs(": ", o);
    ot_put_short_frame(o, g->line);
    fprintf(o, " (%zu call sites %s)\n", g->n, g->key == OT_GROUP_USER_LINE ? "below this line" : "with this headline");
    if (t->segments_now)
        segments_note(t, st, st->member + g->first, g->n);
    size_t shown = g->n < OT_GROUP_MEMBERS_SHOWN ? g->n : OT_GROUP_MEMBERS_SHOWN;
    /* The "via" frame is said only where it tells the members apart. */
    bool one_via = true;
    const struct ot_frame *via0 = NULL;
    for (size_t m = 0; m < shown && one_via; m++) {
        struct ot_stack_info si;
        ot_stack_info(t->a->res, t->s, st->v[st->member[g->first + m]].stack_id, &si);
        if (m == 0)
            via0 = si.via;
        else
            one_via = via0 && si.via && ot_frame_same_line(via0, si.via);
    }
    uint64_t rest = g->bytes;
    for (size_t m = 0; m < shown; m++) {
        const struct ot_site *x = &st->v[st->member[g->first + m]];
        rest -= x->bytes;
        fprintf(o, "        %s in %s allocation%s", ot_fmt_bytes(b1, x->bytes), ot_fmt_count(b2, x->count),
                x->count == 1 ? "" : "s");
        if (whole)
            fprintf(o, ", %.1f%%", 100.0 * (double)x->bytes / (double)whole);
        struct ot_stack_info si;
        ot_stack_info(t->a->res, t->s, x->stack_id, &si);
        if (g->key == OT_GROUP_USER_LINE && si.head && si.head != si.user) {
            fputs(": \xe2\x86\x92 ", o); /* "→ " */
            ot_put_short_frame(o, si.head);
            /* Members with the same library line part further out: name the frame where they do. */
            size_t d = 0;
            uint64_t other = st->v[st->member[g->first + (m ? 0 : 1)]].stack_id;
            const struct ot_frame *part = ot_stack_first_difference(t->a->res, t->s, x->stack_id, other, &d);
            if (part && d > 0 && part != si.user) {
                fputs(d > 1 ? " \xe2\x86\x90 \xe2\x80\xa6 \xe2\x86\x90 " : " \xe2\x86\x90 ", o); /* " ← … ← " */
                ot_put_short_frame(o, part);
            }
        }
        if (g->key == OT_GROUP_USER_LINE && si.via && !one_via) {
            fputs(si.head != si.user ? ", via " : ": via ", o);
            ot_put_short_frame(o, si.via);
        }
        fprintf(o, " (stack %" PRIu64 ")\n", x->stack_id);
    }
    if (g->n > shown) {
        fprintf(o, "        ... %zu more call sites: %s", g->n - shown, ot_fmt_bytes(b1, rest));
        if (whole)
            fprintf(o, ", %.1f%%", 100.0 * (double)rest / (double)whole);
        fputs(" (--split lists each)\n", o);
    }
    uint64_t largest = st->v[st->member[g->first]].stack_id;
    if (g->key == OT_GROUP_USER_LINE && !t->o->native) {
        fprintf(o, "        the line and its callers (stack %" PRIu64 "):\n", largest);
        ot_put_stack_from_user(o, t->a->res, t->s, largest, "        ", t->o->frames);
        const struct ot_stack *lst = ot_snapshot_stack(t->s, largest);
        if (lst)
            ot_put_borrowed_note(o, t->a->res, t->s, lst, "        ");
        return;
    }
    fprintf(o, "        stack %" PRIu64 ":\n", largest);
    ot_text_stack(t->f, t->a, t->o, largest, "        ");
}

void ot_text_site_table(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *opts, const struct ot_sites *st,
                        uint64_t whole, const char *share_of, bool segments_now)
{
    struct st tt = {f, a, a->s, opts, segments_now}, *t = &tt;
    FILE *o = t->f;
    char b1[32];
    if (!st->n) {
        fputs("  (no allocations)\n", o);
        return;
    }
    /* Grouped: a row is a line of the program and every site under it (--split: one row per site). */
    bool grouped = st->ngroups && !t->o->split;
    size_t rows = grouped ? st->ngroups : st->n;
    size_t n = rows < t->o->top ? rows : t->o->top;
    uint64_t shown_bytes = 0;
    /* The rows of one site each; those whose headlines read the same are told apart by a caller. */
    struct ot_stack_ref *refs = calloc(n ? n : 1, sizeof(*refs));
    struct ot_parting *parts = calloc(n ? n : 1, sizeof(*parts));
    size_t *row_of = calloc(n ? n : 1, sizeof(*row_of)), nref = 0;
    for (size_t i = 0; refs && parts && row_of && i < n; i++) {
        const struct ot_site_group *g = grouped ? &st->groups[i] : NULL;
        if (g && g->n > 1)
            continue;
        refs[nref] = (struct ot_stack_ref){t->a->res, t->s, st->v[g ? st->member[g->first] : i].stack_id};
        row_of[i] = ++nref; /* 0: a group's row */
    }
    bool parted = refs && parts && row_of && ot_headline_partings(refs, nref, parts) == 0;
    static const struct ot_parting none;
    for (size_t i = 0; i < n; i++) {
        const struct ot_site_group *g = grouped ? &st->groups[i] : NULL;
        if (g && g->n > 1) {
            group_row(t, i + 1, st, g, whole, share_of);
            shown_bytes = ot_sat_add(shown_bytes, g->bytes);
            continue;
        }
        const struct ot_site *x = &st->v[g ? st->member[g->first] : i];
        site_row(t, i + 1, st, x, whole, share_of, parted ? &parts[row_of[i] - 1] : &none);
        shown_bytes = ot_sat_add(shown_bytes, x->bytes);
    }
    free(refs);
    free(parts);
    free(row_of);
    if (rows > n) {
        uint64_t rest = st->bytes >= shown_bytes ? st->bytes - shown_bytes : 0;
        fprintf(o, "  ... %zu more %s%s: %s", rows - n, grouped ? "row" : "site", rows - n == 1 ? "" : "s",
                ot_fmt_bytes(b1, rest));
        if (whole)
            fprintf(o, ", %.1f%%", 100.0 * (double)rest / (double)whole);
        fputs(" (--top)\n", o);
    }
}

