/* The text report. Order is the reading order of someone whose job just died: what failed, on which
 * device and with how much free, then who held the memory at the peak and at the failure, then
 * context (events, markers), then caveats. */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "render/bdcell.h"
#include "render/fwview.h"
#include "render/wording.h"
#include "render/report.h"
#include "render/sitetable.h"
#include "analyze/breakdown.h"
#include "analyze/stackview.h"
#include "analyze/why.h"

#define OT_MARKERS_SHOWN 5

struct tx {
    FILE *f;
    const struct ot_analysis *a;
    const struct ot_snapshot *s;
    const struct ot_report_opts *o;
};

static void put(struct tx *t, struct ot_str s)
{
    ot_fput_safe_max(t->f, s, 512);
}


static const char *dev_name(char *buf, int64_t d)
{
    if (d == -1)
        snprintf(buf, 32, "host");
    else
        snprintf(buf, 32, "device %" PRId64, d);
    return buf;
}

static const char *reltime(char *buf, const struct ot_snapshot *s, uint64_t t)
{
    return ot_fmt_reltime(buf, t, s->meta.start_mono_ns);
}


/* A context's end in the user's words: which context ended and how, when, and what went with it. */
static void put_ctx_end(FILE *o, const struct ot_snapshot *s, const struct snap_event *c)
{
    char dev[32], t[48], b[32], n[32];
    if (c->device >= 0)
        dev_name(dev, c->device);
    else
        snprintf(dev, sizeof(dev), "its device");
    const char *how = c->api == OT_API_cuCtxDestroy_v2 ? "a context of %s destroyed (cuCtxDestroy)"
                      : c->api == OT_API_cuDevicePrimaryCtxReset_v2
                          ? "the primary context of %s reset (cuDevicePrimaryCtxReset, what cudaDeviceReset() does)"
                          : "the primary context of %s released for the last time (cuDevicePrimaryCtxRelease)";
    fputs("  context end: ", o);
    fprintf(o, how, dev);
    fprintf(o, " at %s (seq %" PRIu64 "), %s of device memory freed with it", reltime(t, s, c->time_ns), c->seq,
            ot_fmt_bytes(b, c->size));
    const struct ot_ctx_end *l = ot_snapshot_ctx_end(s, c->seq);
    if (l)
        fprintf(o, ", %s allocation%s", ot_fmt_count(n, l->nfreed), l->nfreed == 1 ? "" : "s");
    fputc('\n', o);
}

static void put_stack(struct tx *t, uint64_t stack_id, const char *indent)
{
    ot_text_stack(t->f, t->a, t->o, stack_id, indent);
}

