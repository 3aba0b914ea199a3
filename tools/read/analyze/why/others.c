/* other_processes: memory other processes held on the device (NVML), and what this process left
 * untracked. */
#include "analyze/why/item.h"

#include <inttypes.h>


#define OT_WHY_PIDS_SHOWN 4

bool why_process_is_child(const struct ot_process *p)
{
    return p->relation == OT_PROCESS_RELATION_CHILD;
}

void why_put_process(FILE *f, const struct ot_snapshot *s, const struct ot_process *p)
{
    fprintf(f, "pid %" PRIu64, p->pid);
    /* The parent: this process's own record says so even in files without relations. */
    bool parent = p->relation == OT_PROCESS_RELATION_PARENT ||
                  (p->pid && s->meta.pid && p->pid != s->meta.pid && s->meta.ppid == p->pid);
    const char *rel = why_process_is_child(p) ? "a child of this process" : parent ? "this process's parent" : NULL;
    if (!p->name.n && !rel)
        return;
    fputs(" (", f);
    if (p->name.n)
        ot_fput_safe_max(f, p->name, 64);
    if (p->name.n && p->name_source == OT_PROCESS_NAME_NVML)
        fputs(", named by NVML", f);
    if (rel)
        fprintf(f, "%s%s", p->name.n ? ", " : "", rel);
    fputc(')', f);
}

void why_others(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    if (!s->has_processes)
        return;
    size_t nother = 0;
    uint64_t other = ot_other_process_bytes(s, dev, &nother);
    if (!nother || !other)
        return;
    char b1[32], b2[32], b3[32], b4[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "other_processes",
            "Memory was held by other processes: %s in %zu other process%s on device %" PRId64 " (", why_bytes(b1, other),
            nother, nother == 1 ? "" : "es", dev))
        return;
    size_t shown = 0;
    uint64_t top_pid = 0, top_bytes = 0;
    for (size_t i = 0; i < s->nprocesses; i++) {
        const struct ot_process *p = &s->processes[i];
        if (p->device != dev || p->pid == s->meta.pid)
            continue;
        if (p->used_bytes > top_bytes || !top_pid) {
            top_bytes = p->used_bytes;
            top_pid = p->pid;
        }
        if (shown < OT_WHY_PIDS_SHOWN) {
            fputs(shown ? ", " : "", b.f);
            why_put_process(b.f, s, p);
            fprintf(b.f, ": %s", why_bytes(b1, p->used_bytes));
            shown++;
        }
    }
    if (nother > shown)
        fprintf(b.f, ", %zu more", nother - shown);
    fputs("; NVML at the snapshot)", b.f);
    const struct snap_device *d = ot_snapshot_device(s, dev);
    uint64_t tracked = d ? d->tracked_bytes : 0;
    if (d)
        fprintf(b.f, "; this process tracked %s", why_bytes(b1, tracked));
    bool mi = d && (d->flags & OT_DEV_MEMINFO_KNOWN) && d->total_bytes >= d->free_bytes;
    bool bl = d && (d->flags & OT_DEV_BASELINE_KNOWN);
    /* NVML's own line for this process is the direct measure: everything the process holds on the
     * device, context and modules included. Untracked is what of it no allocation call explains. */
    uint64_t self_used = 0;
    for (size_t i = 0; i < s->nprocesses; i++)
        if (s->processes[i].device == dev && s->processes[i].pid == s->meta.pid)
            self_used = s->processes[i].used_bytes;
    /* What the stream-ordered pools keep beyond their allocations is in NVML's figure and in the device's
     * used memory, and oomtrace saw it (POOLS): it is not untracked. */
    struct ot_pool_totals pt = ot_pools_of(s, dev);
    uint64_t pooled = pt.reserved_bytes > pt.used_bytes ? pt.reserved_bytes - pt.used_bytes : 0;
    if (mi && self_used) {
        uint64_t used = d->total_bytes - d->free_bytes, mine = ot_sat_add(tracked, pooled);
        fprintf(b.f, "; the device used %s; NVML counts %s for this process", why_bytes(b1, used), why_bytes(b2, self_used));
        if (pooled)
            fprintf(b.f, ", %s of it idle in its stream-ordered pools", why_bytes(b1, pooled));
        fprintf(b.f, ", so untracked in this process (context, modules, memory no allocation call explains) = %s%s",
                self_used >= mine ? "" : "-", why_bytes(b3, self_used >= mine ? self_used - mine : mine - self_used));
        if (self_used < mine) /* (helper-91 #8: the other branch said why it can go below zero; this one did not) */
            fputs(", below zero: NVML counts less for this process than its allocations hold (its figure read at "
                  "another moment than the live set, or memory it counts under another process, as one mapped from "
                  "another process's IPC handle)", b.f);
        why_num_u(&b, "used_bytes", used);
        why_num_u(&b, "self_nvml_bytes", self_used);
        why_num_i(&b, "untracked_bytes", self_used >= mine ? (int64_t)(self_used - mine) : -(int64_t)(mine - self_used));
    } else if (mi) {
        struct ot_untracked u;
        ot_untracked_of(s, d, &u);
        uint64_t used = u.used, base = u.baseline, known = u.explained;
        fprintf(b.f, "; the device used %s", why_bytes(b1, used));
        if (bl)
            fprintf(b.f, ", %s of it before this process's first allocation (baseline)", why_bytes(b2, base));
        if (used >= known)
            fprintf(b.f, "; untracked in this process = used - %stracked - others%s = %s", bl ? "baseline - " : "",
                    pooled ? " - the pools' idle memory" : "", why_bytes(b3, used - known));
        else
        {
            uint64_t wo = ot_sat_add(tracked, other);
            fprintf(b.f, "; untracked in this process = used - %stracked - others%s = -%s, below zero: the baseline, measured"
                    " before this process's first allocation, overlaps the other processes' usage or was partly released"
                    " since; used - tracked - others = %s%s",
                    bl ? "baseline - " : "", pooled ? " - the pools' idle memory" : "", why_bytes(b4, known - used), used >= wo ? "" : "-",
                    why_bytes(b3, used >= wo ? used - wo : wo - used));
            why_num_i(&b, "used_minus_tracked_minus_others_bytes", used >= wo ? (int64_t)(used - wo) : -(int64_t)(wo - used));
        }
        why_num_u(&b, "used_bytes", used);
        if (bl)
            why_num_u(&b, "baseline_bytes", base);
        why_num_i(&b, "untracked_bytes", u.bytes);
    }
    fputc('.', b.f);
    why_num_i(&b, "device", dev);
    WHY_NUMS_U(&b, {"other_bytes", other}, {"other_processes", nother}, {"largest_other_pid", top_pid},
               {"largest_other_bytes", top_bytes});
    if (d)
        why_num_u(&b, "tracked_bytes", tracked);
    if (pooled)
        why_num_u(&b, "pooled_bytes", pooled);
    why_item_end(&b);
}

