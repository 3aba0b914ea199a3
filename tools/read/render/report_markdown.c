/* The markdown report: a short summary for a CI job summary (GitHub's $GITHUB_STEP_SUMMARY): what
 * failed, the devices, a table of the top call sites at the --at moment (default: the peak), the
 * "why" statements and the ring's counts. GitHub-flavoured markdown; every snapshot string is escaped
 * so that it renders as text, whatever it holds. */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "render/sitelabel.h"
#include "analyze/breakdown.h"
#include "render/bdcell.h"
#include "render/devrow.h"
#include "analyze/why.h"
#include "render/doc.h"
#include "render/fwview.h"
#include "render/wording.h"

#define MD_NAME_MAX 160 /* bytes of one frame name in a label */
#define MD_DEVICES_MAX 16
#define MD_MARKERS 3

struct md {
    FILE *f;
    const struct ot_analysis *a;
    const struct ot_snapshot *s;
    const struct ot_report_opts *o;
};

static void title(struct md *m)
{
    const struct ot_meta *mt = &m->s->meta;
    FILE *f = m->f;
    const char *what = ot_snapshot_title(m->s, false);
    const char *stopped = ot_flush_stopped_by(m->s);
    if (what)
        fprintf(f, "## oomtrace: %s%s%s\n\n", what, stopped ? ", stopped by " : "", stopped ? stopped : "");
    else
        fprintf(f, "## oomtrace: snapshot (unknown trigger %" PRIu64 ")\n\n", mt->trigger);

    struct ot_doc d = {.f = f, .kind = OT_DOC_MARKDOWN};
    ot_doc_subtitle(&d, m->s);
    fputs("\n\n", f);
}

static void failure(struct md *m, const struct ot_failure_words *w)
{
    FILE *f = m->f;
    fprintf(f, "**Failed request:** %s by `%s` on %s (%s), `%s`", w->bytes, w->api, w->where,
            ot_category_name64(w->x->category), w->result);
    if (w->meminfo)
        fprintf(f, ": %s free of %s", w->free, w->total);
    if (*w->shortfall)
        fprintf(f, ", %s short", w->shortfall);
    fputs(".  \nAllocated at ", f);
    char *fl = ot_lbl_failure(m->a, w->x->stack_id, m->o->top, MD_NAME_MAX);
    ot_md_code(f, ot_cstr(fl ? fl : "?"), 0, false);
    if (!ot_lbl_ends_with_stack(fl, w->x->stack_id))
        fprintf(f, " (stack %" PRIu64 ")", w->x->stack_id);
    free(fl);
    fputs("\n\n", f);
    struct ot_doc doc = {.f = f, .kind = OT_DOC_MARKDOWN};
    ot_fwview_failure_doc(&doc, m->a);
}

static void breakdown(struct md *m)
{
    const struct ot_breakdown *b = m->a->breakdown;
    if (!b || !b->has_device || (!b->now.known && !b->peak.known))
        return;
    if (b->nothing_held[0]) {
        fprintf(m->f, "**What held the memory on device %" PRId64 ":** %s.\n\n", b->device, b->nothing_held);
        return;
    }
    char wholes[256];
    ot_bd_wholes(wholes, sizeof(wholes), b);
    const char *why = ot_bd_inferred_why(b);
    fprintf(m->f, "**What held the memory on device %" PRId64 "**%s%s%s%s%s\n\n", b->device,
            why ? " (inferred from the allocations' stacks and libraries; " : "", why ? why : "", why ? ")" : "",
            *wholes ? ": " : "", wholes);
    struct ot_doc d = {.f = m->f, .kind = OT_DOC_MARKDOWN};
    ot_bd_table(&d, b);
}

static void statements(struct md *m, const struct ot_why *w, const char *title)
{
    if (!w || !w->n)
        return;
    fprintf(m->f, "**%s:**\n\n", title);
    for (size_t i = 0; i < w->n; i++) {
        fputs("- ", m->f);
        ot_md_text(m->f, ot_cstr(w->v[i].text ? w->v[i].text : ""), 600);
        fputc('\n', m->f);
    }
    fputc('\n', m->f);
}