static void header(struct tx *t)
{
    const struct ot_snapshot *s = t->s;
    const struct ot_meta *m = &s->meta;
    FILE *o = t->f;
    const char *what = ot_snapshot_title(s, true);
    bool by_crash;
    const char *unfinished = ot_unfinished_words(s, &by_crash);
    if (what)
        fprintf(o, "oomtrace: %s", what);
    else
        fprintf(o, "oomtrace: snapshot with unknown trigger %" PRIu64, m->trigger);
    fprintf(o, " %s pid %" PRIu64 " on ", m->trigger == OT_TRIGGER_FLUSH ? "of" : "in", m->pid);
    put(t, m->host.n ? m->host : ot_cstr("unknown host"));
    if (m->rank >= 0) {
        fprintf(o, ", rank %" PRId64, m->rank);
        if (m->world_size > 0)
            fprintf(o, " of %" PRId64, m->world_size);
        if (m->rank_source.n) {
            fputs(" (", o);
            put(t, m->rank_source);
            fputs(")", o);
        }
    }
    const char *stopped = ot_flush_stopped_by(s);
    if (stopped)
        fprintf(o, ", stopped by %s", stopped);
    /* A crash-surviving flush is the only record of a process that died: say so where it is seen. */
    if (unfinished) {
        fputs(" (", o);
        if (by_crash) {
            put(t, m->reason);
            fputs("; ", o);
        }
        fprintf(o, "%s)", unfinished);
    }
    fputc('\n', o);
    if (m->reason.n && !by_crash && m->trigger != OT_TRIGGER_FLUSH) {
        fputs("  reason: ", o);
        put(t, m->reason);
        fputc('\n', o);
    }
    fputs("  cmdline:", o);
    for (size_t i = 0; i < m->argc && i < 64; i++) {
        fputc(' ', o);
        ot_fput_safe_max(o, m->argv[i], 256);
    }
    if (m->argc > 64)
        fprintf(o, " ... (%zu more arguments)", m->argc - 64);
    fputc('\n', o);
    char tb[48], buf[64];
    if (ot_fmt_wall(buf, m->wall_ns))
        fprintf(o, "  taken %s, %s after the tracer started", buf, reltime(tb, s, m->mono_ns));
    else
        fprintf(o, "  taken %s after the tracer started", reltime(tb, s, m->mono_ns));
    fprintf(o, "; snapshot #%" PRIu64 ", tracer ", m->snapshot_seq);
    put(t, m->tracer_version.n ? m->tracer_version : ot_cstr("?"));
    if (m->python_version.n) {
        fputs(", Python ", o);
        put(t, m->python_version);
    }
    fputc('\n', o);
    if (m->cuda_visible_devices.n) {
        fputs("  CUDA_VISIBLE_DEVICES=", o);
        put(t, m->cuda_visible_devices);
        fputc('\n', o);
    }
}

static void failure(struct tx *t)
{
    const struct ot_snapshot *s = t->s;
    FILE *o = t->f;
    if (!s->has_failure)
        return;
    const struct snap_failure *f = &s->failure;
    char b2[32], b3[48], dn[32];
    struct ot_failure_words w; /* the same words as markdown and HTML */
    ot_failure_words_of(t->a, &w);
    fprintf(o, "\nFailed request: %s (%s bytes) by %s on %s, category %s, returned %s", w.bytes,
            ot_fmt_count(b2, f->requested_bytes), w.api, dev_name(dn, f->device), ot_category_name64(f->category),
            w.result);
    if (ot_result_name(f->result_code))
        fprintf(o, " (%" PRIu64 ")", f->result_code);
    fprintf(o, "\n  at %s, seq %" PRIu64 ", thread %" PRIu64, reltime(b3, s, f->time_ns), f->seq, f->tid);
    const struct snap_thread *th = ot_snapshot_thread(s, f->tid);
    if (th) {
        fputs(" (", o);
        ot_fput_safe_max(o, th->name, 64);
        fputc(')', o);
    }
    fputc('\n', o);
    ot_fwview_failure_text(o, t->a);
    if (w.meminfo) {
        fprintf(o, "  %s had %s free of %s total (cuMemGetInfo at the snapshot)", dev_name(dn, f->device), w.free, w.total);
        if (*w.shortfall)
            fprintf(o, ": %s short", w.shortfall);
        fputc('\n', o);
    }
    /* Its id, as the statements that name the failed request's site give it ("(stack 3)"). */
    fprintf(o, "  stack %" PRIu64 " (innermost first):\n", f->stack_id);
    put_stack(t, f->stack_id, "    ");
}

static void bd_cell(FILE *o, const struct ot_bd_moment *m, enum ot_bd_row r, uint64_t bytes)
{
    char b1[32];
    if (!m || !m->known) { /* a moment not known, or without this part */
        fprintf(o, "  %20s", "");
        return;
    }
    if (!m->measured[r]) {
        fprintf(o, "  %20s", "not measured");
        return;
    }
    fprintf(o, "  %12s", ot_fmt_bytes(b1, bytes));
    if (m->whole)
        fprintf(o, " %6.1f%%", 100.0 * (double)bytes / (double)m->whole);
    else
        fputs("        ", o);
}

/* What held the memory: one line per category with bytes at both moments, the split of optimizer state
 * and workspaces under their row. */
