/* The markdown report: a short summary for a CI job summary (GitHub's $GITHUB_STEP_SUMMARY): what
 * failed, the devices, a table of the top call sites at the --at moment (default: the peak), the
 * "why" statements and the ring's counts. GitHub-flavoured markdown; every snapshot string is escaped
 * so that it renders as text, whatever it holds. */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "render/sitelabel.h"
#include "analyze/stackview.h"
#include "analyze/breakdown.h"
#include "render/bdcell.h"
#include "analyze/why.h"
#include "render/doc.h"
#include "render/fwview.h"

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
    static const char *const what[] = {
        [OT_TRIGGER_OOM] = "CUDA out of memory",
        [OT_TRIGGER_EXIT] = "snapshot at process exit",
        [OT_TRIGGER_SIGNAL] = "snapshot on a signal",
        [OT_TRIGGER_API] = "snapshot requested by oomtrace_dump()",
        [OT_TRIGGER_FLUSH] = "periodic flush",
        [OT_TRIGGER_FRAMEWORK_OOM] = "out of memory in a framework's allocator (the fatal one)",
    };
    if (mt->trigger >= 1 && mt->trigger <= OT_TRIGGER_FRAMEWORK_OOM)
        fprintf(f, "## oomtrace: %s\n\n", what[mt->trigger]);
    else
        fprintf(f, "## oomtrace: snapshot (unknown trigger %" PRIu64 ")\n\n", mt->trigger);

    /* The command line, cut to a sensible length. */
    struct ot_sb cmd = {0};
    for (size_t i = 0; i < mt->argc && cmd.n < 300; i++) {
        if (i)
            ot_sb_cstr(&cmd, " ");
        ot_sb_str(&cmd, mt->argv[i]);
    }
    if (cmd.n)
        ot_md_code(f, ot_sb_view(&cmd), 300, false);
    else
        fputs("(no command line)", f);
    ot_sb_free(&cmd);
    fprintf(f, " · pid %" PRIu64 " on ", mt->pid);
    ot_md_text(f, mt->host.n ? mt->host : ot_cstr("unknown host"), 128);
    if (mt->rank >= 0) {
        fprintf(f, " · rank %" PRId64, mt->rank);
        if (mt->world_size > 0)
            fprintf(f, " of %" PRId64, mt->world_size);
    }
    char buf[64], tb[48];
    if (ot_fmt_wall(buf, mt->wall_ns))
        fprintf(f, " · %s", buf);
    fprintf(f, " (%s after the tracer started)", ot_fmt_reltime(tb, mt->mono_ns, mt->start_mono_ns));
    if (!(m->s->file_flags & OT_FILE_COMPLETE))
        fputs(" · **the process did not finish writing this snapshot**", f);
    fputs("\n\n", f);
}

static void put_label(struct md *m, uint64_t stack_id, bool in_table)
{
    struct ot_site one = {.stack_id = stack_id};
    char **l = ot_lbl_sites(m->a, &one, 1, MD_NAME_MAX);
    ot_md_code(m->f, ot_cstr(l ? l[0] : "?"), 0, in_table);
    ot_strv_free(l, 1);
}

static void failure(struct md *m)
{
    const struct ot_snapshot *s = m->s;
    FILE *f = m->f;
    if (!s->has_failure)
        return;
    const struct snap_failure *x = &s->failure;
    char b1[32], b2[32], b3[32];
    const char *rn = ot_result_name(x->result_code);
    char dn[32];
    if (x->device < 0)
        snprintf(dn, sizeof(dn), "the host");
    else
        snprintf(dn, sizeof(dn), "device %" PRId64, x->device);
    fprintf(f, "**Failed request:** %s by `%s` on %s (%s), ", ot_fmt_bytes(b1, x->requested_bytes),
            ot_api_name64(x->api), dn, ot_category_name64(x->category));
    if (rn)
        fprintf(f, "`%s`", rn);
    else
        fprintf(f, "CUresult %" PRIu64, x->result_code);
    const struct snap_device *d = ot_snapshot_device(s, x->device);
    if (d && (d->flags & OT_DEV_MEMINFO_KNOWN)) {
        fprintf(f, ": %s free of %s", ot_fmt_bytes(b2, d->free_bytes), ot_fmt_bytes(b3, d->total_bytes));
        if (x->requested_bytes > d->free_bytes)
            fprintf(f, ", %s short", ot_fmt_bytes(b1, x->requested_bytes - d->free_bytes));
    }
    fputs(".  \nAllocated at ", f);
    put_label(m, x->stack_id, false);
    fputs("\n\n", f);
}

