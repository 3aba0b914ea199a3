/* The diff written out: text, markdown/HTML (through the document writer) and JSON. */
#include "modes/diff/diff_int.h"

#include <inttypes.h>
#include <stdlib.h>

#include "render/json_writer.h"

static void put_signed_bytes(FILE *f, int64_t v)
{
    char b[32];
    fprintf(f, "%c%s", v < 0 ? '-' : '+', ot_fmt_bytes(b, ot_diff_mag(v)));
}

static const char *trig(const struct ot_snapshot *s)
{
    const char *t = ot_trigger_name(s->meta.trigger);
    return t ? t : "unknown";
}

/* Where a side's snapshot came from when the user gave a directory: "picked from DIR: the largest peak of its
 * N snapshots (from M processes)". */
static const char *picked_tail(char buf[200], const struct ot_loaded *l)
{
    int n;
    if (l->picked.nfiles == 1)
        n = snprintf(buf, 200, l->picked.nbad ? ": its only readable snapshot" : ": its only snapshot");
    else
        n = snprintf(buf, 200, ": the largest peak of its %zu snapshots, from %zu process%s%s", l->picked.nfiles,
                     l->picked.nprocs, l->picked.nprocs == 1 ? "" : "es",
                     l->picked.nprocs > 1 ? "; the other processes are not compared" : "");
    if (l->picked.nbad && n > 0 && n < 200)
        snprintf(buf + n, 200 - (size_t)n, "; %zu file%s that could not be read", l->picked.nbad,
                 l->picked.nbad == 1 ? "" : "s");
    return buf;
}

/* The command line a side's process ran, its words joined by spaces and cut at 120 bytes: what tells a
 * baseline of another job apart at a glance. */
static const char *command_of(char buf[128], const struct ot_snapshot *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->meta.argc && n < 120; i++) {
        if (i)
            buf[n++] = ' ';
        size_t w = s->meta.argv[i].n < 120 - n ? s->meta.argv[i].n : 120 - n;
        if (s->meta.argv[i].p)
            memcpy(buf + n, s->meta.argv[i].p, w);
        n += w;
    }
    buf[n] = 0;
    if (n == 120)
        memcpy(buf + 117, "...", 4);
    return buf;
}

/* Sites found on both sides; none, when both have sites, is a comparison of unrelated runs (a baseline from
 * another job, a path mixed up), which the peak change alone would read as a regression. */
static bool no_site_in_common(const struct diff *d)
{
    if (!d->side[0].p || !d->side[1].p || !d->side[0].p->has_sites || !d->side[1].p->has_sites || !d->nrows)
        return false;
    for (size_t i = 0; i < d->nrows; i++)
        if (d->rows[i].in[0] && d->rows[i].in[1])
            return false;
    return true;
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
    char cmd[128];
    if (*command_of(cmd, s)) {
        fputs(", ", f);
        ot_fput_safe_max(f, ot_cstr(cmd), sizeof cmd);
    }
    fputc('\n', f);
    if (d->l->picked.dir) {
        char tail[200];
        fputs("    (picked from ", f);
        ot_fput_safe_max(f, ot_cstr(d->l->picked.dir), 512);
        fprintf(f, "%s)\n", picked_tail(tail, d->l));
    }
    if (d->p && !d->p->has_sites)
        fprintf(f, "    (device %" PRId64 ": the live set at its peak was not recorded, so it has no site table)\n", d->p->device);
}

