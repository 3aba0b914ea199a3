/* A directory of snapshots: one job's processes (torchrun, Slurm, MPI), each with one or more files
 * named oomtrace-HOST-PID[-rankR]-N-TRIGGER.oomt, and -flush.oomt files left by processes that did not
 * finish. Processes are told apart by META host, pid and the tracer's start, not by file name. Per process the most
 * informative snapshot is kept: its framework out-of-memory one (the fatal one: a framework refused its own
 * request), else its first out-of-memory one (by the failure's time), else its latest.
 * The view: a table per rank, which rank failed first by wall time, the imbalance of peaks between
 * ranks, and the report of the first failing process. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "modes/merge.h"
#include "render/wording.h"

static void fill_info(struct snapinfo *x, const struct ot_loaded *l)
{
    const struct ot_snapshot *s = &l->snap;
    const struct ot_meta *m = &s->meta;
    const struct ot_analysis *a = &l->an;
    x->ok = true;
    size_t hn = m->host.n < sizeof(x->host) - 1 ? m->host.n : sizeof(x->host) - 1;
    if (m->host.p)
        memcpy(x->host, m->host.p, hn);
    x->host[hn] = 0;
    x->pid = m->pid;
    size_t cn = 0;
    for (size_t i = 0; i < m->argc && cn + 1 < sizeof(x->command); i++) {
        if (i && cn + 1 < sizeof(x->command))
            x->command[cn++] = ' ';
        size_t w = m->argv[i].n < sizeof(x->command) - 1 - cn ? m->argv[i].n : sizeof(x->command) - 1 - cn;
        if (m->argv[i].p)
            memcpy(x->command + cn, m->argv[i].p, w);
        cn += w;
    }
    x->command[cn] = 0;
    x->rank = m->rank;
    x->local_rank = m->local_rank;
    x->world_size = m->world_size;
    x->trigger = m->trigger;
    x->complete = s->file_flags & OT_FILE_COMPLETE;
    x->mono_ns = m->mono_ns;
    x->wall_ns = m->wall_ns;
    x->snapshot_seq = m->snapshot_seq;
    x->start_mono_ns = m->start_mono_ns;
    if (m->wall_ns && m->mono_ns >= m->start_mono_ns && m->wall_ns >= m->mono_ns - m->start_mono_ns)
        x->start_wall_ns = m->wall_ns - (m->mono_ns - m->start_mono_ns);
    x->failed = s->has_failure;
    if (s->has_failure) {
        x->fail_time_ns = s->failure.time_ns;
        x->requested = s->failure.requested_bytes;
        x->fail_api = s->failure.api;
        ot_failure_api(x->fail_api_words, sizeof(x->fail_api_words), a);
        x->fail_device = s->failure.device;
        /* The failure's wall time: the snapshot's wall clock, less the monotonic time since the failure. */
        if (m->wall_ns && m->mono_ns >= s->failure.time_ns && m->wall_ns >= m->mono_ns - s->failure.time_ns) {
            x->fail_wall_ns = m->wall_ns - (m->mono_ns - s->failure.time_ns);
            x->fail_wall_known = true;
        }
    }
    x->has_at_failure = a->has_at_failure;
    x->at_failure_bytes = a->at_failure.bytes;
    x->peak_known = a->peak != NULL;
    if (a->peak) {
        x->peak_device = a->peak->device;
        x->peak_bytes = a->peak->bytes;
        const struct snap_device *d = ot_snapshot_device(s, a->peak->device);
        char ub[80];
        const char *u = d ? ot_fmt_uuid(ub, d->uuid) : NULL;
        snprintf(x->uuid, sizeof(x->uuid), "%s", u ? u : "");
    }
    x->max_peak = ot_max_peak(a, &x->max_peak_device);
    if (a->breakdown && a->breakdown->has_device)
        (void)ot_breakdown_copy(&x->bd, a->breakdown); /* out of memory: kept without its parts */
    if (m->trigger == OT_TRIGGER_FLUSH && !x->complete) {
        bool by_crash;
        (void)ot_unfinished_words(s, &by_crash);
        x->crash_signal = ot_flush_crash_signal(s);
        if (x->crash_signal)
            snprintf(x->crash_words, sizeof x->crash_words, "%.*s", (int)(m->reason.n < 63 ? m->reason.n : 63),
                     m->reason.p ? m->reason.p : "");
        x->no_last_flush = !by_crash;
    }
    x->ended_by = m->trigger != OT_TRIGGER_EXIT ? NULL
                  : ot_str_eq(m->reason, "ended by SIGTERM") ? "SIGTERM"
                  : ot_str_eq(m->reason, "ended by SIGINT") ? "SIGINT" : NULL;
    x->fatal = m->trigger == OT_TRIGGER_FRAMEWORK_OOM;
    if (x->fatal && s->probes.present) {
        x->probes_known = x->probes_listed = true;
        x->nprobes = s->probes.n;
    }
}

