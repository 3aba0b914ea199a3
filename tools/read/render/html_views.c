/* The HTML report's cards built from analyze/'s summaries: "What held the memory" (analyze/breakdown.h) as
 * two stacked bars, at the failure (or the snapshot) and at the peak, with a legend carrying bytes and
 * shares; the statements (Why, What to try); and the allocator's view (analyze/allocview.h), with the
 * same table the markdown report shows and the failed request drawn against the largest free block.
 *
 * Bars are plain HTML (widths in percent), so they are there without the page's script. A segment's
 * share is written inside it only when the segment is wide enough to hold it (BD_LABEL_MIN_PCT). */
#include "render/html.h"

#include <inttypes.h>

#include "analyze/breakdown.h"
#include "analyze/why.h"
#include "render/bdcell.h"
#include "render/fwview.h"

#define BD_LABEL_MIN_PCT 7.0

const char *const h_bd_palette[OT_BD_NROWS] = {
    [OT_BD_PARAMETERS] = "#4e79a7", [OT_BD_GRADIENTS] = "#59a14f", [OT_BD_OPTIMIZER] = "#f28e2b",
    [OT_BD_BUFFERS] = "#76b7b2",    [OT_BD_ACTIVATIONS] = "#e15759", [OT_BD_WORKSPACES] = "#b07aa1", [OT_BD_PROGRAM] = "#ff9da7",
    [OT_BD_CACHE] = "#edc948",      [OT_BD_CONTEXT] = "#bab0ac",   [OT_BD_OTHERS] = "#9c755f",
};

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0;
}

/* One moment as a stacked bar: each measured category's share of the moment's whole. */
static void bd_bar(FILE *f, const struct ot_breakdown *bd, const struct ot_bd_moment *m, const char *moment,
                   const char *title)
{
    char b[32];
    fprintf(f, "<div class=\"bdrow\" data-moment=\"%s\"><div class=\"bdname\">%s<br><b>%s</b></div><div class=\"bdbar\">",
            moment, title, ot_fmt_bytes(b, m->whole));
    double left = 100.0;
    for (int r = 0; r < OT_BD_NROWS && m->whole; r++) {
        if (!m->measured[r] || !m->bytes[r])
            continue;
        double w = pct(m->bytes[r], m->whole);
        if (w > left)
            w = left;
        left -= w;
        fprintf(f, "<i class=\"bd%d\" style=\"width:%.3f%%\" title=\"%s%s: %s, %.1f%%\">", r, w,
                ot_bd_row_name(bd, (enum ot_bd_row)r), m->inferred[r] ? " (inferred)" : "", ot_fmt_bytes(b, m->bytes[r]),
                pct(m->bytes[r], m->whole));
        if (w >= BD_LABEL_MIN_PCT)
            fprintf(f, "<span>%.0f%%</span>", pct(m->bytes[r], m->whole));
        fputs("</i>", f);
    }
    fputs("</div></div>\n", f);
}

void h_breakdown_section(struct hx *h)
{
    const struct ot_breakdown *b = h->a->breakdown;
    FILE *f = h->f;
    if (!b || !b->has_device || (!b->now.known && !b->peak.known))
        return;
    if (b->nothing_held[0]) {
        fprintf(f, "<section class=\"card\" id=\"breakdown\"><h2>What held the memory<small>device %" PRId64
                "</small></h2><p>", b->device);
        h_cstr(f, b->nothing_held);
        fputs(".</p></section>\n", f);
        return;
    }
    char wholes[256];
    ot_bd_wholes(wholes, sizeof(wholes), b);
    fprintf(f, "<section class=\"card\" id=\"breakdown\"><h2>What held the memory<small>device %" PRId64 "%s%s", b->device,
            *wholes ? "; " : "", wholes);
    const char *why = ot_bd_inferred_why(b);
    if (why) {
        fputs("; inferred from the allocations' stacks and libraries (", f);
        h_cstr(f, why);
        fputc(')', f);
    }
    fputs("</small></h2>\n<div class=\"bd\">\n", f);
    if (b->now.known)
        bd_bar(f, b, &b->now, b->at_failure ? "failure" : "snapshot", b->at_failure ? "At the failure" : "At the snapshot");
    if (b->peak.known)
        bd_bar(f, b, &b->peak, "peak", "At the peak");
    fputs("</div>\n", f);
    struct ot_doc d = {.f = f, .kind = OT_DOC_HTML, .table_class = "bdleg"};
    ot_bd_table(&d, b);
    fputs("</section>\n", f);
}

void h_statements(struct hx *h, const struct ot_why *w, const char *id, const char *title)
{
    if (!w || !w->n)
        return;
    fprintf(h->f, "<section class=\"card\" id=\"%s\"><h2>%s</h2><ul class=\"why\">", id, title);
    for (size_t i = 0; i < w->n; i++) {
        fprintf(h->f, "<li data-kind=\"%s\">", w->v[i].kind ? w->v[i].kind : "");
        h_cstr(h->f, w->v[i].text ? w->v[i].text : "");
        fputs("</li>", h->f);
    }
    fputs("</ul></section>\n", h->f);
}