int ot_diff_text(FILE *f, struct ot_loaded *base, struct ot_loaded *cur, const struct ot_report_opts *o)
{
    struct diff d;
    if (ot_diff_build(&d, base, cur) < 0) {
        ot_diff_free(&d);
        return -1;
    }
    char b1[32], b2[32], b3[32], b4[32];
    fputs("oomtrace-read --diff: peak bytes by call site, base -> new\n", f);
    text_side(f, "base:", &d.side[0]);
    text_side(f, "new: ", &d.side[1]);
    if (d.side[0].p && d.side[1].p) {
        uint64_t pb = d.side[0].p->bytes, pn = d.side[1].p->bytes;
        fputs("  peak change: ", f);
        put_signed_bytes(f, ot_diff_sdiff(pn, pb));
        if (pb)
            fprintf(f, " (%+.1f%%)", 100.0 * ((double)pn - (double)pb) / (double)pb);
        fprintf(f, ", from %s to %s\n", ot_fmt_bytes(b1, pb), ot_fmt_bytes(b2, pn));
    }
    if (no_site_in_common(&d))
        fputs("  no call site in common: the two snapshots share no call site (different programs, or a baseline from "
              "another job?), so the change compares unrelated runs\n", f);
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
        int s = ot_diff_show_side(r);
        struct ot_stack_info si;
        ot_stack_info(d.side[s].l->res, &d.side[s].l->snap, r->stack[s], &si);
        /* A row told apart by a caller names it once, as the site tables do ("f ← g"), not also as "called from". */
        ot_put_headline(f, &si, !d.part[i].frame);
        ot_put_parting(f, &d.part[i]);
        fprintf(f, " (%s stack %" PRIu64 "%s)\n", s ? "new" : "base", r->stack[s], ot_diff_matched_note(r));
        if (o->native || !ot_put_stack_python_first(f, d.side[s].l->res, &d.side[s].l->snap, r->stack[s], "        ", o->frames))
            ot_put_stack_native(f, d.side[s].l->res, &d.side[s].l->snap, r->stack[s], "        ", o->frames);
    }
    if (changed > shown)
        fprintf(f, "  ... %zu more changed site%s (--top)\n", changed - shown, changed - shown == 1 ? "" : "s");
    if (!changed)
        fputs("  (no call site changed)\n", f);
    if (d.nrows > changed)
        fprintf(f, "  %zu site%s unchanged\n", d.nrows - changed, d.nrows - changed == 1 ? "" : "s");
    ot_diff_free(&d);
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
    char cmd[128];
    if (*command_of(cmd, s)) {
        ot_doc_printf(o, ", ");
        ot_doc_code(o, ot_cstr(cmd), sizeof cmd);
    }
    if (d->l->picked.dir) {
        char tail[200];
        ot_doc_printf(o, " (picked from ");
        ot_doc_code(o, ot_cstr(d->l->picked.dir), 512);
        ot_doc_printf(o, "%s)", picked_tail(tail, d->l));
    }
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
    if (ot_diff_build(&d, base, cur) < 0) {
        ot_diff_free(&d);
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
        int64_t ch = ot_diff_sdiff(pn, pb);
        ot_doc_para(&o);
        ot_doc_bold(&o, "Peak change:");
        ot_doc_printf(&o, " %c%s", ch < 0 ? '-' : '+', ot_fmt_bytes(b1, ot_diff_mag(ch)));
        if (pb)
            ot_doc_printf(&o, " (%+.1f%%)", 100.0 * ((double)pn - (double)pb) / (double)pb);
        ot_doc_printf(&o, ", from %s to %s", ot_fmt_bytes(b1, pb), ot_fmt_bytes(b2, pn));
        ot_doc_para_end(&o);
    }
    if (no_site_in_common(&d)) {
        ot_doc_para(&o);
        ot_doc_bold(&o, "No call site in common:");
        ot_doc_printf(&o, " the two snapshots share no call site (different programs, or a baseline from another "
                          "job?), so the change compares unrelated runs.");
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
        ot_doc_printf(&o, "%c%s", r->change < 0 ? '-' : '+', ot_fmt_bytes(b1, ot_diff_mag(r->change)));
        ot_doc_cell_end(&o);
        doc_amount(&o, r->in[0], r->bytes[0], r->count[0]);
        doc_amount(&o, r->in[1], r->bytes[1], r->count[1]);
        int sd = ot_diff_show_side(r);
        struct ot_stack_info si;
        ot_stack_info(d.side[sd].l->res, &d.side[sd].l->snap, r->stack[sd], &si);
        char *hl = ot_headline_str(&si, !d.part[i].frame), *pt = ot_parting_str(&d.part[i]);
        ot_doc_cell(&o);
        char *both = NULL;
        if (asprintf(&both, "%s%s", hl ? hl : "?", pt ? pt : "") < 0)
            both = NULL;
        ot_doc_code(&o, ot_cstr(both ? both : "?"), 600);
        free(both);
        ot_doc_printf(&o, " (%s stack %" PRIu64 "%s)", sd ? "new" : "base", r->stack[sd], ot_diff_matched_note(r));
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
    ot_diff_free(&d);
    return ferror(f) ? -1 : 0;
}