static const struct snapinfo *g_infos; /* qsort context */

static int cmp_proc_key(const void *p, const void *q)
{
    const struct snapinfo *a = &g_infos[*(const size_t *)p], *b = &g_infos[*(const size_t *)q];
    int c = strcmp(a->host, b->host);
    if (c)
        return c;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->start_mono_ns != b->start_mono_ns)
        return a->start_mono_ns < b->start_mono_ns ? -1 : 1;
    return *(const size_t *)p < *(const size_t *)q ? -1 : 1;
}

/* By rank (unknown ranks last), then host and pid: the rows' order, of readable processes and unreadable ones. */
static int cmp_rank_host_pid(int64_t ra, const char *ha, uint64_t pa, int64_t rb, const char *hb, uint64_t pb)
{
    if ((ra < 0) != (rb < 0))
        return ra < 0 ? 1 : -1;
    if (ra != rb)
        return ra < rb ? -1 : 1;
    int c = strcmp(ha, hb);
    if (c)
        return c;
    return pa < pb ? -1 : pa > pb;
}

static int cmp_rank(const void *p, const void *q)
{
    const struct proc *pa = p, *pb = q;
    const struct snapinfo *a = &g_infos[pa->kept], *b = &g_infos[pb->kept];
    int c = cmp_rank_host_pid(a->rank, a->host, a->pid, b->rank, b->host, b->pid);
    return c ? c : a->start_mono_ns < b->start_mono_ns ? -1 : a->start_mono_ns > b->start_mono_ns;
}

/* The imbalance of peaks is a property of one job's ranks: between ranks when at least two report one, else
 * between processes when all run one command line; never between a launcher, its helper and a worker. */
static void imbalance(struct run *u)
{
    size_t nranked = 0;
    bool one_command = true;
    for (size_t i = 0; i < u->nprocs; i++) {
        const struct snapinfo *x = &u->infos[u->procs[i].kept];
        nranked += x->rank >= 0;
        one_command = one_command && strcmp(x->command, u->infos[u->procs[0].kept].command) == 0;
    }
    if (nranked < 2 && !one_command)
        return;
    for (size_t i = 0; i < u->nprocs; i++) {
        const struct proc *p = &u->procs[i];
        const struct snapinfo *x = &u->infos[p->kept];
        if (!x->peak_known || (nranked >= 2 && x->rank < 0))
            continue;
        if (!u->imax || x->peak_bytes > u->infos[u->imax->kept].peak_bytes)
            u->imax = p;
        if (!u->imin || x->peak_bytes < u->infos[u->imin->kept].peak_bytes)
            u->imin = p;
    }
    if (u->imax && u->imin && u->infos[u->imax->kept].peak_bytes == u->infos[u->imin->kept].peak_bytes)
        u->imax = u->imin = NULL;
}

/* Is x a better snapshot to keep than y? The framework's refusal (the out-of-memory the program saw: the
 * driver-level ones before it were retries and probes it survived), else the first failure, else the latest. */
static bool better(const struct snapinfo *x, const struct snapinfo *y)
{
    if (x->fatal != y->fatal)
        return x->fatal;
    if (x->failed != y->failed)
        return x->failed;
    if (x->failed) {
        if (x->fail_time_ns != y->fail_time_ns)
            return x->fail_time_ns < y->fail_time_ns;
        return x->snapshot_seq < y->snapshot_seq;
    }
    if (x->mono_ns != y->mono_ns)
        return x->mono_ns > y->mono_ns;
    return x->snapshot_seq > y->snapshot_seq;
}

/* A fatal snapshot without its own probe list (written by an older companion): the same process's
 * driver-level out-of-memory snapshots that failed within OT_PROBE_WINDOW_NS before it (one monotonic
 * clock: one process) are taken as the framework's retries and probes of it. */
#define OT_PROBE_WINDOW_NS (5ull * 1000000000ull)