/* Memory the device already had in use when this process first allocated (the baseline, cuMemGetInfo then):
 * another process or context that NVML could not name (no NVML, or a container that hides other pids). It
 * matters when it is a large part of the device, or when the failed request would have fit without it. */
void why_baseline(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    size_t nother = 0;
    if (s->has_processes && ot_other_process_bytes(s, dev, &nother) && nother)
        return; /* other_processes names them */
    /* NVML's line for this process with no other beside it: the baseline was this process's own context. */
    for (size_t i = 0; s->has_processes && i < s->nprocesses; i++)
        if (s->processes[i].device == dev && s->processes[i].pid == s->meta.pid)
            return;
    const struct snap_device *d = ot_snapshot_device(s, dev);
    if (!d || !(d->flags & OT_DEV_BASELINE_KNOWN) || !d->baseline_used_bytes || !d->total_bytes)
        return;
    uint64_t base = d->baseline_used_bytes;
    bool failed_here = s->has_failure && s->failure.device == dev && (d->flags & OT_DEV_MEMINFO_KNOWN);
    uint64_t need = failed_here ? s->failure.requested_bytes : 0;
    uint64_t short_by = failed_here && need > d->free_bytes ? need - d->free_bytes : 0;
    bool would_fit = short_by && short_by <= base;
    if (!would_fit && base * 10 < d->total_bytes)
        return;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "baseline_in_use",
            "%s of device %" PRId64 " (%.0f%%) was already in use before this process's first allocation (another "
            "process, or this process's own CUDA context; ", why_bytes(b1, base), dev, 100.0 * why_share(base, d->total_bytes)))
        return;
    /* NVML ran and listed processes, or it could not (its reason is kept in the snapshot). */
    bool nvml = s->has_processes && (s->nprocesses || !s->processes_note.n);
    if (nvml) {
        fputs("NVML listed no other process on it: in a container it may not see them)", b.f);
    } else if (s->processes_note.n) {
        fputs("NVML could not say which: ", b.f);
        ot_fput_safe_max(b.f, s->processes_note, 120);
        fputc(')', b.f);
    } else {
        fputs("NVML was not asked to say which)", b.f);
    }
    if (would_fit)
        fprintf(b.f, "; without it the request of %s would have fit (it was %s short)", why_bytes(b2, need), why_bytes(b3, short_by));
    fputc('.', b.f);
    WHY_NUMS_U(&b, {"baseline_bytes", base}, {"total_bytes", d->total_bytes}, {"short_bytes", short_by});
    why_item_end(&b);
}
