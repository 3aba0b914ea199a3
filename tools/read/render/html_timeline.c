/* The HTML report's timeline card (timeline.h builds the series; the page's script draws them). */
#include "render/html.h"

#include <inttypes.h>
#include <stdlib.h>

#include "render/json_writer.h"
#include "analyze/why.h"

/* Writes the JSON in buf compactly (no whitespace outside strings) with '<', '>' and '&' as \u escapes,
 * so that nothing in it can end the <script> element it sits in. */
static void put_json_for_script(FILE *f, const char *buf, size_t len)
{
    bool in_str = false, esc = false;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            continue;
        }
        if (c == '<')
            fputs("\\u003c", f);
        else if (c == '>')
            fputs("\\u003e", f);
        else if (c == '&')
            fputs("\\u0026", f);
        else
            putc_unlocked(c, f);
    }
}

static int64_t rel_us(const struct ot_snapshot *s, uint64_t t_ns)
{
    uint64_t b = s->meta.start_mono_ns;
    return t_ns >= b ? (int64_t)((t_ns - b) / 1000u) : -(int64_t)((b - t_ns) / 1000u);
}

/* The total level at time t (step-after), for the failure's bar. */
static uint64_t level_at(const struct ot_timeline *tl, uint64_t t)
{
    uint64_t lvl = 0;
    for (size_t p = 0; p < tl->npoints && tl->t_ns[p] <= t; p++) {
        lvl = 0;
        for (size_t k = 0; k < tl->nseries; k++)
            lvl = ot_sat_add(lvl, tl->v[p * tl->nseries + k]);
    }
    return lvl;
}