static void count_probes(struct run *u, struct proc *p)
{
    struct snapinfo *x = &u->infos[p->kept];
    if (!x->fatal || x->probes_known)
        return;
    x->probes_known = true;
    for (size_t k = p->first; k < p->first + p->n; k++) {
        const struct snapinfo *y = &u->infos[u->order[k]];
        if (y != x && y->failed && !y->fatal && y->fail_time_ns <= x->fail_time_ns &&
            x->fail_time_ns - y->fail_time_ns <= OT_PROBE_WINDOW_NS)
            x->nprobes++;
    }
}

bool merge_name_of(const char *path, struct lostproc *l)
{
    static const char *const triggers[] = {"framework-oom", "oom", "exit", "signal", "dump", "flush"};
    memset(l, 0, sizeof *l);
    l->rank = -1;
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (strncmp(b, "oomtrace-", 9) != 0 || n < 9 + 5 || strcmp(b + n - 5, ".oomt") != 0)
        return false;
    const char *s = b + 9, *e = b + n - 5;
    /* From the end: ".K" (a second snapshot in the same second), the trigger, the sequence number or run id. */
    const char *q = e;
    while (q > s && q[-1] >= '0' && q[-1] <= '9')
        q--;
    if (q < e && q > s && q[-1] == '.')
        e = q - 1;
    size_t t;
    for (t = 0; t < sizeof triggers / sizeof triggers[0]; t++) {
        size_t tl = strlen(triggers[t]);
        if ((size_t)(e - s) > tl + 1 && e[-(ptrdiff_t)tl - 1] == '-' && memcmp(e - tl, triggers[t], tl) == 0)
            break;
    }
    if (t == sizeof triggers / sizeof triggers[0])
        return false;
    snprintf(l->trigger, sizeof l->trigger, "%s", triggers[t]);
    e -= strlen(triggers[t]) + 1;
    q = e;
    while (q > s && q[-1] != '-')
        q--;
    if (q == e || q == s) /* the sequence number (digits) or the run id (r and hex digits) */
        return false;
    e = q - 1;
    /* "-rankR", then "-PID". */
    q = e;
    while (q > s && q[-1] >= '0' && q[-1] <= '9')
        q--;
    if (q < e && q - s > 5 && memcmp(q - 5, "-rank", 5) == 0) {
        l->rank = strtoll(q, NULL, 10);
        e = q - 5;
        q = e;
        while (q > s && q[-1] >= '0' && q[-1] <= '9')
            q--;
    }
    if (q == e || q - s < 2 || q[-1] != '-')
        return false;
    l->pid = strtoull(q, NULL, 10);
    size_t hl = (size_t)(q - 1 - s);
    if (hl >= sizeof l->host)
        hl = sizeof l->host - 1;
    memcpy(l->host, s, hl);
    l->host[hl] = 0;
    return true;
}

bool merge_lost_oom(const struct lostproc *l)
{
    return strcmp(l->trigger, "oom") == 0 || strcmp(l->trigger, "framework-oom") == 0;
}

static int cmp_lost(const void *p, const void *q)
{
    const struct lostproc *a = p, *b = q;
    return cmp_rank_host_pid(a->rank, a->host, a->pid, b->rank, b->host, b->pid);
}

/* The unreadable files of processes that have no readable one, a row each. */
static void collect_lost(struct run *u, const bool *bad, char (*why)[200])
{
    for (size_t i = 0; i < u->nfiles; i++) {
        struct lostproc l;
        if (!bad[i] || !merge_name_of(u->files[i], &l))
            continue;
        bool known = false;
        for (size_t k = 0; k < u->nprocs && !known; k++) {
            const struct snapinfo *x = &u->infos[u->procs[k].kept];
            known = x->pid == l.pid && strcmp(x->host, l.host) == 0;
        }
        if (known)
            continue;
        struct lostproc *m = NULL;
        for (size_t k = 0; k < u->nlost && !m; k++)
            if (u->lost[k].pid == l.pid && strcmp(u->lost[k].host, l.host) == 0)
                m = &u->lost[k];
        if (!m) {
            m = &u->lost[u->nlost++];
            *m = l;
        } else if (!merge_lost_oom(m) && merge_lost_oom(&l)) { /* its out-of-memory file is the one that matters */
            snprintf(m->trigger, sizeof m->trigger, "%s", l.trigger);
            m->path = NULL;
        }
        if (!m->path) {
            m->path = u->files[i];
            memcpy(m->why, why[i], sizeof m->why);
        }
        m->n++;
    }
    qsort(u->lost, u->nlost, sizeof *u->lost, cmp_lost);
}

