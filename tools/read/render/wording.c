#include "render/wording.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/doc.h"
#include "render/report.h"
#include "render/sitelabel.h"
#include "analyze/stackview.h"

const char *ot_trigger_title(uint64_t trigger, bool shout)
{
    static const char *const what[] = {
        [OT_TRIGGER_OOM] = "CUDA out of memory",
        [OT_TRIGGER_EXIT] = "snapshot at process exit",
        [OT_TRIGGER_SIGNAL] = "snapshot on a signal",
        [OT_TRIGGER_API] = "snapshot requested by the program (oomtrace.dump / oomtrace_dump)",
        [OT_TRIGGER_FLUSH] = "periodic flush",
        [OT_TRIGGER_FRAMEWORK_OOM] = "out of memory in a framework's allocator (the fatal one)",
    };
    if (trigger < 1 || trigger > OT_TRIGGER_FRAMEWORK_OOM)
        return NULL;
    if (shout && trigger == OT_TRIGGER_OOM)
        return "CUDA OUT OF MEMORY";
    if (shout && trigger == OT_TRIGGER_FRAMEWORK_OOM)
        return "OUT OF MEMORY in a framework's allocator (the fatal one)";
    return what[trigger];
}

/* The flusher writes "periodic" as the reason of a timed flush and the signal's name for the last one a
 * crash asks for (lib/runtime/init.c). */
static bool flushed_by_crash(const struct ot_snapshot *s)
{
    const struct ot_str r = s->meta.reason;
    return s->meta.trigger == OT_TRIGGER_FLUSH && r.n && !ot_str_eq(r, "periodic");
}

const char *ot_flush_stopped_by(const struct ot_snapshot *s)
{
    /* A request to end (a launcher stopping the other ranks, ^C) is no crash. The writer stores strsignal's
     * words: this reader's locale's and the C locale's are both recognised. */
    static const struct {
        int sig;
        const char *name, *c_words;
    } ends[] = {{SIGTERM, "SIGTERM", "Terminated"},
                {SIGINT, "SIGINT", "Interrupt"},
                {SIGHUP, "SIGHUP", "Hangup"},
                {SIGQUIT, "SIGQUIT", "Quit"}};
    if (!flushed_by_crash(s))
        return NULL;
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
        const char *local = strsignal(ends[i].sig);
        if (ot_str_eq(s->meta.reason, ends[i].c_words) || (local && ot_str_eq(s->meta.reason, local)))
            return ends[i].name;
    }
    return NULL;
}

const char *ot_flush_crash_signal(const struct ot_snapshot *s)
{
    if (!flushed_by_crash(s) || ot_flush_stopped_by(s))
        return NULL;
    /* strsignal's words in this reader's locale; the writer's were most likely the C locale's too. */
    for (int sig = 1; sig < NSIG; sig++) {
        const char *words = strsignal(sig), *abbrev = sigabbrev_np(sig);
        if (words && abbrev && ot_str_eq(s->meta.reason, words)) {
            static char name[NSIG][16];
            snprintf(name[sig], sizeof name[sig], "SIG%s", abbrev);
            return name[sig];
        }
    }
    return "";
}

const char *ot_snapshot_title(const struct ot_snapshot *s, bool shout)
{
    if (s->meta.trigger == OT_TRIGGER_FLUSH)
        return !flushed_by_crash(s) ? "last flush" : ot_flush_stopped_by(s) ? "state at the end" : "state at the crash";
    return ot_trigger_title(s->meta.trigger, shout);
}

const char *ot_unfinished_words(const struct ot_snapshot *s, bool *by_crash)
{
    *by_crash = false;
    if (s->file_flags & OT_FILE_COMPLETE)
        return NULL;
    if (s->meta.trigger != OT_TRIGGER_FLUSH)
        return "its writer did not finish this file";
    if (flushed_by_crash(s)) {
        *by_crash = true;
        return "the process did not finish, so this is its last flush";
    }
    return "the process did not finish and wrote no last flush: killed by SIGKILL or by the kernel's OOM killer, or "
           "still running; this is its state at most one flush interval old";
}