static void json_side(struct ot_json *j, const char *key, const struct dside *d)
{
    const struct ot_snapshot *s = &d->l->snap;
    ot_json_obj(j, key);
    ot_json_cstr(j, "file", d->l->path);
    ot_json_cstr(j, "trigger", ot_trigger_name(s->meta.trigger));
    ot_json_u64(j, "pid", s->meta.pid);
    char cmd[128];
    ot_json_cstr(j, "command", command_of(cmd, s));
    ot_json_str(j, "host", s->meta.host);
    ot_json_i64_or_null(j, "rank", s->meta.rank >= 0, s->meta.rank);
    ot_json_i64_or_null(j, "peak_device", d->p != NULL, d->p ? d->p->device : 0);
    ot_json_u64_or_null(j, "peak_bytes", d->p != NULL, d->p ? d->p->bytes : 0);
    ot_json_u64_or_null(j, "peak_seq", d->p != NULL, d->p ? d->p->seq : 0);
    ot_json_bool(j, "has_sites", d->p && d->p->has_sites);
    if (d->l->picked.dir) {
        ot_json_obj(j, "picked_from");
        ot_json_cstr(j, "directory", d->l->picked.dir);
        ot_json_u64(j, "snapshots", d->l->picked.nfiles);
        ot_json_u64(j, "processes", d->l->picked.nprocs);
        ot_json_u64(j, "unreadable_files", d->l->picked.nbad);
        ot_json_obj_end(j);
    } else {
        ot_json_null(j, "picked_from");
    }
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
    struct ot_frame_walk w; /* the dump's names: one frame a word */
    for (ot_walk_begin(&w, d->dump, st, OT_WALK_ALL); ot_walk_next(&w);) {
        const struct ot_frame *fr = w.f;
        ot_json_obj(j, NULL);
        if (fr->kind == OT_FRAME_PY) {
            ot_json_cstr(j, "kind", "python");
            ot_json_str(j, "function", fr->function);
            ot_json_str(j, "file", fr->file);
            ot_json_u64_or_null(j, "line", fr->has_line, fr->line);
            ot_json_null(j, "module");
        } else {
            ot_json_cstr(j, "kind", "native");
            ot_json_str(j, "function", ot_diff_native_name(d, w.word, fr));
            ot_json_null(j, "file");
            ot_json_null(j, "line");
            ot_json_str(j, "module", w.module);
        }
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
}

int ot_diff_json(FILE *f, struct ot_loaded *base, struct ot_loaded *cur, const struct ot_report_opts *o)
{
    struct diff d;
    if (ot_diff_build(&d, base, cur) < 0) {
        ot_diff_free(&d);
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
    ot_json_i64_or_null(&j, "peak_change_bytes", both, ot_diff_sdiff(pn, pb));
    if (both && pb)
        ot_json_f64(&j, "peak_change_percent", 100.0 * ((double)pn - (double)pb) / (double)pb);
    else
        ot_json_null(&j, "peak_change_percent");
    size_t changed = 0;
    for (size_t i = 0; i < d.nrows; i++)
        changed += d.rows[i].change != 0;
    ot_json_u64(&j, "sites_total", d.nrows);
    ot_json_u64(&j, "sites_changed", changed);
    ot_json_bool(&j, "no_site_in_common", no_site_in_common(&d));
    size_t n = d.nrows;
    if (o->top_given && o->top < n)
        n = o->top;
    ot_json_arr(&j, "sites");
    for (size_t i = 0; i < n; i++) {
        const struct drow *r = &d.rows[i];
        int s = ot_diff_show_side(r);
        ot_json_obj(&j, NULL);
        ot_json_i64(&j, "change_bytes", r->change);
        ot_json_u64_or_null(&j, "base_bytes", r->in[0], r->bytes[0]);
        ot_json_u64_or_null(&j, "base_count", r->in[0], r->count[0]);
        ot_json_u64_or_null(&j, "new_bytes", r->in[1], r->bytes[1]);
        ot_json_u64_or_null(&j, "new_count", r->in[1], r->count[1]);
        ot_json_u64_or_null(&j, "base_stack_id", r->in[0], r->stack[0]);
        ot_json_u64_or_null(&j, "new_stack_id", r->in[1], r->stack[1]);
        if (!r->in[0] || !r->in[1])
            ot_json_null(&j, "matched_by"); /* on one side only: matched nothing */
        else
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
    ot_diff_free(&d);
    return ferror(f) ? -1 : 0;
}