/* One framework's reserved bytes as a bar: allocated, then free inside its segments. */
static void fw_reserved_bar(FILE *f, const struct ot_fw_devview *d, const char *name)
{
    char b1[32], b2[32], b3[32];
    uint64_t whole = d->allocated_bytes + d->free_bytes;
    fprintf(f, "<div class=\"fwbar\"><div class=\"fwlab\">%s, device %" PRIu64 ": %s reserved</div><div class=\"bdbar\">",
            name, d->device, ot_fmt_bytes(b1, d->reserved_bytes));
    if (whole) {
        double wa = pct(d->allocated_bytes, whole);
        fprintf(f, "<i class=\"fwalloc\" style=\"width:%.3f%%\" title=\"allocated %s\"></i>", wa, ot_fmt_bytes(b2, d->allocated_bytes));
        fprintf(f, "<i class=\"fwfree\" style=\"width:%.3f%%\" title=\"free inside segments %s\"></i>", 100.0 - wa,
                ot_fmt_bytes(b3, d->free_bytes));
    }
    fprintf(f, "</div><div class=\"note\"><span class=\"sw fwalloc\"></span>allocated %s &middot; <span class=\"sw fwfree\">"
            "</span>free inside segments %s</div></div>\n", ot_fmt_bytes(b2, d->allocated_bytes), ot_fmt_bytes(b3, d->free_bytes));
}

/* The failed request against the largest free block, on one scale. */
static void fw_request_bars(FILE *f, uint64_t request, uint64_t largest)
{
    char b[32];
    uint64_t top = request > largest ? request : largest;
    if (!top)
        return;
    fprintf(f, "<div class=\"req\"><div class=\"reqrow\"><span class=\"lab\">failed request</span><div class=\"track\">"
            "<i class=\"reqbar\" style=\"width:%.3f%%\"></i></div><b>%s</b></div>", pct(request, top), ot_fmt_bytes(b, request));
    fprintf(f, "<div class=\"reqrow\"><span class=\"lab\">largest free block</span><div class=\"track\">"
            "<i class=\"freebar\" style=\"width:%.3f%%\"></i></div><b>%s</b></div></div>\n", pct(largest, top),
            ot_fmt_bytes(b, largest));
}

/* PyTorch's table, its note on the largest free block, and each device's reserved bar. */
static void fw_table(FILE *f, const struct ot_allocview *v)
{
    char cells[OT_FWVIEW_NCOLS][OT_FWVIEW_CELL];
    fputs("<table class=\"fw\"><thead><tr>", f);
    for (int c = 0; c < OT_FWVIEW_NCOLS; c++)
        fprintf(f, "<th%s>%s</th>", c >= 1 && c <= 6 ? " class=\"num\"" : "", ot_fwview_columns[c]);
    fputs("</tr></thead><tbody>\n", f);
    for (size_t i = 0; i < v->ndevs; i++) {
        ot_fwview_cells(&v->devs[i], cells);
        fputs("<tr>", f);
        for (int c = 0; c < OT_FWVIEW_NCOLS; c++)
            fprintf(f, "<td%s>%s</td>", c >= 1 && c <= 6 ? " class=\"num\"" : "", cells[c]);
        fputs("</tr>\n", f);
    }
    fprintf(f, "</tbody></table>\n<p class=\"note\">%s</p>\n", ot_fwview_largest_note);
    for (size_t i = 0; i < v->ndevs; i++) {
        ot_fwview_cells(&v->devs[i], cells);
        fw_reserved_bar(f, &v->devs[i], cells[0]);
    }
}

void h_allocator_section(struct hx *h)
{
    const struct ot_allocview *v = ot_fwview_shown(h->a);
    FILE *f = h->f;
    if (!v)
        return;
    fprintf(f, "<section class=\"card\" id=\"allocator\"><h2>Allocator's view%s<small>as the frameworks reported it",
            v->earlier ? ", earlier" : "");
    if (v->info) {
        char tb[48];
        fputs(": ", f);
        struct ot_doc d = {.f = f, .kind = OT_DOC_HTML};
        ot_fwview_reporters(&d, v);
        fprintf(f, ", %s", ot_fmt_reltime(tb, v->info->taken_ns, h->s->meta.start_mono_ns));
    }
    fputs("</small></h2>\n", f);
    if (v->earlier) {
        char words[512];
        ot_fwview_earlier_words(words, sizeof(words), h->a);
        fputs("<p class=\"note\">The frameworks' last report, ", f); /* words: plain text, names made safe */
        h_text(f, ot_cstr(words), sizeof(words));
        fputs(".</p>\n", f);
    }
    if (!v->ndevs && !ot_fwview_says_more(h->a, v)) {
        fputs("<p>It reported no device memory of its own.</p>\n</section>\n", f);
        return;
    }
    if (v->ndevs)
        fw_table(f, v);
    struct ot_doc d = {.f = f, .kind = OT_DOC_HTML};
    ot_fwview_items_doc(&d, h->a, h->o->top);
    char line[512];
    size_t it = 0;
    for (const struct ot_fw_devview *dv; (dv = ot_fwview_failing(h->a, &it));) {
        fw_request_bars(f, h->s->failure.requested_bytes, dv->largest_free);
        ot_fwview_request_sentence(line, sizeof(line), h->a, dv);
        fprintf(f, "<p>%s</p>\n", line);
    }
    fputs("</section>\n", f);
}

void h_fw_failure(struct hx *h)
{
    struct ot_doc d = {.f = h->f, .kind = OT_DOC_HTML};
    ot_fwview_failure_doc(&d, h->a);
}