static void breakdown(struct tx *t)
{
    const struct ot_breakdown *b = t->a->breakdown;
    FILE *o = t->f;
    char dn[32];
    if (!b || !b->has_device || (!b->now.known && !b->peak.known))
        return;
    if (b->nothing_held[0]) {
        fprintf(o, "\nWhat held the memory on %s: %s.\n", dev_name(dn, b->device), b->nothing_held);
        return;
    }
    char wholes[256];
    ot_bd_wholes(wholes, sizeof(wholes), b);
    fprintf(o, "\nWhat held the memory on %s%s%s%s:\n", dev_name(dn, b->device), *wholes ? " (" : "", wholes, *wholes ? ")" : "");
    fprintf(o, "  %-46s  %20s  %20s\n", "", b->at_failure ? "at the failure" : "at the snapshot", "at the peak");
    for (int r = 0; r < OT_BD_NROWS; r++) {
        if (!b->now.bytes[r] && !b->peak.bytes[r])
            continue;
        bool inferred = b->now.inferred[r] || b->peak.inferred[r];
        char name[64];
        snprintf(name, sizeof(name), "%s%s", ot_bd_row_name(b, (enum ot_bd_row)r), inferred ? " (inferred)" : "");
        fprintf(o, "  %-46s", name);
        bd_cell(o, &b->now, (enum ot_bd_row)r, b->now.bytes[r]);
        bd_cell(o, &b->peak, (enum ot_bd_row)r, b->peak.bytes[r]);
        fputc('\n', o);
        struct ot_bd_split sp[OT_BD_MAX_SPLITS];
        size_t nsp = ot_bd_splits(b, (enum ot_bd_row)r, sp);
        for (size_t i = 0; i < nsp; i++) {
            fputs("      ", o);
            ot_fput_safe_max(o, sp[i].label, 40);
            size_t w = sp[i].label.n < 40 ? sp[i].label.n : 43;
            fprintf(o, "%*s", w < 42 ? (int)(42 - w) : 0, "");
            bd_cell(o, sp[i].in_now ? &b->now : NULL, (enum ot_bd_row)r, sp[i].now);
            if (sp[i].in_peak)
                bd_cell(o, &b->peak, (enum ot_bd_row)r, sp[i].peak);
            fputc('\n', o);
        }
    }
    const char *why = ot_bd_inferred_why(b);
    if (why)
        fprintf(o, "  (inferred: from the allocations' stacks and libraries; %s)\n", why);
}

static void meminfo_gap(struct tx *t, const struct snap_device *d)
{
    FILE *o = t->f;
    struct ot_meminfo_gap g;
    ot_meminfo_gap_of(t->s, d, &g);
    fputs("    total and free unknown: cuMemGetInfo reads only the device current at the snapshot", o);
    if (g.current >= 0)
        fprintf(o, " (device %" PRId64 ")", g.current);
    else if (g.nvml == OT_MEMINFO_NVML_NO_FIGURE)
        fputs(", which this one was not", o);
    if (g.nvml == OT_MEMINFO_NVML_NO_FIGURE) {
        fputs(", and NVML gave no figure for it", o);
    } else if (g.nvml == OT_MEMINFO_NVML_NOT_LOADED) {
        fputs(", and NVML could not be used", o);
    } else {
        fputs(", and NVML was not asked", o);
        if (t->s->meta.trigger == OT_TRIGGER_FLUSH)
            fputs(" (a crash-surviving flush does not ask it)", o);
    }
    if (g.note.n && g.nvml != OT_MEMINFO_NVML_NOT_ASKED) {
        fputs(g.nvml == OT_MEMINFO_NVML_NOT_LOADED ? ": " : " (", o);
        put(t, g.note);
        if (g.nvml != OT_MEMINFO_NVML_NOT_LOADED)
            fputc(')', o);
    }
    fputc('\n', o);
}