/* A row's peak is the process's largest over its snapshots, what a gate on the directory measures: one that
 * recovered from an out-of-memory (a batch-size search) went higher after the failure its row keeps. Copied
 * into the kept snapshot's info, whose failure columns stay its own. */
static void process_peak(struct run *u, const struct proc *p)
{
    struct snapinfo *x = &u->infos[p->kept];
    const struct snapinfo *best = x;
    for (size_t k = p->first; k < p->first + p->n; k++) {
        const struct snapinfo *y = &u->infos[u->order[k]];
        if (y->peak_known && (!best->peak_known || y->peak_bytes > best->peak_bytes))
            best = y;
        if (y->max_peak > x->max_peak) {
            x->max_peak = y->max_peak;
            x->max_peak_device = y->max_peak_device;
        }
    }
    if (best != x) {
        x->peak_known = true;
        x->peak_device = best->peak_device;
        x->peak_bytes = best->peak_bytes;
        memcpy(x->uuid, best->uuid, sizeof x->uuid);
    }
}

static void run_free(struct run *u)
{
    free(u->lost);
    ot_strv_free(u->files, u->nfiles);
    for (size_t i = 0; u->infos && i < u->nfiles; i++)
        ot_breakdown_copy_free(&u->infos[i].bd);
    free(u->infos);
    free(u->order);
    free(u->procs);
}

