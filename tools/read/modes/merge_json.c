/* The directory view's report in JSON (oomtrace-run/1, docs/JSON.md): one member per process with its peak,
 * how it ended and its probes, and the report of the process shown embedded as it would be printed alone. */
#include <inttypes.h>
#include <stdlib.h>

#include "render/json_breakdown.h"
#include "render/json_writer.h"
#include "modes/merge.h"

static void json_probes(struct ot_json *j, const struct snapinfo *x)
{
    ot_json_bool(j, "fatal", x->fatal);
    ot_json_u64_or_null(j, "probes_before", x->probes_known, x->nprobes);
}

static void json_rank(struct ot_json *j, const struct run *u, const struct proc *p)
{
    const struct snapinfo *x = &u->infos[p->kept];
    ot_json_obj(j, NULL);
    ot_json_i64_or_null(j, "rank", x->rank >= 0, x->rank);
    ot_json_i64_or_null(j, "local_rank", x->local_rank >= 0, x->local_rank);
    ot_json_i64_or_null(j, "world_size", x->world_size >= 0, x->world_size);
    ot_json_cstr(j, "host", x->host);
    ot_json_u64(j, "pid", x->pid);
    ot_json_i64_or_null(j, "device", x->peak_known, x->peak_device);
    ot_json_cstr(j, "device_uuid", x->uuid[0] ? x->uuid : NULL);
    ot_json_u64_or_null(j, "peak_bytes", x->peak_known, x->peak_bytes);
    ot_json_u64(j, "max_peak_bytes", x->max_peak);
    ot_json_u64_or_null(j, "at_failure_bytes", x->has_at_failure, x->at_failure_bytes);
    ot_json_bool(j, "failed", x->failed);
    if (p->has_exit || p->has_incomplete)
        ot_json_bool(j, "finished", p->has_exit);
    else
        ot_json_null(j, "finished");
    ot_json_cstr(j, "stopped_by", p->stopped);
    ot_json_cstr(j, "snapshot", x->path);
    ot_json_cstr(j, "trigger", ot_trigger_name(x->trigger));
    ot_json_u64(j, "snapshots", p->n);
    json_probes(j, x);
    if (p->crashed || p->killed) {
        const struct snapinfo *e = &u->infos[p->ended];
        ot_json_obj(j, "ended_by");
        ot_json_bool(j, "crashed", p->crashed);
        ot_json_cstr(j, "signal", p->crashed && e->crash_signal[0] ? e->crash_signal : NULL);
        ot_json_cstr(j, "description", p->crashed ? e->crash_words : NULL);
        ot_json_u64_or_null(j, "wall_ns", e->wall_ns != 0, e->wall_ns);
        ot_json_cstr(j, "snapshot", e->path);
        ot_json_obj_end(j);
    } else {
        ot_json_null(j, "ended_by");
    }
    ot_json_breakdown(j, "breakdown", &x->bd);
    if (x->failed) {
        ot_json_obj(j, "failure");
        ot_json_u64(j, "requested_bytes", x->requested);
        ot_json_cstr(j, "api", ot_api_name64(x->fail_api));
        ot_json_i64(j, "device", x->fail_device);
        ot_json_u64(j, "time_ns", x->fail_time_ns);
        ot_json_u64_or_null(j, "wall_ns", x->fail_wall_known, x->fail_wall_ns);
        ot_json_obj_end(j);
    } else {
        ot_json_null(j, "failure");
    }
    ot_json_obj_end(j);
}

/* A member whose value another writer produces (the embedded per-snapshot report). */
static void json_raw_member(struct ot_json *j, const char *key)
{
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = false;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->f);
    fprintf(j->f, "\"%s\": ", key);
}