static void device_block(struct tx *t, const struct snap_device *d)
{
    const struct ot_snapshot *s = t->s;
    FILE *o = t->f;
    char b1[32], b2[32], b3[32], tb[48], dn[32], ub[80];
    fprintf(o, "  %s: ", dev_name(dn, d->ordinal));
    put(t, d->name.n ? d->name : ot_cstr("(no name)"));
    const char *uuid = ot_fmt_uuid(ub, d->uuid);
    if (uuid)
        fprintf(o, " %s", uuid);
    fputc('\n', o);
    bool meminfo = d->flags & OT_DEV_MEMINFO_KNOWN;
    if (meminfo) {
        uint64_t used = d->total_bytes >= d->free_bytes ? d->total_bytes - d->free_bytes : 0;
        fprintf(o, "    total %s, free %s, used %s (cuMemGetInfo at the snapshot)\n", ot_fmt_bytes(b1, d->total_bytes),
                ot_fmt_bytes(b2, d->free_bytes), ot_fmt_bytes(b3, used));
    } else {
        meminfo_gap(t, d);
    }
    fprintf(o, "    tracked live %s", ot_fmt_bytes(b1, d->tracked_bytes));
    const char *sep = ": ";
    for (size_t c = 1; c < d->ncat; c++) {
        /* Imported memory is another process's, not in the tracked total: said after the parts that sum to it
         * (walk 12: "tracked live 500 MiB: device 500 MiB, imported 300 MiB" read as 800). */
        if (!d->by_category[c] || c == OT_CAT_IMPORTED)
            continue;
        fprintf(o, "%s%s %s", sep, ot_category_name64(c), ot_fmt_bytes(b1, d->by_category[c]));
        sep = ", ";
    }
    if (OT_CAT_IMPORTED < d->ncat && d->by_category[OT_CAT_IMPORTED]) {
        struct ot_imported m = ot_imported_on(s, d);
        fputs("; imported, not in it: ", o);
        if (m.unsized) {
            /* The tracer's one-byte stand-ins are no measured size: count them instead. */
            if (m.bytes)
                fprintf(o, "%s + ", ot_fmt_bytes(b1, m.bytes));
            fprintf(o, "%s allocation%s (size not known)", ot_fmt_count(b2, m.unsized), m.unsized == 1 ? "" : "s");
        } else {
            fputs(ot_fmt_bytes(b1, d->by_category[OT_CAT_IMPORTED]), o);
        }
    }
    fputc('\n', o);
    if (d->peak_bytes)
        fprintf(o, "    peak %s at %s (seq %" PRIu64 ")\n", ot_fmt_bytes(b1, d->peak_bytes),
                reltime(tb, s, d->peak_time_ns), d->peak_seq);
    else /* no allocation was ever live there: a peak has no time */
        fputs("    peak 0 B (no allocation of this process was live on it)\n", o);
    bool baseline = d->flags & OT_DEV_BASELINE_KNOWN;
    if (baseline)
        fprintf(o, "    baseline %s in use before this process's first allocation\n",
                ot_fmt_bytes(b1, d->baseline_used_bytes));
    size_t nother = 0;
    uint64_t other = ot_other_process_bytes(s, d->ordinal, &nother);
    if (nother)
        fprintf(o, "    other processes: %s in %zu process%s (NVML)\n", ot_fmt_bytes(b1, other), nother,
                nother == 1 ? "" : "es");
    struct ot_untracked u;
    ot_untracked_of(s, d, &u);
    if (u.known && u.used > u.explained)
        fprintf(o, "    unaccounted %s: used minus tracked%s%s%s (CUDA context growth, allocations oomtrace cannot see)\n",
                ot_fmt_bytes(b1, u.used - u.explained), baseline ? ", baseline" : "", nother ? ", other processes" : "",
                u.pooled ? ", the pools' idle memory" : "");
    struct ot_pool_totals pt = ot_pools_of(s, d->ordinal);
    if (pt.count)
        fprintf(o, "    pools: %zu, reserved %s, used %s (cuMemPoolGetAttribute; pool memory is shown apart from live allocations)\n",
                pt.count, ot_fmt_bytes(b1, pt.reserved_bytes), ot_fmt_bytes(b2, pt.used_bytes));
}