static void devices(struct md *m)
{
    const struct ot_snapshot *s = m->s;
    FILE *f = m->f;
    if (!s->ndevices)
        return;
    fputs("| Device | Name | Total | Free | Tracked | Peak | Baseline | Other processes |\n", f);
    fputs("|--:|---|--:|--:|--:|--:|--:|--:|\n", f);
    for (size_t i = 0; i < s->ndevices && i < MD_DEVICES_MAX; i++) {
        const struct snap_device *d = &s->devices[i];
        fprintf(f, "| %" PRId64 " | ", d->ordinal);
        ot_md_text(f, d->name.n ? d->name : ot_cstr("?"), 64);
        struct ot_devrow r;
        ot_devrow_of(s, d, &r);
        for (int c = 0; c <= OT_DEVROW_OTHERS; c++) /* markdown's table has no pools column */
            fprintf(f, " | %s", r.cell[c][0] ? r.cell[c] : "\xe2\x80\x93"); /* "–" */
        fputs(" |\n", f);
    }
    if (s->ndevices > MD_DEVICES_MAX)
        fprintf(f, "\n%zu more devices: see the text report.\n", s->ndevices - MD_DEVICES_MAX);
    fputs("\nTotal and free: cuMemGetInfo when the snapshot was written. Tracked: this process's live allocations "
          "counted by oomtrace. Baseline: used before its first allocation.\n\n", f);
}

static void sites(struct md *m)
{
    FILE *f = m->f;
    struct ot_site_table t;
    struct ot_doc d = {.f = f, .kind = OT_DOC_MARKDOWN};
    if (!ot_site_table_head(&d, m->a, m->o, MD_NAME_MAX, &t))
        return;
    fputs("| # | Bytes | Count | Share | Where |\n|--:|--:|--:|--:|---|\n", f);
    struct ot_site_row r;
    for (size_t i = 0; ot_site_table_row(&t, i, &r); i++) {
        if (!r.site) {
            fprintf(f, "| | %s | | %s | %zu more %s%s |\n", r.bytes, r.share, r.nrest, r.rest_word, r.nrest == 1 ? "" : "s");
            continue;
        }
        fprintf(f, "| %zu | %s | %s | %s | ", r.rank, r.bytes, r.count, *r.share ? r.share : "\xe2\x80\x93");
        ot_md_code(f, ot_cstr(r.label), 0, true);
        if (r.nsites > 1)
            fprintf(f, " (%zu call sites: %s)", r.nsites, r.stacks);
        else
            fprintf(f, " (%s)", r.stacks);
        fputs(" |\n", f);
    }
    fputc('\n', f);
    ot_site_table_close(&t);

    /* The last markers before the moment: where in the program it happened. */
    if (t.mo.at != OT_AT_LIVE) {
        size_t first, k = ot_markers_before(m->s, t.mo.seq, MD_MARKERS, &first);
        if (k) {
            fputs(k == 1 ? "Last marker before it: " : "Last markers before it: ", f);
            for (size_t i = first; i < first + k; i++) {
                if (i > first)
                    fputs(", ", f);
                ot_md_code(f, m->s->markers[i].label, 80, false);
            }
            fputs("\n\n", f);
        }
    }
}

static void events(struct md *m)
{
    const struct ot_meta *mt = &m->s->meta;
    const struct ot_event_stats *e = &m->a->ev;
    FILE *f = m->f;
    char b1[32], b2[32], b3[32];
    fprintf(f, "**Events:** %s recorded, %s kept in the ring, %s dropped", ot_fmt_count(b1, mt->events_recorded),
            ot_fmt_count(b2, mt->events_kept), ot_fmt_count(b3, mt->events_dropped));
    if (e->decoded) {
        fputs(" · ", f);
        for (int k = 1; k <= OT_EV_KIND_MAX; k++)
            if (k != OT_EV_CONTEXT_END || e->by_kind[k]) /* named only where a context ended */
                fprintf(f, "%s%s %s", k > 1 ? ", " : "", ot_event_kind_words(k), ot_fmt_count(b1, e->by_kind[k]));
    }
    fputs("\n", f);
    if (m->a->notes.n)
        fprintf(f, "\n%zu note%s on this snapshot's consistency: see `oomtrace-read` text output.\n", m->a->notes.n,
                m->a->notes.n == 1 ? "" : "s");
}

int ot_report_markdown(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    struct md m = {f, a, a->s, o};
    title(&m);
    struct ot_failure_words w;
    if (ot_failure_words_of(a, &w))
        failure(&m, &w);
    breakdown(&m);
    statements(&m, m.a->why, "Why");
    statements(&m, m.a->remedies, "What to try");
    ot_fwview_markdown(f, a, o->top);
    devices(&m);
    sites(&m);
    events(&m);
    return ferror(f) ? -1 : 0;
}