static void bd_cell(FILE *f, const struct ot_bd_moment *m, enum ot_bd_row r, uint64_t bytes)
{
    char by[32], sh[16];
    ot_bd_cell_text(m, r, bytes, by, sh);
    fprintf(f, " | %s%s%s%s", by, *sh ? " (" : "", sh, *sh ? ")" : "");
}

static void breakdown(struct md *m)
{
    const struct ot_breakdown *b = m->a->breakdown;
    FILE *f = m->f;
    if (!b || !b->has_device || (!b->now.known && !b->peak.known))
        return;
    fprintf(f, "**What held the memory on device %" PRId64 "**%s\n\n", b->device,
            b->identity ? "" : " (inferred from the allocations' stacks and libraries)");
    fprintf(f, "| Category | %s | At the peak |\n|---|--:|--:|\n", b->at_failure ? "At the failure" : "At the snapshot");
    for (int r = 0; r < OT_BD_NROWS; r++) {
        if (!b->now.bytes[r] && !b->peak.bytes[r])
            continue;
        fprintf(f, "| %s%s", ot_bd_row_name((enum ot_bd_row)r),
                b->now.inferred[r] || b->peak.inferred[r] ? " (inferred)" : "");
        bd_cell(f, &b->now, (enum ot_bd_row)r, b->now.bytes[r]);
        bd_cell(f, &b->peak, (enum ot_bd_row)r, b->peak.bytes[r]);
        fputs(" |\n", f);
        const struct ot_bd_moment *pm = b->now.known ? &b->now : &b->peak;
        for (size_t i = 0; i < pm->nparts; i++) {
            if (pm->parts[i].row != (enum ot_bd_row)r)
                continue;
            fputs("| \xe2\x80\x83", f); /* an em space indents the part under its row */
            ot_md_text(f, pm->parts[i].label, 80);
            if (pm == &b->peak)
                fputs(" | ", f);
            bd_cell(f, pm, (enum ot_bd_row)r, pm->parts[i].bytes);
            fputs(pm == &b->now ? " | |\n" : " |\n", f);
        }
    }
    fputc('\n', f);
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
    char b[32];
    for (size_t i = 0; i < s->ndevices && i < MD_DEVICES_MAX; i++) {
        const struct snap_device *d = &s->devices[i];
        bool mi = d->flags & OT_DEV_MEMINFO_KNOWN, bl = d->flags & OT_DEV_BASELINE_KNOWN;
        fprintf(f, "| %" PRId64 " | ", d->ordinal);
        ot_md_text(f, d->name.n ? d->name : ot_cstr("?"), 64);
        fprintf(f, " | %s", mi ? ot_fmt_bytes(b, d->total_bytes) : "?");
        fprintf(f, " | %s", mi ? ot_fmt_bytes(b, d->free_bytes) : "?");
        fprintf(f, " | %s", ot_fmt_bytes(b, d->tracked_bytes));
        fprintf(f, " | %s", ot_fmt_bytes(b, d->peak_bytes));
        fprintf(f, " | %s", bl ? ot_fmt_bytes(b, d->baseline_used_bytes) : "?");
        size_t np = 0;
        uint64_t other = ot_other_process_bytes(s, d->ordinal, &np);
        if (np)
            fprintf(f, " | %s in %zu |\n", ot_fmt_bytes(b, other), np);
        else
            fputs(" | – |\n", f);
    }
    if (s->ndevices > MD_DEVICES_MAX)
        fprintf(f, "\n%zu more devices: see the text report.\n", s->ndevices - MD_DEVICES_MAX);
    fputs("\nTotal and free: cuMemGetInfo when the snapshot was written. Tracked: this process's live allocations "
          "counted by oomtrace. Baseline: used before its first allocation.\n\n", f);
}