static void devices(struct tx *t)
{
    const struct ot_snapshot *s = t->s;
    const struct ot_analysis *a = t->a;
    FILE *o = t->f;
    char b1[32], b2[32];
    fputs("\nDevices (tracked = this process's live device allocations counted by oomtrace):\n", o);
    if (!s->ndevices)
        fputs("  (the snapshot records no devices)\n", o);
    for (size_t i = 0; i < s->ndevices; i++)
        device_block(t, &s->devices[i]);
    /* Pools of devices not listed in DEVICES still hold memory; say so rather than drop them. */
    for (size_t i = 0; i < s->npools; i++)
        if (!ot_snapshot_device(s, s->pools[i].device)) {
            fprintf(o, "  pool 0x%" PRIx64 " on device %" PRId64 " (a device the snapshot does not list): reserved %s, used %s\n",
                    s->pools[i].handle, s->pools[i].device, ot_fmt_bytes(b1, s->pools[i].reserved_bytes),
                    ot_fmt_bytes(b2, s->pools[i].used_bytes));
        }
    /* Said with the devices it is about, before the host's memory. */
    if (s->has_processes && !s->nprocesses && s->processes_note.n) {
        fputs("  other processes: unknown (", o);
        put(t, s->processes_note);
        fputs(")\n", o);
    }
    fprintf(o, "Host pinned memory (page-locked host RAM, never in device totals): %s in %s allocation%s\n",
            ot_fmt_bytes(b1, a->host_pinned_bytes), ot_fmt_count(b2, a->host_pinned_count),
            a->host_pinned_count == 1 ? "" : "s");
    if (a->imported_count) {
        char words[256];
        ot_imported_words(a, words, sizeof words);
        fprintf(o, "Imported memory (another process's allocations mapped here, not counted): %s\n", words);
    }
}

static void markers_before(struct tx *t, uint64_t seq, const char *what)
{
    const struct ot_snapshot *s = t->s;
    FILE *o = t->f;
    char tb[48];
    size_t first, n = ot_markers_before(s, seq, OT_MARKERS_SHOWN, &first);
    if (!n)
        return;
    fprintf(o, "  last marker%s before %s (seq %" PRIu64 "):\n", n == 1 ? "" : "s", what, seq);
    for (size_t i = first; i < first + n; i++) {
        const struct snap_marker *m = &s->markers[i];
        fprintf(o, "    seq %-10" PRIu64 " %-12s ", m->seq, reltime(tb, s, m->time_ns));
        put(t, m->label);
        fputc('\n', o);
    }
}

static void peak_section(struct tx *t)
{
    const struct ot_analysis *a = t->a;
    FILE *o = t->f;
    char b1[32], b2[32], tb[48], dn[32];
    const struct ot_peak_view *p = a->peak;
    if (!p) {
        fputs("\nPeak: unknown (the snapshot records no device peak)\n", o);
        return;
    }
    if (!p->bytes && !p->has_sites) { /* nothing was ever live: there is no live set to miss */
        fprintf(o, "\nPeak of %s: 0 B (no allocation of this process was live on it)\n", dev_name(dn, p->device));
        return;
    }
    fprintf(o, "\nTop call sites at the peak of %s: %s at %s (seq %" PRIu64 ")", dev_name(dn, p->device),
            ot_fmt_bytes(b1, p->bytes), reltime(tb, t->s, p->time_ns), p->seq);
    if (p->has_sites)
        fprintf(o, ", %s allocation%s\n", ot_fmt_count(b2, p->sites.count), p->sites.count == 1 ? "" : "s");
    else
        fputs("\n", o);
    if (!p->has_sites) {
        fputs("  (the live set at this device's peak was not recorded)\n", o);
    } else {
        ot_text_site_table(t->f, a, t->o, &p->sites, p->bytes, "peak", false);
    }
    markers_before(t, p->seq, "the peak");
    for (size_t i = 0; i < a->npeaks; i++) {
        const struct ot_peak_view *q = &a->peaks[i];
        if (q == p)
            continue;
        fprintf(o, "  (%s peaked at %s at %s", dev_name(dn, q->device), ot_fmt_bytes(b1, q->bytes),
                reltime(tb, t->s, q->time_ns));
        fputs(q->has_sites ? "; --format json lists its sites)\n" : ")\n", o);
    }
}