int ot_run_dir(const char *dir, const struct ot_run_opts *r)
{
    struct run u = {.r = r, .dir = dir};
    char err[OT_ERRBUF];
    if (ot_list_snapshots(dir, &u.files, &u.nfiles, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", dir, err);
        return 2;
    }
    if (!u.nfiles) {
        ot_no_snapshot_msg(dir, err);
        fprintf(stderr, "oomtrace-read: %s: %s\n", dir, err);
        run_free(&u);
        return 2;
    }
    u.infos = calloc(u.nfiles, sizeof(*u.infos));
    u.order = calloc(u.nfiles, sizeof(size_t));
    u.procs = calloc(u.nfiles, sizeof(*u.procs));
    u.lost = calloc(u.nfiles, sizeof(*u.lost));
    bool *unreadable = calloc(u.nfiles, sizeof(bool));
    char(*why)[200] = calloc(u.nfiles, sizeof(*why));
    if (!u.infos || !u.order || !u.procs || !u.lost || !unreadable || !why) {
        free(unreadable);
        free(why);
        fprintf(stderr, "oomtrace-read: out of memory\n");
        run_free(&u);
        return 2;
    }
    /* Numbers only: symbols are read again for the one report shown. */
    struct ot_load_opts plain = r->lo;
    plain.symbolize = false;
    plain.regular_only = true; /* the directory's files */
    struct ot_gate_peak worst = {0};
    /* Bad files are counted and named by the first one, in one line after the report: a directory of a
     * thousand damaged files must not bury the report under a thousand lines. */
    size_t nbad = 0;
    char first_bad[OT_ERRBUF + 256] = "";
    for (size_t i = 0; i < u.nfiles; i++) {
        struct ot_loaded l;
        u.infos[i].path = u.files[i];
        if (ot_load(&l, u.files[i], &plain, err) < 0) {
            unreadable[i] = true;
            snprintf(why[i], sizeof why[i], "%.199s", err);
            if (!nbad++)
                snprintf(first_bad, sizeof first_bad, "%.200s: %.280s", u.files[i], err);
            continue;
        }
        fill_info(&u.infos[i], &l);
        struct ot_gate_peak q;
        ot_gate_peak_of_analysis(&l.an, u.files[i], &q);
        if (q.known && (!worst.known || q.bytes > worst.bytes))
            worst = q;
        ot_loaded_free(&l);
        u.order[u.readable++] = i;
    }
    if (!u.readable) {
        fprintf(stderr, "oomtrace-read: %s: none of the %zu snapshot files could be read (first: %s)\n", dir,
                u.nfiles, first_bad);
        free(unreadable);
        free(why);
        run_free(&u);
        return 2;
    }
    /* Group by process. */
    g_infos = u.infos;
    qsort(u.order, u.readable, sizeof(size_t), cmp_proc_key);
    for (size_t i = 0; i < u.readable; i++) {
        const struct snapinfo *x = &u.infos[u.order[i]];
        struct proc *p = u.nprocs ? &u.procs[u.nprocs - 1] : NULL;
        if (!p || strcmp(u.infos[p->kept].host, x->host) != 0 || u.infos[p->kept].pid != x->pid ||
            u.infos[p->kept].start_mono_ns != x->start_mono_ns) {
            p = &u.procs[u.nprocs++];
            p->first = i;
            p->kept = u.order[i];
        }
        p->n++;
        if (better(x, &u.infos[p->kept]))
            p->kept = u.order[i];
        if (x->trigger == OT_TRIGGER_EXIT && x->complete) {
            p->has_exit = true;
            p->stopped = x->ended_by;
        }
        if (!x->complete)
            p->has_incomplete = true;
        if (x->crash_signal || x->no_last_flush) {
            p->crashed = x->crash_signal != NULL;
            p->killed = !p->crashed;
            p->ended = u.order[i];
        }
    }
    /* A process that ended by exit did not crash, whatever an earlier flush says. One that crashed without
     * running out of memory is reported by its crash's flush, the state it died in. */
    for (size_t i = 0; i < u.nprocs; i++) {
        struct proc *p = &u.procs[i];
        if (p->has_exit)
            p->crashed = p->killed = false;
        if ((p->crashed || p->killed) && !u.infos[p->kept].failed)
            p->kept = p->ended;
    }
    for (size_t i = 0; i < u.nprocs; i++) {
        count_probes(&u, &u.procs[i]);
        process_peak(&u, &u.procs[i]);
    }
    qsort(u.procs, u.nprocs, sizeof(*u.procs), cmp_rank);
    collect_lost(&u, unreadable, why);
    free(unreadable);
    free(why);
    for (size_t i = 0; i < u.nprocs; i++) {
        const struct proc *p = &u.procs[i];
        const struct snapinfo *x = &u.infos[p->kept];
        if (x->failed) {
            u.nfailed++;
            const struct snapinfo *f = u.first_fail ? &u.infos[u.first_fail->kept] : NULL;
            /* By wall time when both are known (processes on different hosts share no monotonic clock). */
            if (!f || (x->fail_wall_known && (!f->fail_wall_known || x->fail_wall_ns < f->fail_wall_ns)))
                u.first_fail = p;
        }
        if (p->crashed || p->killed) {
            u.ncrashed++;
            const struct snapinfo *e = &u.infos[p->ended], *c = u.first_crash ? &u.infos[u.first_crash->ended] : NULL;
            /* A crash first, by wall time; a process killed without a word only when none crashed. */
            if (!c || (p->crashed && !u.first_crash->crashed) ||
                (p->crashed == u.first_crash->crashed && e->wall_ns < c->wall_ns))
                u.first_crash = p;
        }
        if (x->peak_known) {
            if (!u.pmax || x->peak_bytes > u.infos[u.pmax->kept].peak_bytes)
                u.pmax = p;
        }
    }
    u.report = u.first_fail ? u.first_fail : u.first_crash ? u.first_crash : u.pmax;
    imbalance(&u);

    struct ot_gate_result gr = {0};
    if (ot_gate_active(&r->gate)) {
        struct ot_gate_peak base;
        if (r->gate.growth_set && ot_gate_peak_of_path(r->gate.baseline, &r->lo, &base, err) < 0) {
            fprintf(stderr, "oomtrace-read: %s: %s\n", r->gate.baseline, err);
            run_free(&u);
            return 2;
        }
        ot_gate_eval(&r->gate, &worst, r->gate.growth_set ? &base : NULL, &gr);
    }

    FILE *out = stdout;
    if (r->out_path && !(out = fopen(r->out_path, "w"))) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", r->out_path, strerror(errno));
        run_free(&u);
        return 2;
    }
    errno = 0; /* (ot_output_end) */
    int rc = r->as_doc ? merge_write_doc(out, &u, r->doc) : r->json ? merge_write_json(out, &u) : merge_write_text(out, &u);
    int bad = ot_output_end(out, r->out_path);
    run_free(&u);
    if (bad < 0)
        return 2;
    if (rc < 0)
        return 2;
    int grc = ot_gate_report(&gr); /* a failed gate is said even when some files were bad */
    if (nbad) {
        fprintf(stderr, "oomtrace-read: %s: %zu of %zu snapshot files could not be read (first: %s)\n", dir, nbad,
                u.nfiles, first_bad);
        return 2;
    }
    return grc;
}