static int embed_report(struct ot_json *j, const struct run *u, const char *key, const struct proc *p)
{
    if (!p) {
        ot_json_null(j, key);
        return 0;
    }
    const struct snapinfo *x = &u->infos[p->kept];
    struct ot_loaded l;
    char err[OT_ERRBUF];
    if (ot_load(&l, x->path, &u->r->lo, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", x->path, err);
        ot_json_null(j, key);
        return -1;
    }
    struct ot_report_opts ro = u->r->ro;
    ro.path = x->path;
    json_raw_member(j, key);
    int rc = ot_report_json(j->f, &l.an, &ro);
    ot_loaded_free(&l);
    return rc;
}

int merge_write_json(FILE *f, struct run *u)
{
    struct ot_json j;
    ot_json_init(&j, f);
    ot_json_obj(&j, NULL);
    ot_json_cstr(&j, "schema", OT_RUN_SCHEMA);
    ot_json_cstr(&j, "directory", u->dir);
    ot_json_u64(&j, "files", u->nfiles);
    ot_json_u64(&j, "readable", u->readable);
    ot_json_u64(&j, "processes", u->nprocs);
    ot_json_arr(&j, "ranks");
    for (size_t i = 0; i < u->nprocs; i++)
        json_rank(&j, u, &u->procs[i]);
    ot_json_arr_end(&j);
    ot_json_arr(&j, "unreadable_processes");
    for (size_t i = 0; i < u->nlost; i++) {
        const struct lostproc *l = &u->lost[i];
        ot_json_obj(&j, NULL);
        ot_json_i64_or_null(&j, "rank", l->rank >= 0, l->rank);
        ot_json_cstr(&j, "host", l->host);
        ot_json_u64(&j, "pid", l->pid);
        ot_json_cstr(&j, "trigger", l->trigger);
        ot_json_cstr(&j, "snapshot", l->path);
        ot_json_cstr(&j, "error", l->why);
        ot_json_u64(&j, "files", l->n);
        ot_json_obj_end(&j);
    }
    ot_json_arr_end(&j);
    if (u->first_fail) {
        const struct snapinfo *x = &u->infos[u->first_fail->kept];
        ot_json_obj(&j, "first_failure");
        ot_json_i64_or_null(&j, "rank", x->rank >= 0, x->rank);
        ot_json_cstr(&j, "host", x->host);
        ot_json_u64(&j, "pid", x->pid);
        ot_json_u64_or_null(&j, "wall_ns", x->fail_wall_known, x->fail_wall_ns);
        ot_json_u64(&j, "requested_bytes", x->requested);
        ot_json_cstr(&j, "api", ot_api_name64(x->fail_api));
        ot_json_i64(&j, "device", x->fail_device);
        ot_json_cstr(&j, "snapshot", x->path);
        ot_json_u64(&j, "failed_processes", u->nfailed);
        json_probes(&j, x);
        ot_json_obj_end(&j);
    } else {
        ot_json_null(&j, "first_failure");
    }
    if (u->imax && u->imin) {
        const struct snapinfo *mx = &u->infos[u->imax->kept], *mn = &u->infos[u->imin->kept];
        ot_json_obj(&j, "imbalance");
        ot_json_u64(&j, "max_peak_bytes", mx->peak_bytes);
        ot_json_i64_or_null(&j, "max_rank", mx->rank >= 0, mx->rank);
        ot_json_u64(&j, "max_pid", mx->pid);
        ot_json_u64(&j, "min_peak_bytes", mn->peak_bytes);
        ot_json_i64_or_null(&j, "min_rank", mn->rank >= 0, mn->rank);
        ot_json_u64(&j, "min_pid", mn->pid);
        ot_json_u64(&j, "difference_bytes", mx->peak_bytes - mn->peak_bytes);
        if (mn->peak_bytes)
            ot_json_f64(&j, "ratio", (double)mx->peak_bytes / (double)mn->peak_bytes);
        else
            ot_json_null(&j, "ratio");
        ot_json_obj_end(&j);
    } else {
        ot_json_null(&j, "imbalance");
    }
    ot_json_u64(&j, "crashed_processes", u->ncrashed);
    int rc = embed_report(&j, u, "failing_rank_report", u->first_fail);
    if (rc == 0)
        rc = embed_report(&j, u, "crashed_rank_report", u->first_fail ? NULL : u->first_crash);
    if (rc == 0)
        rc = embed_report(&j, u, "largest_peak_report", u->first_fail || u->first_crash ? NULL : u->report);
    ot_json_obj_end(&j);
    ot_json_end(&j);
    return rc;
}