static void failure_section(struct tx *t)
{
    const struct ot_analysis *a = t->a;
    FILE *o = t->f;
    char b1[32], b2[32], dn[32];
    fprintf(o, "\nTop call sites at the failure on %s (live when the allocation failed): %s in %s allocation%s\n",
            dev_name(dn, a->failure_device), ot_fmt_bytes(b1, a->at_failure.bytes), ot_fmt_count(b2, a->at_failure.count),
            a->at_failure.count == 1 ? "" : "s");
    ot_text_site_table(t->f, a, t->o, &a->at_failure, a->at_failure.bytes, "live", true);
    markers_before(t, t->s->failure.seq, "the failure");
}

static void live_section(struct tx *t)
{
    const struct ot_analysis *a = t->a;
    FILE *o = t->f;
    char b1[32], b2[32];
    if (!t->s->has_live) {
        fputs("\nLive at snapshot: unknown (the snapshot does not record its live set)\n", o);
        return;
    }
    fprintf(o, "\nTop call sites live at the snapshot (device memory, all devices): %s in %s allocation%s\n",
            ot_fmt_bytes(b1, a->live.bytes), ot_fmt_count(b2, a->live.count), a->live.count == 1 ? "" : "s");
    ot_text_site_table(t->f, a, t->o, &a->live, a->live.bytes, "live", true);
}

static void events(struct tx *t)
{
    const struct ot_snapshot *s = t->s;
    const struct ot_meta *m = &s->meta;
    const struct ot_event_stats *e = &t->a->ev;
    FILE *o = t->f;
    char b1[32], b2[32], b3[32], b4[32], t1[48], t2[48];
    fprintf(o, "\nEvents: %s recorded, %s kept in the ring, %s dropped (%s chunk%s)", ot_fmt_count(b1, m->events_recorded),
            ot_fmt_count(b2, m->events_kept), ot_fmt_count(b3, m->events_dropped), ot_fmt_count(b4, m->chunks_dropped),
            m->chunks_dropped == 1 ? "" : "s");
    /* The ring's byte count covers its compressed chunks only; the chunk being filled is not in it, so a small
     * run shows 0 B although events were kept. Say so rather than let it read as an empty ring. */
    if (m->ring_budget_bytes && !m->ring_used_bytes)
        fprintf(o, "; ring budget %s, no chunk compressed yet%s", ot_fmt_bytes(b1, m->ring_budget_bytes),
                m->events_kept ? " (the kept events are in the chunk being filled)" : "");
    else if (m->ring_budget_bytes)
        fprintf(o, "; ring %s compressed of its %s budget, plus the chunk being filled", ot_fmt_bytes(b1, m->ring_used_bytes),
                ot_fmt_bytes(b2, m->ring_budget_bytes));
    fputc('\n', o);
    if (e->decoded) {
        fprintf(o, "  ring: seq %" PRIu64 "..%" PRIu64 ", %s..%s: ", e->first_seq, e->last_seq,
                reltime(t1, s, e->first_time_ns), reltime(t2, s, e->last_time_ns));
        const char *sep = "";
        for (int k = 1; k <= OT_EV_KIND_MAX; k++) {
            if (k == OT_EV_CONTEXT_END && !e->by_kind[k]) /* named only where a context ended */
                continue;
            fprintf(o, "%s%s %s", sep, ot_event_kind_words(k), ot_fmt_count(b1, e->by_kind[k]));
            sep = ", ";
        }
        if (e->by_kind[0])
            fprintf(o, ", unknown kinds %s", ot_fmt_count(b1, e->by_kind[0]));
        fputc('\n', o);
    }
    for (size_t i = 0; i < e->nctx_ends; i++)
        put_ctx_end(o, s, &e->ctx_ends[i]);
    if (s->nmarkers)
        fprintf(o, "  %s marker%s kept\n", ot_fmt_count(b1, s->nmarkers), s->nmarkers == 1 ? "" : "s");
}

