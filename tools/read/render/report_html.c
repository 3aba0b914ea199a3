/* The HTML report: one self-contained page (inline CSS and JavaScript, nothing fetched) holding the
 * failed request, the "why" statements, a timeline of live device bytes stacked by the top call sites
 * (timeline.h), the site table of the --at moment (default: the peak) with expandable stacks, the
 * devices, the ring's counts, the markers and the notes.
 *
 * Tables and text are HTML written here, readable without JavaScript. The timeline is drawn in the
 * browser, as SVG, from a JSON blob embedded in a <script type="application/json"> element; in that
 * blob '<', '>' and '&' are written as \u003c, \u003e and \u0026, so no string can close the element.
 * The page's script sets data-drawn="N" on #timeline, N the number of series drawn, once it is done. */
#include "render/html.h"

#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "render/json_writer.h"
#include "render/sitelabel.h"
#include "render/devrow.h"
#include "render/doc.h"
#include "render/wording.h"
#include "analyze/stackview.h"
#include "analyze/timeline.h"
#include "analyze/breakdown.h"
#include "analyze/why.h"

/* One byte of text outside UTF-8 sequences, escaped for HTML (h_text). */
static void h_ascii(FILE *f, unsigned c, void *ctx)
{
    (void)ctx;
    static const char *const entity[128] = {['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;",
                                            ['\''] = "&#39;"};
    if (c < 128 && entity[c])
        fputs(entity[c], f);
    else if (c < 0x20 || c == 0x7f)
        fprintf(f, "\\x%02x", c);
    else
        putc_unlocked((int)c, f);
}

void h_text(FILE *f, struct ot_str s, size_t max_bytes)
{
    if (ot_fput_markup(f, s, max_bytes, "\\x%02x", h_ascii, NULL))
        fputs("...", f);
}

void h_cstr(FILE *f, const char *s)
{
    h_text(f, ot_cstr(s), 0);
}

static void frame_li(struct hx *h, const struct ot_frame *fr)
{
    FILE *f = h->f;
    if (fr->kind == OT_FRAME_PY) {
        fputs("<li class=\"py\"><b>", f);
        h_text(f, fr->function.p ? fr->function : ot_cstr("?"), 1024);
        fputs("</b> <span class=\"loc\">", f);
        h_text(f, fr->file.p ? fr->file : ot_cstr("?"), 1024);
        if (fr->has_line)
            fprintf(f, ":%" PRIu64, fr->line);
        fputs("</span></li>", f);
        return;
    }
    fputs(ot_frame_is_plumbing(fr) ? "<li class=\"dim\">" : "<li>", f);
    if (fr->function.p && fr->function.n) {
        h_text(f, fr->function, 2048);
        if (fr->has_offset && !fr->symbolized)
            fprintf(f, "+0x%" PRIx64, fr->offset);
    } else {
        fprintf(f, "0x%" PRIx64, fr->address);
    }
    fputs(" <span class=\"loc\">(", f);
    if (fr->symbolized && fr->file.p) {
        h_text(f, fr->file, 1024);
        if (fr->has_line)
            fprintf(f, ":%" PRIu64, fr->line);
    } else if (fr->module.p) {
        h_text(f, ot_lbl_basename(fr->module), 256);
        if (!fr->function.p && fr->has_module_offset)
            fprintf(f, "+0x%" PRIx64, fr->module_offset);
    } else {
        fputs("no module", f);
    }
    fputs(fr->inlined ? ") inlined</span></li>" : ")</span></li>", f);
}

static void stack_list(struct hx *h, uint64_t stack_id)
{
    FILE *f = h->f;
    const struct ot_stack *st = ot_snapshot_stack(h->s, stack_id);
    if (!st) {
        fprintf(f, "<p class=\"note\">Stack %" PRIu64 " is not among the snapshot's recorded stacks.</p>", stack_id);
        return;
    }
    fputs("<ol class=\"stack\" start=\"0\">", f);
    size_t total = 0;
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, h->a->res, st, OT_WALK_ALL); ot_walk_next(&w); total++)
        if (w.depth < H_FRAMES_MAX)
            frame_li(h, w.f);
    fputs("</ol>", f);
    if (total > H_FRAMES_MAX)
        fprintf(f, "<p class=\"note\">%zu more frames not shown.</p>", total - H_FRAMES_MAX);
    if (st->flags & OT_STACK_TRUNCATED)
        fputs("<p class=\"note\">The tracer cut this stack at its maximum depth.</p>", f);
    fputs("<p class=\"note\">Innermost first; grey: CUDA runtime, allocator and interpreter frames.</p>", f);
}