static int timeline_json(struct hx *h)
{
    const struct ot_snapshot *s = h->s;
    const struct ot_timeline *tl = &h->tl;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return -1;
    struct ot_json j;
    ot_json_init(&j, m);
    ot_json_obj(&j, NULL);
    ot_json_i64(&j, "device", tl->device);
    const struct snap_device *d = ot_snapshot_device(s, tl->device);
    ot_json_u64_or_null(&j, "capacity", d && (d->flags & OT_DEV_MEMINFO_KNOWN) && d->total_bytes, d ? d->total_bytes : 0);
    ot_json_u64(&j, "maxTotal", tl->max_total);
    ot_json_arr(&j, "palette");
    for (size_t i = 0; i < tl->nseries; i++)
        ot_json_cstr(&j, NULL, h_palette[i + 1 == tl->nseries ? OT_TL_TOP : i]);
    ot_json_arr_end(&j);
    ot_json_arr(&j, "t");
    for (size_t p = 0; p < tl->npoints; p++)
        ot_json_i64(&j, NULL, rel_us(s, tl->t_ns[p]));
    ot_json_arr_end(&j);
    /* Each site's bytes at the peak, for the legend, when the series come from the peak. */
    const struct ot_sites *pk = h->a->peak && h->a->peak->has_sites && h->a->peak->device == tl->device ? &h->a->peak->sites : NULL;
    ot_json_arr(&j, "series");
    for (size_t k = 0; k < tl->nseries; k++) {
        bool other = k + 1 == tl->nseries;
        ot_json_obj(&j, NULL);
        ot_json_cstr(&j, "name", other ? (tl->nseries > 1 ? "other sites" : "all sites") :
                                     (h->series_names ? h->series_names[k] : "?"));
        if (!other)
            ot_json_u64(&j, "stack_id", tl->stack_id[k]);
        bool known = false;
        uint64_t at_peak = 0;
        if (pk && !other) {
            for (size_t i = 0; i < pk->n && !known; i++)
                if (pk->v[i].stack_id == tl->stack_id[k]) {
                    known = true;
                    at_peak = pk->v[i].bytes;
                }
        } else if (pk) {
            /* "other": the peak's records of every site that is not a series. */
            known = true;
            for (size_t i = 0; i < pk->n; i++) {
                bool named = false;
                for (size_t q = 0; q + 1 < tl->nseries && !named; q++)
                    named = pk->v[i].stack_id == tl->stack_id[q];
                if (!named)
                    at_peak = ot_sat_add(at_peak, pk->v[i].bytes);
            }
        }
        ot_json_u64_or_null(&j, "peak", known, at_peak);
        ot_json_arr(&j, "v");
        for (size_t p = 0; p < tl->npoints; p++)
            ot_json_u64(&j, NULL, tl->v[p * tl->nseries + k]);
        ot_json_arr_end(&j);
        ot_json_obj_end(&j);
    }
    ot_json_arr_end(&j);
    const struct ot_peak_view *pv = NULL;
    for (size_t i = 0; i < h->a->npeaks; i++)
        if (h->a->peaks[i].device == tl->device)
            pv = &h->a->peaks[i];
    if (pv && pv->time_ns) {
        ot_json_obj(&j, "peak");
        ot_json_i64(&j, "t", rel_us(s, pv->time_ns));
        ot_json_u64(&j, "bytes", pv->bytes);
        ot_json_obj_end(&j);
    } else {
        ot_json_null(&j, "peak");
    }
    if (s->has_failure && s->failure.device == tl->device) {
        ot_json_obj(&j, "failure");
        ot_json_i64(&j, "t", rel_us(s, s->failure.time_ns));
        ot_json_u64(&j, "bytes", s->failure.requested_bytes);
        ot_json_u64(&j, "level", level_at(tl, s->failure.time_ns));
        ot_json_obj_end(&j);
    } else {
        ot_json_null(&j, "failure");
    }
    ot_json_arr(&j, "markers");
    uint64_t lo = tl->npoints ? tl->t_ns[0] : 0, hi = tl->npoints ? tl->t_ns[tl->npoints - 1] : 0;
    size_t shown = 0;
    for (size_t i = 0; i < s->nmarkers; i++) {
        const struct snap_marker *mk = &s->markers[i];
        if (mk->time_ns < lo || mk->time_ns > hi)
            continue;
        /* A marker the statements name is always drawn, and its label always shown (the script places it first). */
        bool cited = ot_why_cites_marker(h->a->why, mk->seq);
        if (!cited && shown >= H_MARKERS_TIMELINE)
            continue;
        ot_json_obj(&j, NULL);
        ot_json_i64(&j, "t", rel_us(s, mk->time_ns));
        ot_json_str(&j, "label", mk->label.p ? mk->label : ot_cstr(""));
        ot_json_bool(&j, "cited", cited);
        ot_json_obj_end(&j);
        shown += !cited;
    }
    ot_json_arr_end(&j);
    ot_json_u64(&j, "dropped", s->meta.events_dropped);
    /* The ring's last event: a failure's chart ends there (or at the failure), not at the snapshot. */
    if (h->a->ev.decoded)
        ot_json_i64(&j, "lastEvent", rel_us(s, h->a->ev.last_time_ns));
    else
        ot_json_null(&j, "lastEvent");
    ot_json_obj_end(&j);
    if (fclose(m) != 0 || !buf) {
        free(buf);
        return -1;
    }
    fputs("<script type=\"application/json\" id=\"oomtrace-data\">", h->f);
    put_json_for_script(h->f, buf, len);
    fputs("</script>\n", h->f);
    free(buf);
    return 0;
}

/* One frame as an HTML list item. */