/* The "Why" block: nothing when there is no statement. */
static void statements(FILE *f, const struct ot_why *w, const char *title)
{
    if (!w || !w->n)
        return;
    fprintf(f, "\n%s:\n", title);
    for (size_t i = 0; i < w->n; i++)
        fprintf(f, "  - %s\n", w->v[i].text);
}

static void why(FILE *f, const struct ot_why *w)
{
    statements(f, w, "Why (each statement from numbers in this snapshot)");
}

static void trailer(struct tx *t)
{
    const struct ot_analysis *a = t->a;
    FILE *o = t->f;
    const struct ot_symbolizer_info *y = &a->sym;
    if (y->available)
        fprintf(o, "\nSymbols: %zu of %zu module%s verified by build-id and read here", y->verified, y->modules,
                y->modules == 1 ? "" : "s");
    else
        fputs("\nSymbols: from the snapshot (dump-time dladdr names)", o);
    if (y->available && y->elsewhere)
        fprintf(o, ", %zu of them found in a debug directory, not at the path %s ran from", y->elsewhere,
                y->elsewhere == 1 ? "it" : "they");
    if (y->available && y->verified < y->modules) {
        fputs(" (", o);
        const char *sep = "";
        if (y->missing) {
            fprintf(o, "%s%zu not found here: ", sep, y->missing), sep = ", ";
            /* A few names tell what to look for; a snapshot read on another machine misses dozens, and
             * the JSON lists more. */
            size_t named = y->missing < 3 ? y->missing : 3;
            for (size_t i = 0; i < named; i++) {
                struct ot_str p = a->s->modules[y->missing_idx[i]].path;
                fputs(i ? ", " : "", o);
                if (p.n)
                    ot_fput_safe_max(o, p, 256);
                else
                    fputs("(a module with no name)", o);
            }
            if (named < y->missing)
                fprintf(o, " and %zu more", y->missing - named);
        }
        if (y->mismatched)
            fprintf(o, "%s%zu with a different build-id", sep, y->mismatched), sep = ", ";
        if (y->unverifiable)
            fprintf(o, "%s%zu without a recorded build-id", sep, y->unverifiable), sep = ", ";
        if (y->unreadable)
            fprintf(o, "%s%zu unreadable", sep, y->unreadable), sep = ", ";
        fputs("; dump-time names for those)", o);
    }
    if (y->cxx_names)
        fputs(y->demangler ? "; C++ names demangled" : "; C++ names left mangled (no __cxa_demangle found)", o);
    fputc('\n', o);
    if (a->notes.n) {
        fputs("Notes:\n", o);
        for (size_t i = 0; i < a->notes.n; i++)
            fprintf(o, "  - %s\n", a->notes.v[i]);
    }
}

int ot_report_text(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    struct tx t = {f, a, a->s, o};
    header(&t);
    failure(&t);
    breakdown(&t);
    why(f, a->why);
    statements(f, a->remedies, "What to try (each remedy from the numbers above)");
    ot_fwview_text(f, a, o->top);
    devices(&t);
    struct ot_moment_tables mt;
    ot_moment_tables(a, o->at, &mt);
    if (mt.peak)
        peak_section(&t);
    if (mt.failure)
        failure_section(&t);
    if (mt.failure_missing)
        fputs("\n(--at failure: this snapshot records no failure; showing the live set instead)\n", f);
    if (mt.live)
        live_section(&t);
    events(&t);
    trailer(&t);
    return ferror(f) ? -1 : 0;
}