static void header(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_meta *m = &h->s->meta;
    const char *w = ot_snapshot_title(h->s, false);
    if (!w)
        w = "snapshot (unknown trigger)";
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>oomtrace: ", f);
    h_cstr(f, w);
    fprintf(f, " (pid %" PRIu64 " on ", m->pid);
    h_text(f, m->host.n ? m->host : ot_cstr("?"), 128);
    fputs(")</title>\n<style>\n", f);
    fputs(h_css, f);
    for (size_t i = 0; i <= OT_TL_TOP; i++)
        fprintf(f, ".s%zu{background:%s}\n", i, h_palette[i]);
    for (size_t i = 0; i < OT_BD_NROWS; i++)
        fprintf(f, ".bd%zu{background:%s}\n", i, h_bd_palette[i]);
    fputs("</style>\n</head>\n<body>\n<header><h1>oomtrace: ", f);
    h_cstr(f, w);
    if (ot_flush_stopped_by(h->s)) {
        fputs(", stopped by ", f);
        h_cstr(f, ot_flush_stopped_by(h->s));
    }
    fputs("</h1><p class=\"sub\">", f);
    struct ot_doc d = {.f = f, .kind = OT_DOC_HTML};
    ot_doc_subtitle(&d, h->s);
    fputs("</p></header>\n<main>\n", f);
}

static void failure(struct hx *h, const struct ot_failure_words *w)
{
    FILE *f = h->f;
    const struct snap_failure *x = w->x;
    char b2[32], tb[48];
    fprintf(f, "<section class=\"card fail\"><h2>Failed request</h2><p class=\"big\"><b>%s</b> (%s bytes) by <code>%s</code> "
            "on %s, category %s, returned <code>%s</code> at %s (seq %" PRIu64 ", thread %" PRIu64, w->bytes,
            ot_fmt_count(b2, x->requested_bytes), w->api, w->where, ot_category_name64(x->category), w->result,
            ot_fmt_reltime(tb, x->time_ns, h->s->meta.start_mono_ns), x->seq, x->tid);
    const struct snap_thread *th = ot_snapshot_thread(h->s, x->tid);
    if (th) {
        fputs(" (", f);
        h_text(f, th->name, 64);
        fputc(')', f);
    }
    fputs(").</p>", f);
    h_fw_failure(h);
    if (w->meminfo) {
        fprintf(f, "<p>The device had %s free of %s total (cuMemGetInfo at the snapshot)", w->free, w->total);
        if (*w->shortfall)
            fprintf(f, ": <b>%s short</b>", w->shortfall);
        fputs(".</p>", f);
    }
    fputs("<details><summary>Allocated at <code>", f);
    char *fl = ot_lbl_failure(h->a, x->stack_id, h->o->top, H_NAME_MAX);
    h_cstr(f, fl ? fl : "?");
    fputs("</code>", f);
    if (!ot_lbl_ends_with_stack(fl, x->stack_id))
        fprintf(f, " (stack %" PRIu64 ")", x->stack_id);
    free(fl);
    fputs("</summary>", f);
    stack_list(h, x->stack_id);
    fputs("</details></section>\n", f);
}