void ot_failure_api(char *buf, size_t len, const struct ot_analysis *a)
{
    const struct snap_failure *f = &a->s->failure;
    /* A framework's own refusal has no driver entry point: name the framework instead. */
    if (f->api == OT_API_framework_allocator) {
        const char *fwn = ot_fw_display_name(a->fw ? a->fw->fatal_framework : (struct ot_str){NULL, 0});
        snprintf(buf, len, "%s's allocator", fwn ? fwn : "the framework");
    } else {
        snprintf(buf, len, "%s", ot_api_name64(f->api));
    }
}

bool ot_failure_words_of(const struct ot_analysis *a, struct ot_failure_words *w)
{
    const struct ot_snapshot *s = a->s;
    if (!s->has_failure)
        return false;
    const struct snap_failure *x = w->x = &s->failure;
    ot_failure_api(w->api, sizeof(w->api), a);
    const char *rn = ot_result_name(x->result_code);
    if (rn)
        snprintf(w->result, sizeof(w->result), "%s", rn);
    else
        snprintf(w->result, sizeof(w->result), "CUresult %" PRIu64, x->result_code);
    if (x->device < 0)
        snprintf(w->where, sizeof(w->where), "the host");
    else
        snprintf(w->where, sizeof(w->where), "device %" PRId64, x->device);
    /* A framework that refuses without saying how much (PyTorch's cudaMallocAsync backend, which has no OOM
     * observer) leaves the size 0: no request is 0 bytes. */
    if (x->requested_bytes)
        ot_fmt_bytes(w->bytes, x->requested_bytes);
    else
        snprintf(w->bytes, sizeof(w->bytes), "size not reported");
    const struct snap_device *d = ot_snapshot_device(s, x->device);
    w->meminfo = d && (d->flags & OT_DEV_MEMINFO_KNOWN);
    w->shortfall[0] = 0;
    if (w->meminfo) {
        ot_fmt_bytes(w->free, d->free_bytes);
        ot_fmt_bytes(w->total, d->total_bytes);
        if (x->requested_bytes > d->free_bytes)
            ot_fmt_bytes(w->shortfall, x->requested_bytes - d->free_bytes);
    }
    return true;
}

const char ot_sites_unknown[] = "Unknown: the snapshot records the live set neither at the peak nor at the snapshot.";

static void heading(const struct ot_moment *mo, uint64_t start_ns, char title[64], char detail[160])
{
    char b1[32], b2[32], tb[48];
    uint64_t count = mo->sites ? mo->sites->count : 0;
    if (mo->at == OT_AT_PEAK) {
        snprintf(title, 64, "Top call sites at the peak");
        snprintf(detail, 160, "device %" PRId64 ": %s at %s, %s allocation%s", mo->device, ot_fmt_bytes(b1, mo->whole),
                 ot_fmt_reltime(tb, mo->time_ns, start_ns), ot_fmt_count(b2, count), count == 1 ? "" : "s");
    } else if (mo->at == OT_AT_FAILURE) {
        snprintf(title, 64, "Top call sites at the failure");
        snprintf(detail, 160, "device %" PRId64 ": %s live, %s allocation%s", mo->device, ot_fmt_bytes(b1, mo->whole),
                 ot_fmt_count(b2, count), count == 1 ? "" : "s");
    } else {
        snprintf(title, 64, "Top call sites live at the snapshot");
        snprintf(detail, 160, "all devices: %s, %s allocation%s", ot_fmt_bytes(b1, mo->whole), ot_fmt_count(b2, count),
                 count == 1 ? "" : "s");
    }
}