void h_timeline_section(struct hx *h)
{
    FILE *f = h->f;
    const struct ot_snapshot *s = h->s;
    const struct ot_timeline *tl = &h->tl;
    char b1[32], b2[32], tb[48];
    if (!tl->events && !tl->max_total) {
        /* Nothing live and no event to replay: an empty plot would only repeat its axis; say why instead. */
        const struct ot_meta *m = &s->meta;
        fputs("<section class=\"card\"><h2>Device memory over time</h2>\n<div id=\"timeline\" class=\"empty\" "
              "data-drawn=\"0\" data-empty=\"1\"><p>Nothing to draw: ", f);
        if (!m->events_recorded)
            fputs("this process made no device allocation that oomtrace saw (no allocation or free was recorded, and "
                  "nothing was live at the snapshot).", f);
        else
            fprintf(f, "none of this process's device allocations was live at the snapshot, and the event ring keeps "
                    "no allocation or free on a device (%s events recorded, %s dropped).",
                    ot_fmt_count(b1, m->events_recorded), ot_fmt_count(b2, m->events_dropped));
        fputs("</p></div>\n</section>\n", f);
        return;
    }
    fprintf(f, "<section class=\"card\"><div class=\"controls\"><button id=\"scale\" type=\"button\">Show the device total</button>"
            "</div><h2>Device memory over time<small>device %" PRId64, tl->device);
    const struct snap_device *d = ot_snapshot_device(s, tl->device);
    if (d && d->name.n) {
        fputs(": ", f);
        h_text(f, d->name, 80);
    }
    fputs("; live bytes of this process, stacked by call site</small></h2>\n", f);
    fputs("<div id=\"timeline\" data-drawn=\"0\"><div id=\"tip\"></div></div>\n<div class=\"legend\" id=\"legend\"></div>\n"
          "<noscript><p class=\"note\">The timeline is drawn by the page's script.</p></noscript>\n", f);
    fprintf(f, "<p class=\"note\">Replayed from the event ring: %s allocation and free events on this device",
            ot_fmt_count(b1, tl->events));
    if (tl->downsampled)
        fprintf(f, ", drawn as %zu points (each time slice keeps its lowest and highest level, so the peak is exact)",
                tl->npoints);
    fputs(". The level is anchored at the snapshot: ", f);
    fputs(tl->end_from_live ? "its live allocations" : "the devices' tracked bytes (the snapshot does not record its live set)", f);
    fputs(", minus what the kept events added after each moment. Hover for the breakdown.</p>\n", f);
    const struct ot_meta *m = &s->meta;
    if (m->events_dropped)
        fprintf(f, "<p class=\"note warn\">The ring dropped the oldest %s event%s (%s chunk%s) to stay in its budget: the "
                "timeline starts at the earliest kept event, %s; the level there is what was live then.</p>\n",
                ot_fmt_count(b1, m->events_dropped), m->events_dropped == 1 ? "" : "s",
                ot_fmt_count(b2, m->chunks_dropped), m->chunks_dropped == 1 ? "" : "s",
                ot_fmt_reltime(tb, tl->npoints ? tl->t_ns[0] : 0, m->start_mono_ns));
    if (!(s->seen & (1u << OT_SEC_EVENTS)) || !tl->events)
        fputs("<p class=\"note warn\">No allocation events of this device are in the ring: the timeline is flat at "
              "the snapshot's level.</p>\n", f);
    if (tl->unmatched_frees)
        fprintf(f, "<p class=\"note\">%s %s made before the ring's first event; %s counted in \"other "
                "sites\".</p>\n", ot_fmt_count(b1, tl->unmatched_frees),
                tl->unmatched_frees == 1 ? "free is of an allocation" : "frees are of allocations",
                tl->unmatched_frees == 1 ? "it is" : "they are");
    if (tl->cut_ends)
        fprintf(f, "<p class=\"note warn\">%s context end%s of this device freed allocations that the snapshot does not "
                "list (it keeps the lists of the latest context ends, each up to a bound): the levels before %s cannot "
                "be told, so the timeline starts just after the last, at %s (seq %" PRIu64 ").</p>\n",
                ot_fmt_count(b1, tl->cut_ends), tl->cut_ends == 1 ? "" : "s", tl->cut_ends == 1 ? "it" : "them",
                ot_fmt_reltime(tb, tl->cut_t_ns, m->start_mono_ns), tl->cut_seq);
    if (tl->negative) /* the notes are where the analysis said why, when it did */
        fprintf(f, "<p class=\"note warn\">The events and the live set disagree (a level fell below zero and is drawn "
                "as zero).%s</p>\n", h->a->notes.n ? " The notes below may say why." : "");
    timeline_json(h);
    fputs("</section>\n", f);
}