static void sites_section(struct hx *h)
{
    FILE *f = h->f;
    struct ot_site_table t;
    struct ot_doc d = {.f = f, .kind = OT_DOC_HTML};
    fputs("<section class=\"card\" id=\"sites\">", f);
    if (!ot_site_table_head(&d, h->a, h->o, H_NAME_MAX, &t)) {
        fputs("</section>\n", f);
        return;
    }
    fputs("<table class=\"sites\"><thead><tr><th class=\"num\">#</th><th class=\"num\">Bytes</th><th class=\"num\">"
          "Allocations</th><th class=\"num\">Share</th><th>Where (click for the stack)</th></tr></thead><tbody>\n", f);
    /* A site drawn in the timeline carries its colour there. */
    bool same_device = h->has_tl && (t.mo.at == OT_AT_LIVE || t.mo.device == h->tl.device);
    struct ot_site_row r;
    for (size_t i = 0; ot_site_table_row(&t, i, &r); i++) {
        if (!r.site) {
            fprintf(f, "<tr><td></td><td class=\"num\">%s</td><td></td><td class=\"num\">%s</td><td>%zu more %s%s "
                    "(--top)</td></tr>\n", r.bytes, r.share, r.nrest, r.rest_word, r.nrest == 1 ? "" : "s");
            continue;
        }
        int series = -1;
        for (size_t k = 0; same_device && k + 1 < h->tl.nseries; k++)
            if (h->tl.stack_id[k] == r.site->stack_id)
                series = (int)k;
        fprintf(f, "<tr><td class=\"num\">%zu</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">",
                r.rank, r.bytes, r.count);
        if (*r.share)
            fprintf(f, "%s<div class=\"bar\"><i style=\"width:%.1f%%\"></i></div>", r.share,
                    r.share_pct > 100 ? 100.0 : r.share_pct);
        else
            fputs("&ndash;", f);
        fputs("</td><td><details><summary>", f);
        if (series >= 0)
            fprintf(f, "<span class=\"sw s%d\" title=\"its colour in the timeline\"></span>", series);
        fputs("<code>", f);
        h_cstr(f, r.label);
        fputs("</code>", f);
        if (r.nsites > 1)
            fprintf(f, " (%zu call sites; the largest one's stack)", r.nsites);
        fprintf(f, " <span class=\"note\">stack %" PRIu64 "</span></summary>", r.site->stack_id);
        stack_list(h, r.site->stack_id);
        fputs("</details></td></tr>\n", f);
    }
    fputs("</tbody></table></section>\n", f);
    ot_site_table_close(&t);
}