bool ot_site_table_open(const struct ot_analysis *a, const struct ot_report_opts *o, size_t name_max,
                        struct ot_site_table *t)
{
    memset(t, 0, sizeof(*t));
    ot_moment_of(a, o->at, OT_AT_PEAK, &t->mo);
    if (!(t->st = t->mo.sites))
        return false;
    heading(&t->mo, a->s->meta.start_mono_ns, t->title, t->detail);
    if (t->mo.fell_back && !(t->mo.asked == OT_AT_PEAK && a->peak && !a->peak->bytes)) /* a 0 B peak misses nothing */
        snprintf(t->note, sizeof(t->note), "The snapshot does not record the live set at the %s: this is the live set "
                 "at the snapshot.", ot_at_name(t->mo.asked));
    const struct ot_sites *st = t->st;
    t->grouped = st->ngroups && !o->split;
    t->rows = t->grouped ? st->ngroups : st->n;
    t->n = t->rows < o->top ? t->rows : o->top;
    t->reps = malloc((t->n ? t->n : 1) * sizeof(*t->reps));
    for (size_t i = 0; t->reps && i < t->n; i++) {
        const struct ot_site_group *g = t->grouped ? &st->groups[i] : NULL;
        t->reps[i] = g ? (struct ot_site){st->v[st->member[g->first]].stack_id, g->bytes, g->count} : st->v[i];
    }
    t->labels = t->n && t->reps ? ot_lbl_sites(a, t->reps, t->n, name_max) : NULL;
    /* A group of several sites is named by the program's line they share. */
    for (size_t i = 0; t->labels && t->grouped && i < t->n; i++) {
        const struct ot_site_group *g = &st->groups[i];
        char *line = g->n > 1 ? ot_short_frame_str(g->line) : NULL;
        if (line) {
            free(t->labels[i]);
            t->labels[i] = line;
        }
    }
    return true;
}

bool ot_site_table_head(struct ot_doc *d, const struct ot_analysis *a, const struct ot_report_opts *o, size_t name_max,
                        struct ot_site_table *t)
{
    const char *words = NULL;
    if (!ot_site_table_open(a, o, name_max, t)) {
        ot_doc_card_heading(d, "Top call sites", NULL);
        words = ot_sites_unknown;
    } else {
        ot_doc_card_heading(d, t->title, t->detail);
        if (*t->note)
            ot_doc_note(d, t->note);
        if (!t->st->n)
            words = "No allocations.";
    }
    if (!words)
        return true;
    ot_doc_para(d);
    ot_doc_printf(d, "%s", words);
    ot_doc_para_end(d);
    ot_site_table_close(t); /* the caller closes only a table it goes on to write */
    return false;
}

void ot_site_table_close(struct ot_site_table *t)
{
    ot_strv_free(t->labels, t->n);
    free(t->reps);
    t->labels = NULL;
    t->reps = NULL;
}

/* Why cites a call site by its stack id: a table that names sites gives the ids its rows stand for. */
static void row_stacks(const struct ot_site_table *t, size_t i, struct ot_site_row *r)
{
    const struct ot_sites *st = t->st;
    size_t nm = t->grouped ? st->groups[i].n : 1, shown = nm <= 6 ? nm : 5;
    size_t len = (size_t)snprintf(r->stacks, sizeof(r->stacks), nm > 1 ? "stacks " : "stack ");
    for (size_t k = 0; k < shown && len < sizeof(r->stacks); k++) {
        uint64_t id = t->grouped ? st->v[st->member[st->groups[i].first + k]].stack_id : t->reps[i].stack_id;
        len += (size_t)snprintf(r->stacks + len, sizeof(r->stacks) - len, "%s%" PRIu64,
                                k == 0 ? "" : k + 1 == nm ? " and " : ", ", id);
    }
    if (shown < nm && len < sizeof(r->stacks))
        snprintf(r->stacks + len, sizeof(r->stacks) - len, " and %zu more", nm - shown);
}

bool ot_site_table_row(const struct ot_site_table *t, size_t i, struct ot_site_row *r)
{
    const struct ot_sites *st = t->st;
    size_t n = t->n;
    if (!st || !t->reps || i > n || (i == n && t->rows == n))
        return false;
    uint64_t bytes;
    r->rest_word = t->grouped ? "row" : "site";
    if (i < n) {
        r->rank = i + 1;
        r->site = &t->reps[i];
        r->label = t->labels && t->labels[i] ? t->labels[i] : "?";
        r->nsites = t->grouped ? st->groups[i].n : 1;
        r->nrest = 0;
        bytes = r->site->bytes;
        ot_fmt_count(r->count, r->site->count);
        row_stacks(t, i, r);
    } else {
        uint64_t shown = 0;
        for (size_t k = 0; k < n; k++)
            shown = ot_sat_add(shown, t->reps[k].bytes);
        r->rank = 0;
        r->site = NULL;
        r->label = NULL;
        r->nsites = 0;
        r->nrest = t->rows - n;
        bytes = st->bytes >= shown ? st->bytes - shown : 0;
        r->count[0] = 0;
        r->stacks[0] = 0;
    }
    ot_fmt_bytes(r->bytes, bytes);
    r->share_pct = t->mo.whole ? 100.0 * (double)bytes / (double)t->mo.whole : 0;
    if (t->mo.whole)
        snprintf(r->share, sizeof(r->share), "%.1f%%", r->share_pct);
    else
        r->share[0] = 0;
    return true;
}