static void sites(struct md *m)
{
    FILE *f = m->f;
    const struct ot_analysis *a = m->a;
    struct ot_moment mo;
    ot_moment_of(a, m->o->at, OT_AT_PEAK, &mo);
    char b1[32], b2[32], tb[48];
    if (!mo.sites) {
        fputs("### Top call sites\n\nUnknown: the snapshot records the live set neither at the peak nor at the snapshot.\n\n", f);
        return;
    }
    const struct ot_sites *st = mo.sites;
    if (mo.at == OT_AT_PEAK)
        fprintf(f, "### Top call sites at the peak of device %" PRId64 ": %s at %s", mo.device, ot_fmt_bytes(b1, mo.whole),
                ot_fmt_reltime(tb, mo.time_ns, m->s->meta.start_mono_ns));
    else if (mo.at == OT_AT_FAILURE)
        fprintf(f, "### Top call sites at the failure on device %" PRId64 ": %s", mo.device, ot_fmt_bytes(b1, mo.whole));
    else
        fprintf(f, "### Top call sites live at the snapshot (all devices): %s", ot_fmt_bytes(b1, mo.whole));
    fprintf(f, ", %s allocation%s\n\n", ot_fmt_count(b2, st->count), st->count == 1 ? "" : "s");
    if (mo.fell_back)
        fprintf(f, "(The snapshot does not record the live set at the %s: this is the live set at the snapshot.)\n\n",
                ot_at_name(mo.asked));
    if (!st->n) {
        fputs("No allocations.\n\n", f);
        return;
    }
    /* Grouped as the text report: a row is a line of the program and its sites (--split: one per site). */
    bool grouped = st->ngroups && !m->o->split;
    size_t rows = grouped ? st->ngroups : st->n;
    size_t n = rows < m->o->top ? rows : m->o->top;
    struct ot_site *reps = malloc((n ? n : 1) * sizeof(*reps));
    for (size_t i = 0; reps && i < n; i++) {
        const struct ot_site_group *g = grouped ? &st->groups[i] : NULL;
        reps[i] = g ? (struct ot_site){st->v[st->member[g->first]].stack_id, g->bytes, g->count} : st->v[i];
    }
    char **labels = reps ? ot_lbl_sites(a, reps, n, MD_NAME_MAX) : NULL;
    fputs("| # | Bytes | Count | Share | Where |\n|--:|--:|--:|--:|---|\n", f);
    uint64_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ot_site_group *g = grouped ? &st->groups[i] : NULL;
        uint64_t bytes = g ? g->bytes : st->v[i].bytes, count = g ? g->count : st->v[i].count;
        shown = ot_sat_add(shown, bytes);
        fprintf(f, "| %zu | %s | %s | ", i + 1, ot_fmt_bytes(b1, bytes), ot_fmt_count(b2, count));
        if (mo.whole)
            fprintf(f, "%.1f%%", 100.0 * (double)bytes / (double)mo.whole);
        else
            fputs("–", f);
        fputs(" | ", f);
        char *line = g && g->n > 1 ? ot_short_frame_str(g->line) : NULL;
        ot_md_code(f, ot_cstr(line ? line : labels ? labels[i] : "?"), 0, true);
        if (line)
            fprintf(f, " (%zu call sites)", g->n);
        free(line);
        fputs(" |\n", f);
    }
    if (rows > n) {
        uint64_t rest = st->bytes >= shown ? st->bytes - shown : 0;
        fprintf(f, "| | %s | | ", ot_fmt_bytes(b1, rest));
        if (mo.whole)
            fprintf(f, "%.1f%%", 100.0 * (double)rest / (double)mo.whole);
        fprintf(f, " | %zu more %s%s |\n", rows - n, grouped ? "row" : "site", rows - n == 1 ? "" : "s");
    }
    free(reps);
    fputc('\n', f);
    ot_strv_free(labels, n);

    /* The last markers before the moment: where in the program it happened. */
    if (mo.at != OT_AT_LIVE) {
        size_t first, k = ot_markers_before(m->s, mo.seq, MD_MARKERS, &first);
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
            fprintf(f, "%s%s %s", k > 1 ? ", " : "", ot_event_kind_name(k), ot_fmt_count(b1, e->by_kind[k]));
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
    failure(&m);
    breakdown(&m);
    statements(&m, m.a->why, "Why");
    statements(&m, m.a->remedies, "What to try");
    ot_fwview_markdown(f, a, o->top);
    devices(&m);
    sites(&m);
    events(&m);
    return ferror(f) ? -1 : 0;
}