static void devices_section(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_snapshot *s = h->s;
    char b[32], ub[80];
    fputs("<section class=\"card\"><h2>Devices<small>total and free: cuMemGetInfo at the snapshot; tracked: this "
          "process's live allocations counted by oomtrace</small></h2>\n", f);
    if (!s->ndevices) {
        fputs("<p>The snapshot records no devices.</p></section>\n", f);
        return;
    }
    fputs("<table><thead><tr><th>Device</th><th>Name</th><th class=\"num\">Total</th><th class=\"num\">Free</th>"
          "<th class=\"num\">Tracked</th><th class=\"num\">Peak</th><th class=\"num\">Baseline</th>"
          "<th class=\"num\">Other processes</th><th class=\"num\">Pools reserved</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < s->ndevices && i < 256; i++) {
        const struct snap_device *d = &s->devices[i];
        fprintf(f, "<tr><td>%" PRId64 "</td><td>", d->ordinal);
        h_text(f, d->name.n ? d->name : ot_cstr("?"), 80);
        const char *uuid = ot_fmt_uuid(ub, d->uuid);
        if (uuid) {
            fputs(" <span class=\"note mono\">", f);
            h_cstr(f, uuid);
            fputs("</span>", f);
        }
        fputs("</td>", f);
        struct ot_devrow r;
        ot_devrow_of(s, d, &r);
        for (int c = 0; c < OT_DEVROW_NCOLS; c++)
            fprintf(f, "<td class=\"num\">%s</td>", r.cell[c][0] ? r.cell[c] : "&ndash;");
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>", f);
    if (s->ndevices > 256)
        fprintf(f, "<p class=\"note\">%zu more devices.</p>", s->ndevices - 256);
    fprintf(f, "<p class=\"note\">Host pinned memory (never in device totals): %s.", ot_fmt_bytes(b, h->a->host_pinned_bytes));
    const struct ot_analysis *a = h->a;
    if (a->imported_count) {
        char words[256];
        ot_imported_words(a, words, sizeof words);
        fprintf(f, " Imported memory (another process's allocations mapped here, not counted): %s.", words);
    }
    fputs("</p></section>\n", f);
}

static void events_section(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_snapshot *s = h->s;
    const struct ot_meta *m = &s->meta;
    const struct ot_event_stats *e = &h->a->ev;
    char b1[32], b2[32], b3[32], t1[48], t2[48];
    fprintf(f, "<section class=\"card\"><h2>Events and markers</h2><p>%s recorded, %s kept in the ring, %s dropped",
            ot_fmt_count(b1, m->events_recorded), ot_fmt_count(b2, m->events_kept), ot_fmt_count(b3, m->events_dropped));
    if (e->decoded) {
        fprintf(f, "; the ring holds seq %" PRIu64 "..%" PRIu64 ", %s..%s: ", e->first_seq, e->last_seq,
                ot_fmt_reltime(t1, e->first_time_ns, m->start_mono_ns), ot_fmt_reltime(t2, e->last_time_ns, m->start_mono_ns));
        for (int k = 1; k <= OT_EV_KIND_MAX; k++)
            if (k != OT_EV_CONTEXT_END || e->by_kind[k]) /* named only where a context ended */
                fprintf(f, "%s%s %s", k > 1 ? ", " : "", ot_event_kind_words(k), ot_fmt_count(b1, e->by_kind[k]));
    }
    fputs(".</p>\n", f);
    if (s->nmarkers) {
        size_t first = s->nmarkers > H_MARKERS_LISTED ? s->nmarkers - H_MARKERS_LISTED : 0;
        fprintf(f, "<details%s><summary>%zu marker%s (oomtrace_mark)%s</summary><table><thead><tr><th class=\"num\">Seq</th>"
                "<th class=\"num\">Time</th><th class=\"num\">Thread</th><th>Label</th></tr></thead><tbody>\n",
                s->nmarkers <= 12 ? " open" : "", s->nmarkers, s->nmarkers == 1 ? "" : "s",
                first ? ", the latest shown" : "");
        for (size_t i = first; i < s->nmarkers; i++) {
            const struct snap_marker *mk = &s->markers[i];
            fprintf(f, "<tr><td class=\"num\">%" PRIu64 "</td><td class=\"num\">%s</td><td class=\"num\">%" PRIu64 "</td><td>",
                    mk->seq, ot_fmt_reltime(t1, mk->time_ns, m->start_mono_ns), mk->tid);
            h_text(f, mk->label, 512);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table></details>\n", f);
    }
    fputs("</section>\n", f);
}

static void notes_section(struct hx *h)
{
    const struct ot_notes *n = &h->a->notes;
    FILE *f = h->f;
    if (n->n) {
        fputs("<section class=\"card\"><h2>Notes</h2><ul class=\"why\">", f);
        for (size_t i = 0; i < n->n; i++) {
            fputs("<li>", f);
            h_cstr(f, n->v[i]);
            fputs("</li>", f);
        }
        fputs("</ul></section>\n", f);
    }
    fputs("<footer>Written by oomtrace-read from ", f);
    h_cstr(f, h->o->path ? h->o->path : "?");
    fputs(". Sizes: KiB/MiB/GiB = 2<sup>10</sup>/2<sup>20</sup>/2<sup>30</sup> bytes; times: seconds since the tracer "
          "started (CLOCK_MONOTONIC).</footer>\n", f);
}

int ot_report_html(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    struct hx h = {.f = f, .a = a, .s = a->s, .o = o};
    char err[OT_ERRBUF];
    if (ot_timeline_of(&h.tl, a, H_POINTS, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s\n", err);
        return -1;
    }
    h.has_tl = true;
    size_t nnamed = h.tl.nseries - 1;
    h.series_names = nnamed ? ot_lbl_sites(a, h.tl.top->v, nnamed, H_NAME_MAX) : NULL;

    header(&h);
    if (o->prelude)
        o->prelude(f, o->prelude_ctx);
    struct ot_failure_words w;
    if (ot_failure_words_of(a, &w))
        failure(&h, &w);
    h_breakdown_section(&h);
    h_timeline_section(&h);
    h_statements(&h, a->why, "why", "Why");
    h_statements(&h, a->remedies, "remedies", "What to try");
    h_allocator_section(&h);
    sites_section(&h);
    devices_section(&h);
    events_section(&h);
    notes_section(&h);
    fputs("</main>\n<script>\n", f);
    fputs(h_script, f);
    fputs("</script>\n</body>\n</html>\n", f);

    ot_strv_free(h.series_names, nnamed);
    ot_timeline_free(&h.tl);
    ot_sb_free(&h.sb);
    return ferror(f) ? -1 : 0;
}