void ot_doc_subtitle(struct ot_doc *d, const struct ot_snapshot *s)
{
    const struct ot_meta *m = &s->meta;
    struct ot_sb cmd = {0};
    for (size_t i = 0; i < m->argc && cmd.n < 400; i++) {
        if (i)
            ot_sb_cstr(&cmd, " ");
        ot_sb_str(&cmd, m->argv[i]);
    }
    if (cmd.n)
        ot_doc_code(d, ot_sb_view(&cmd), 300);
    else
        ot_doc_printf(d, "(no command line)");
    ot_sb_free(&cmd);
    ot_doc_printf(d, " \xc2\xb7 pid %" PRIu64 " on ", m->pid);
    ot_doc_text(d, m->host.n ? m->host : ot_cstr("unknown host"), 128);
    if (m->rank >= 0) {
        ot_doc_printf(d, " \xc2\xb7 rank %" PRId64, m->rank);
        if (m->world_size > 0)
            ot_doc_printf(d, " of %" PRId64, m->world_size);
    }
    char buf[64], tb[48];
    if (ot_fmt_wall(buf, m->wall_ns))
        ot_doc_printf(d, " \xc2\xb7 %s", buf);
    ot_doc_printf(d, " (%s after the tracer started)", ot_fmt_reltime(tb, m->mono_ns, m->start_mono_ns));
    if (m->reason.n) {
        ot_doc_printf(d, " \xc2\xb7 reason: ");
        ot_doc_text(d, m->reason, 200);
    }
    bool by_crash;
    const char *unfinished = ot_unfinished_words(s, &by_crash);
    if (unfinished) {
        ot_doc_printf(d, " \xc2\xb7 ");
        ot_doc_bold(d, unfinished);
    }
}

const char *ot_result_name(uint64_t r)
{
    switch (r) {
    case 0:
        return "CUDA_SUCCESS";
    case 1:
        return "CUDA_ERROR_INVALID_VALUE";
    case 2:
        return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3:
        return "CUDA_ERROR_NOT_INITIALIZED";
    case 101:
        return "CUDA_ERROR_INVALID_DEVICE";
    case 201:
        return "CUDA_ERROR_INVALID_CONTEXT";
    case 801:
        return "CUDA_ERROR_NOT_SUPPORTED";
    default:
        return NULL;
    }
}

const char *ot_fmt_uuid(char *buf, struct ot_str u)
{
    if (!u.p || u.n == 0)
        return NULL;
    const unsigned char *b = (const unsigned char *)u.p;
    if (u.n == 16) {
        snprintf(buf, 80,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        return buf;
    }
    size_t o = 0;
    for (size_t i = 0; i < u.n && o + 3 < 80; i++)
        o += (size_t)snprintf(buf + o, 80 - o, "%02x", b[i]);
    buf[o] = 0;
    return buf;
}

void ot_imported_words(const struct ot_analysis *a, char *out, size_t cap)
{
    char b[32], b2[32];
    uint64_t sized = a->imported_count - a->imported_unsized;
    size_t n = 0;
    out[0] = 0;
    if (sized)
        n = (size_t)snprintf(out, cap, "%s in %s allocation%s", ot_fmt_bytes(b, a->imported_bytes),
                             ot_fmt_count(b2, sized), sized == 1 ? "" : "s");
    if (a->imported_unsized && n < cap)
        snprintf(out + n, cap - n, "%s%s%s whose size is not known (neither the driver nor a mapping gave it)",
                 sized ? ", and " : "", ot_fmt_count(b2, a->imported_unsized),
                 sized ? " more" : a->imported_unsized == 1 ? " allocation" : " allocations");
}

const char *ot_event_kind_words(int kind)
{
    return kind == OT_EV_CONTEXT_END ? "context end" : ot_event_kind_name(kind);
}
