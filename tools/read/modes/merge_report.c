/* The directory view's report, in text, JSON, markdown and HTML: the table per process, which one failed
 * first, the imbalance of peaks, and the report of the process shown (merge.c picks them). */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "modes/merge.h"

static const char *base_of(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

static const char *fmt_wall(char *buf, size_t len, uint64_t ns)
{
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;
    char d[48];
    if (!gmtime_r(&secs, &tm) || !strftime(d, sizeof(d), "%Y-%m-%d %H:%M:%S", &tm)) {
        snprintf(buf, len, "?");
        return buf;
    }
    snprintf(buf, len, "%s.%03u UTC", d, (unsigned)(ns % 1000000000u / 1000000u));
    return buf;
}

/* A process by its rank, or, without one (not a job of ranks), by its pid: the lines that give the pid after
 * the rank then leave it out (rankless). */
static void put_rank(FILE *f, const struct snapinfo *x)
{
    if (x->rank >= 0)
        fprintf(f, "rank %" PRId64, x->rank);
    else
        fprintf(f, "pid %" PRIu64, x->pid);
}

static bool rankless(const struct snapinfo *x)
{
    return x->rank < 0;
}

static void doc_rank(struct ot_doc *d, const struct snapinfo *x)
{
    put_rank(d->f, x);
}

static const char *finished_word(const struct proc *p)
{
    return p->stopped ? p->stopped : p->has_exit ? "yes" : p->has_incomplete ? "no" : "?";
}

/* The failed column: out of memory, else how a process that did not exit ended. */
static const char *failed_word(const struct proc *p, const struct snapinfo *x)
{
    return x->failed ? "yes" : p->crashed ? "crashed" : p->killed ? "killed" : "no";
}

/* The processes that crashed or were killed, one item each: which signal, and when the state shown was
 * written. A rank that died is the story of a job in which none ran out of memory. */
static void doc_crashes(struct ot_doc *d, const struct run *u)
{
    char wb[64];
    for (size_t i = 0; i < u->nprocs; i++) {
        const struct proc *p = &u->procs[i];
        if (!p->crashed && !p->killed)
            continue;
        const struct snapinfo *e = &u->infos[p->ended];
        ot_doc_item(d);
        doc_rank(d, e);
        if (!rankless(e))
            ot_doc_printf(d, " (pid %" PRIu64 ")", e->pid);
        if (p->crashed) {
            ot_doc_printf(d, " crashed: ");
            ot_doc_text(d, ot_cstr(e->crash_words), sizeof e->crash_words);
            if (e->crash_signal[0])
                ot_doc_printf(d, " (%s)", e->crash_signal);
            ot_doc_printf(d, "; its state at the crash");
        } else {
            ot_doc_printf(d, " ended without a last flush (killed by SIGKILL or by the kernel's OOM killer, or still "
                             "running); its last timed flush");
        }
        if (e->wall_ns)
            ot_doc_printf(d, " was written at %s", fmt_wall(wb, sizeof(wb), e->wall_ns));
        ot_doc_printf(d, ", ");
        ot_doc_code(d, ot_cstr(base_of(e->path)), 256);
        ot_doc_item_end(d);
    }
}

/* The fatal snapshot's line about the driver-level ones before it. */
static void put_probes(struct ot_doc *d, const struct snapinfo *x)
{
    if (!x->fatal)
        return;
    ot_doc_item(d);
    ot_doc_printf(d, "the framework's own out-of-memory, the fatal one");
    if (x->probes_known)
        ot_doc_printf(d, "; %zu driver-level snapshot%s before it %s the framework's retries and probes%s", x->nprobes,
                      x->nprobes == 1 ? "" : "s", x->nprobes == 1 ? "was" : "were",
                      x->probes_listed ? "" : " (this process's out-of-memory snapshots of the seconds before it)");
    ot_doc_item_end(d);
}

/* A run of one process that has no rank (`oomtrace run -- ./prog`) reads as that one process, not as a table
 * of ranks with one row of "?": the process (pid, host, command), which of its snapshots is reported, and
 * whether it finished. The report that follows says the rest. */
static bool one_process(const struct run *u)
{
    return u->nprocs == 1 && !u->nlost && u->infos[u->procs[0].kept].rank < 0;
}

/* "rank 2" or "pid 999" for a process known only by a file's name. */
static void doc_lost_name(struct ot_doc *d, const struct lostproc *l)
{
    if (l->rank >= 0)
        ot_doc_printf(d, "rank %" PRId64 " (pid %" PRIu64 ")", l->rank, l->pid);
    else
        ot_doc_printf(d, "pid %" PRIu64, l->pid);
}

/* Under the first failure (or its absence): the processes whose out-of-memory snapshot could not be read, any
 * of which may have failed first. */
static void doc_lost_failures(struct ot_doc *d, const struct run *u)
{
    size_t n = 0;
    for (size_t i = 0; i < u->nlost; i++)
        n += merge_lost_oom(&u->lost[i]);
    if (!n)
        return;
    ot_doc_para(d);
    ot_doc_printf(d, "Of the readable snapshots only: the out-of-memory snapshot%s of ", n == 1 ? "" : "s");
    for (size_t i = 0, k = 0; i < u->nlost; i++) {
        const struct lostproc *l = &u->lost[i];
        if (!merge_lost_oom(l))
            continue;
        ot_doc_printf(d, "%s", k++ ? (k == n ? " and " : ", ") : "");
        doc_lost_name(d, l);
    }
    ot_doc_printf(d, " could not be read, so %s may have failed first.", n == 1 ? "it" : "one of them");
    ot_doc_para_end(d);
}

static void doc_one_process(struct ot_doc *d, const struct run *u)
{
    const struct proc *p = &u->procs[0];
    const struct snapinfo *x = &u->infos[p->kept];
    ot_doc_para(d);
    ot_doc_printf(d, "%zu snapshot file%s in ", u->nfiles, u->nfiles == 1 ? "" : "s");
    ot_doc_code(d, ot_cstr(u->dir), 512);
    if (u->readable != u->nfiles)
        ot_doc_printf(d, " (%zu readable)", u->readable);
    ot_doc_printf(d, ", all from one process: pid %" PRIu64 " on ", x->pid);
    ot_doc_text(d, ot_cstr(x->host), 64);
    if (x->command[0]) {
        ot_doc_printf(d, ", ");
        ot_doc_code(d, ot_cstr(x->command), sizeof(x->command));
    }
    if (p->crashed) {
        const struct snapinfo *e = &u->infos[p->ended];
        ot_doc_printf(d, "; it crashed: ");
        ot_doc_text(d, ot_cstr(e->crash_words), sizeof e->crash_words);
        if (e->crash_signal[0])
            ot_doc_printf(d, " (%s)", e->crash_signal);
    } else {
        if (p->stopped)
            ot_doc_printf(d, "; it was ended by %s (its exit snapshot was written then)", p->stopped);
        else
            ot_doc_printf(d, "%s", p->has_exit ? "; it finished (exit snapshot)"
                                   : p->has_incomplete ? "; it did not finish (a crash-surviving flush remains)" : "");
    }
    ot_doc_printf(d, ". Reported: %s, ", x->fatal ? "its framework's out-of-memory" : x->failed ? "its first out-of-memory"
                                         : p->crashed ? "its state at the crash" : "its latest snapshot");
    ot_doc_code(d, ot_cstr(base_of(x->path)), 256);
    ot_doc_printf(d, ".");
    ot_doc_para_end(d);
    put_probes(d, x);
    ot_doc_list_end(d);
}

static void text_table(FILE *f, struct run *u)
{
    char b1[32], b2[32];
    fprintf(f, "oomtrace-read: run in ");
    ot_fput_safe_max(f, ot_cstr(u->dir), 512);
    fprintf(f, ": %zu snapshot file%s, %zu readable, %zu process%s", u->nfiles, u->nfiles == 1 ? "" : "s", u->readable,
            u->nprocs, u->nprocs == 1 ? "" : "es");
    if (u->nlost)
        fprintf(f, " and %zu known only by the name of a file that could not be read", u->nlost);
    fputc('\n', f);
    fputs("  (peak: the process's largest high-water mark of tracked device memory over its snapshots, on the device\n"
          "   shown; at failure: live on it when the allocation failed; failed: yes when it ran out of memory, crashed\n"
          "   when a fatal signal ended it, killed when it ended without a last flush; finished: yes with an exit\n"
          "   snapshot, SIGTERM or SIGINT when that signal ended it (its exit snapshot written then), no when a\n"
          "   crash-surviving flush remains, ? otherwise)\n",
          f);
    fprintf(f, "  %-6s %-16s %-8s %-24s %-10s %-11s %-6s %-8s %s\n", "rank", "host", "pid", "device", "peak", "at failure",
            "failed", "finished", "snapshot (files)");
    for (size_t i = 0; i < u->nprocs; i++) {
        const struct proc *p = &u->procs[i];
        const struct snapinfo *x = &u->infos[p->kept];
        char rank[24], dev[64], uuid[16];
        if (x->rank >= 0)
            snprintf(rank, sizeof(rank), "%" PRId64, x->rank);
        else
            snprintf(rank, sizeof(rank), "?");
        /* "GPU-" and the first 8 hex digits: enough to tell the devices of a node apart. */
        snprintf(uuid, sizeof(uuid), "%.12s", x->uuid);
        if (x->peak_known)
            snprintf(dev, sizeof(dev), "%" PRId64 "%s%s", x->peak_device, uuid[0] ? " " : "", uuid);
        else
            snprintf(dev, sizeof(dev), "?");
        fprintf(f, "  %-6s ", rank);
        ot_fput_safe_max(f, ot_cstr(x->host), 64);
        size_t hl = strlen(x->host);
        fprintf(f, "%*s %-8" PRIu64 " %-24s %-10s %-11s %-7s %-8s ", hl < 16 ? (int)(16 - hl) : 0, "", x->pid, dev,
                x->peak_known ? ot_fmt_bytes(b1, x->peak_bytes) : "?",
                x->has_at_failure ? ot_fmt_bytes(b2, x->at_failure_bytes) : "-", failed_word(p, x), finished_word(p));
        ot_fput_safe_max(f, ot_cstr(base_of(x->path)), 256);
        fprintf(f, " (%zu)\n", p->n);
    }
    /* A process known only by an unreadable file's name keeps its row: what the name says, and why. */
    for (size_t i = 0; i < u->nlost; i++) {
        const struct lostproc *l = &u->lost[i];
        char rank[24];
        if (l->rank >= 0)
            snprintf(rank, sizeof(rank), "%" PRId64, l->rank);
        else
            snprintf(rank, sizeof(rank), "?");
        fprintf(f, "  %-6s ", rank);
        ot_fput_safe_max(f, ot_cstr(l->host), 64);
        size_t hl = strlen(l->host);
        fprintf(f, "%*s %-8" PRIu64 " %-24s %-10s %-11s %-7s %-8s ", hl < 16 ? (int)(16 - hl) : 0, "", l->pid, "?", "?",
                "?", merge_lost_oom(l) ? "yes?" : "?", "?");
        ot_fput_safe_max(f, ot_cstr(base_of(l->path)), 256);
        fprintf(f, " (%zu): unreadable: ", l->n);
        ot_fput_safe_max(f, ot_cstr(l->why), sizeof l->why);
        fputc('\n', f);
    }
}

#define OT_THEN_SHOWN 8

static int cmp_fail_time(const void *p, const void *q)
{
    const struct snapinfo *a = *(const struct snapinfo *const *)p, *b = *(const struct snapinfo *const *)q;
    if (a->fail_wall_known != b->fail_wall_known)
        return a->fail_wall_known ? -1 : 1;
    if (a->fail_wall_ns != b->fail_wall_ns)
        return a->fail_wall_ns < b->fail_wall_ns ? -1 : 1;
    return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/* Several processes that report the same rank: two jobs' snapshots in one directory, or a launcher that set
 * RANK alike for all. The table reads as one job's ranks, so it is said. */
static void doc_duplicate_ranks(struct ot_doc *d, const struct run *u)
{
    for (size_t i = 0; i < u->nprocs; i++) { /* the table is by rank: equal ranks are neighbours */
        const struct snapinfo *x = &u->infos[u->procs[i].kept];
        if (x->rank < 0 || (i && u->infos[u->procs[i - 1].kept].rank == x->rank))
            continue;
        size_t n = 1;
        while (i + n < u->nprocs && u->infos[u->procs[i + n].kept].rank == x->rank)
            n++;
        if (n < 2)
            continue;
        ot_doc_para(d);
        ot_doc_printf(d, "%zu processes report rank %" PRId64 " (pid", n, x->rank);
        for (size_t k = 0; k < n; k++)
            ot_doc_printf(d, "%s %" PRIu64, k ? "," : "", u->infos[u->procs[i + k].kept].pid);
        ot_doc_printf(d, "): snapshots of more than one job in this directory, or RANK set alike for several "
                         "processes.");
        ot_doc_para_end(d);
    }
}

/* Processes with one host and pid, told apart by when their tracer started: a container restarted after its
 * failure (PID 1 again, the pod's host name, the same volume), or a pid reused. Said, since their rows read
 * alike. */
static void doc_same_pid(struct ot_doc *d, const struct run *u)
{
    char wb[64];
    for (size_t i = 0; i < u->nprocs; i++) {
        const struct snapinfo *x = &u->infos[u->procs[i].kept];
        size_t n = 0, j;
        for (j = 0; j < u->nprocs; j++) {
            const struct snapinfo *y = &u->infos[u->procs[j].kept];
            if (y->pid == x->pid && strcmp(y->host, x->host) == 0) {
                if (j < i)
                    break;
                n++;
            }
        }
        if (j < u->nprocs || n < 2)
            continue;
        ot_doc_para(d);
        ot_doc_printf(d, "%zu processes were pid %" PRIu64 " on ", n, x->pid);
        ot_doc_text(d, ot_cstr(x->host), 64);
        ot_doc_printf(d, ", started");
        for (j = 0, n = 0; j < u->nprocs; j++) {
            const struct snapinfo *y = &u->infos[u->procs[j].kept];
            if (y->pid != x->pid || strcmp(y->host, x->host) != 0)
                continue;
            ot_doc_printf(d, "%s%s", n++ ? ", " : " ", y->start_wall_ns ? fmt_wall(wb, sizeof wb, y->start_wall_ns) : "?");
            ot_doc_printf(d, " (");
            ot_doc_code(d, ot_cstr(base_of(y->path)), 256);
            ot_doc_printf(d, ")");
        }
        ot_doc_printf(d, ": a program restarted with the same pid (a container's PID 1 on one host name and volume), "
                         "each run a process of its own.");
        ot_doc_para_end(d);
    }
}

/* Which process failed first, the others after it, the imbalance of peaks: in every format. */
static void summary(struct ot_doc *d, struct run *u)
{
    char b1[32], b2[32], wb[64];
    doc_duplicate_ranks(d, u);
    doc_same_pid(d, u);
    if (u->first_fail) {
        const struct snapinfo *x = &u->infos[u->first_fail->kept];
        ot_doc_para(d);
        ot_doc_bold(d, "First failure:");
        ot_doc_printf(d, " ");
        doc_rank(d, x);
        if (rankless(x))
            ot_doc_printf(d, " on ");
        else
            ot_doc_printf(d, " (pid %" PRIu64 " on ", x->pid);
        ot_doc_text(d, ot_cstr(x->host), 64);
        if (!rankless(x))
            ot_doc_printf(d, ")");
        if (x->fail_wall_known)
            ot_doc_printf(d, " at %s", fmt_wall(wb, sizeof(wb), x->fail_wall_ns));
        ot_doc_printf(d, ": %s by %s on device %" PRId64 "; %zu of %zu process%s failed", ot_fmt_bytes(b1, x->requested),
                      x->fail_api_words, x->fail_device, u->nfailed, u->nprocs, u->nprocs == 1 ? "" : "es");
        ot_doc_para_end(d);
        put_probes(d, x);
        /* The others, by how long after the first they failed (those without a wall time last), at most
         * OT_THEN_SHOWN of them: thirty "then" lines would push the rest off the first screen. */
        const struct snapinfo **then = calloc(u->nprocs ? u->nprocs : 1, sizeof *then);
        size_t nthen = 0;
        for (size_t i = 0; then && i < u->nprocs; i++)
            if (&u->procs[i] != u->first_fail && u->infos[u->procs[i].kept].failed)
                then[nthen++] = &u->infos[u->procs[i].kept];
        if (nthen > 1)
            qsort(then, nthen, sizeof *then, cmp_fail_time);
        for (size_t i = 0; i < nthen; i++) {
            const struct snapinfo *y = then[i];
            ot_doc_item(d);
            if (i == OT_THEN_SHOWN) {
                ot_doc_printf(d, "and %zu more process%s failed after them", nthen - i, nthen - i == 1 ? "" : "es");
                ot_doc_item_end(d);
                break;
            }
            ot_doc_printf(d, "then ");
            doc_rank(d, y);
            if (!rankless(y))
                ot_doc_printf(d, " (pid %" PRIu64 ")", y->pid);
            if (y->fail_wall_known && x->fail_wall_known && y->fail_wall_ns >= x->fail_wall_ns)
                ot_doc_printf(d, " %.3f s later", (double)(y->fail_wall_ns - x->fail_wall_ns) / 1e9);
            ot_doc_printf(d, ": %s on device %" PRId64, ot_fmt_bytes(b1, y->requested), y->fail_device);
            ot_doc_item_end(d);
        }
        free(then);
        doc_crashes(d, u);
        ot_doc_list_end(d);
        doc_lost_failures(d, u);
    } else if (u->first_crash) {
        ot_doc_para(d);
        ot_doc_bold(d, u->first_crash->crashed ? "A process crashed:" : "A process was killed:");
        ot_doc_printf(d, " none ran out of memory; %zu of %zu process%s ended by a signal", u->ncrashed, u->nprocs,
                      u->nprocs == 1 ? "" : "es");
        ot_doc_para_end(d);
        doc_crashes(d, u);
        ot_doc_list_end(d);
        doc_lost_failures(d, u);
    } else {
        ot_doc_para(d);
        ot_doc_printf(d, "No process failed (%zu process%s).", u->nprocs, u->nprocs == 1 ? "" : "es");
        ot_doc_para_end(d);
        doc_lost_failures(d, u);
    }
    if (u->imax && u->imin) {
        const struct snapinfo *mx = &u->infos[u->imax->kept], *mn = &u->infos[u->imin->kept];
        ot_doc_para(d);
        ot_doc_bold(d, mx->rank >= 0 && mn->rank >= 0 ? "Imbalance between ranks:" : "Imbalance between processes:");
        ot_doc_printf(d, " peaks from %s (", ot_fmt_bytes(b1, mn->peak_bytes));
        doc_rank(d, mn);
        if (!rankless(mn))
            ot_doc_printf(d, ", pid %" PRIu64, mn->pid);
        ot_doc_printf(d, ") to %s (", ot_fmt_bytes(b2, mx->peak_bytes));
        doc_rank(d, mx);
        if (!rankless(mx))
            ot_doc_printf(d, ", pid %" PRIu64, mx->pid);
        ot_doc_printf(d, "): difference %s", ot_fmt_bytes(b1, mx->peak_bytes - mn->peak_bytes));
        if (mn->peak_bytes)
            ot_doc_printf(d, ", max/min %.2f", (double)mx->peak_bytes / (double)mn->peak_bytes);
        ot_doc_para_end(d);
    }
}

static int report_text_of(FILE *f, const struct run *u, const struct snapinfo *x);

static const char *report_heading(const struct run *u)
{
    return u->first_fail                                 ? "Report of the first process to fail, "
           : u->first_crash && u->first_crash->crashed ? "Report of the process that crashed first, its state at the crash, "
           : u->first_crash                              ? "Report of the process killed first, its last timed flush, "
                                                         : "Report of the process with the largest peak, ";
}

int merge_write_text(FILE *f, struct run *u)
{
    struct ot_doc d = {.f = f, .kind = OT_DOC_TEXT};
    if (one_process(u) && u->report) {
        fputs("oomtrace-read: ", f);
        doc_one_process(&d, u);
        fputc('\n', f);
        return report_text_of(f, u, &u->infos[u->report->kept]);
    }
    text_table(f, u);
    fputc('\n', f);
    summary(&d, u);
    merge_text_breakdowns(f, u);
    if (!u->report)
        return 0;
    const struct snapinfo *x = &u->infos[u->report->kept];
    fputs("\n", f);
    fputs(report_heading(u), f);
    put_rank(f, x);
    fputs(" (", f);
    ot_fput_safe_max(f, ot_cstr(base_of(x->path)), 256);
    fputs("):\n\n", f);
    return report_text_of(f, u, x);
}

static int report_text_of(FILE *f, const struct run *u, const struct snapinfo *x)
{
    struct ot_loaded l;
    char err[OT_ERRBUF];
    if (ot_load(&l, x->path, &u->r->lo, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", x->path, err);
        return -1;
    }
    struct ot_report_opts ro = u->r->ro;
    ro.path = x->path;
    int rc = ot_report_text(f, &l.an, &ro);
    ot_loaded_free(&l);
    return rc;
}

/* The processes as a table (markdown, HTML), and the summary under it. */
static void doc_run(struct ot_doc *d, const struct run *u)
{
    char b1[32], b2[32];
    ot_doc_para(d);
    ot_doc_printf(d, "%zu snapshot file%s in ", u->nfiles, u->nfiles == 1 ? "" : "s");
    ot_doc_code(d, ot_cstr(u->dir), 512);
    ot_doc_printf(d, ", %zu readable, %zu process%s", u->readable, u->nprocs, u->nprocs == 1 ? "" : "es");
    if (u->nlost)
        ot_doc_printf(d, " and %zu known only by the name of a file that could not be read", u->nlost);
    ot_doc_printf(d, ".");
    ot_doc_para_end(d);
    static const char *const heads[] = {"Rank", "Host", "Pid", "Device", "Peak", "At failure", "Failed", "Finished",
                                        "Snapshot (files)"};
    ot_doc_table(d, heads, "rlrlrrlll");
    for (size_t i = 0; i < u->nprocs; i++) {
        const struct proc *p = &u->procs[i];
        const struct snapinfo *x = &u->infos[p->kept];
        ot_doc_row(d);
        ot_doc_cell(d);
        if (x->rank >= 0)
            ot_doc_printf(d, "%" PRId64, x->rank);
        else
            ot_doc_printf(d, "?");
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_text(d, ot_cstr(x->host), 64);
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_printf(d, "%" PRIu64, x->pid);
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        if (x->peak_known) {
            char uuid[16];
            snprintf(uuid, sizeof(uuid), "%.12s", x->uuid); /* "GPU-" and 8 hex digits tell a node's devices apart */
            ot_doc_printf(d, "%" PRId64 " ", x->peak_device);
            ot_doc_text(d, ot_cstr(uuid), 0);
        } else {
            ot_doc_printf(d, "?");
        }
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_printf(d, "%s", x->peak_known ? ot_fmt_bytes(b1, x->peak_bytes) : "?");
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_printf(d, "%s", x->has_at_failure ? ot_fmt_bytes(b2, x->at_failure_bytes) : "-");
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_printf(d, "%s", failed_word(p, x));
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_printf(d, "%s", finished_word(p));
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_code(d, ot_cstr(base_of(x->path)), 256);
        ot_doc_printf(d, " (%zu)", p->n);
        ot_doc_cell_end(d);
        ot_doc_row_end(d);
    }
    for (size_t i = 0; i < u->nlost; i++) {
        const struct lostproc *l = &u->lost[i];
        ot_doc_row(d);
        ot_doc_cell(d);
        if (l->rank >= 0)
            ot_doc_printf(d, "%" PRId64, l->rank);
        else
            ot_doc_printf(d, "?");
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_text(d, ot_cstr(l->host), 64);
        ot_doc_cell_end(d);
        ot_doc_cell(d);
        ot_doc_printf(d, "%" PRIu64, l->pid);
        ot_doc_cell_end(d);
        for (int c = 0; c < 5; c++) { /* device, peak, at failure, failed, finished */
            ot_doc_cell(d);
            ot_doc_printf(d, "%s", c == 3 && merge_lost_oom(l) ? "yes?" : "?");
            ot_doc_cell_end(d);
        }
        ot_doc_cell(d);
        ot_doc_code(d, ot_cstr(base_of(l->path)), 256);
        ot_doc_printf(d, " (%zu): unreadable: ", l->n);
        ot_doc_text(d, ot_cstr(l->why), sizeof l->why);
        ot_doc_cell_end(d);
        ot_doc_row_end(d);
    }
    ot_doc_table_end(d);
    ot_doc_para(d);
    ot_doc_printf(d, "Peak: the process's largest high-water mark of tracked device memory over its snapshots, on the "
                  "device shown. At failure: live on it when the allocation failed. Failed: yes when it ran out of "
                  "memory, crashed when a fatal signal ended it, killed when it ended without a last flush. Finished: "
                  "yes with an exit snapshot, SIGTERM or SIGINT when that signal ended it (its exit snapshot written then), no when a "
                  "crash-surviving flush remains, ? otherwise.");
    ot_doc_para_end(d);
    summary(d, (struct run *)u);
}

/* HTML: the run's card, at the top of the shown process's report. */
static void html_run_card(FILE *f, const void *ctx)
{
    struct ot_doc d = {.f = f, .kind = OT_DOC_HTML};
    if (one_process(ctx)) {
        fputs("<section class=\"card\" id=\"run\"><h2>The run: one process</h2>\n", f);
        doc_one_process(&d, ctx);
        fputs("</section>\n", f);
        return;
    }
    fputs("<section class=\"card\" id=\"run\"><h2>The run: one snapshot per process</h2>\n", f);
    doc_run(&d, ctx);
    fputs("</section>\n", f);
}

int merge_write_doc(FILE *f, struct run *u, enum ot_doc_kind kind)
{
    struct ot_doc d = {.f = f, .kind = kind};
    const struct snapinfo *x = u->report ? &u->infos[u->report->kept] : NULL;
    struct ot_loaded l;
    char err[OT_ERRBUF];
    if (x && ot_load(&l, x->path, &u->r->lo, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", x->path, err);
        return -1;
    }
    struct ot_report_opts ro = u->r->ro;
    int rc = 0;
    if (kind == OT_DOC_MARKDOWN && x && one_process(u)) {
        ot_doc_page(&d, "oomtrace: a run of one process");
        doc_one_process(&d, u);
        ot_doc_rule(&d);
    } else if (kind == OT_DOC_MARKDOWN || !x) {
        ot_doc_page(&d, "oomtrace: a run's processes");
        doc_run(&d, u);
        if (!x) {
            ot_doc_page_end(&d);
            return ferror(f) ? -1 : 0;
        }
        ot_doc_rule(&d);
        ot_doc_para(&d);
        ot_doc_printf(&d, "%s", report_heading(u));
        doc_rank(&d, x);
        ot_doc_printf(&d, ":");
        ot_doc_para_end(&d);
    } else {
        ro.prelude = html_run_card;
        ro.prelude_ctx = u;
    }
    ro.path = x->path;
    rc = kind == OT_DOC_MARKDOWN ? ot_report_markdown(f, &l.an, &ro) : ot_report_html(f, &l.an, &ro);
    ot_loaded_free(&l);
    return rc;
}
