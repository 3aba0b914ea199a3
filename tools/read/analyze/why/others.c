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
    if (mi && self_used) {
        uint64_t used = d->total_bytes - d->free_bytes;
        fprintf(b.f, "; the device used %s; NVML counts %s for this process, so untracked in this process "
                "(context, modules, memory no allocation call explains) = %s%s", why_bytes(b1, used), why_bytes(b2, self_used),
                self_used >= tracked ? "" : "-", why_bytes(b3, self_used >= tracked ? self_used - tracked : tracked - self_used));
        why_num_u(&b, "used_bytes", used);
        why_num_u(&b, "self_nvml_bytes", self_used);
        why_num_i(&b, "untracked_bytes", self_used >= tracked ? (int64_t)(self_used - tracked) : -(int64_t)(tracked - self_used));
    } else if (mi) {
        struct ot_untracked u;
        ot_untracked_of(s, d, &u);
        uint64_t used = u.used, base = u.baseline, known = u.explained;
        fprintf(b.f, "; the device used %s", why_bytes(b1, used));
        if (bl)
            fprintf(b.f, ", %s of it before this process's first allocation (baseline)", why_bytes(b2, base));
        if (used >= known)
            fprintf(b.f, "; untracked in this process = used - %stracked - others = %s", bl ? "baseline - " : "",
                    why_bytes(b3, used - known));
        else
        {
            uint64_t wo = ot_sat_add(tracked, other);
            fprintf(b.f, "; untracked in this process = used - %stracked - others = -%s, below zero: the baseline, measured"
                    " before this process's first allocation, overlaps the other processes' usage or was partly released"
                    " since; used - tracked - others = %s%s",
                    bl ? "baseline - " : "", why_bytes(b4, known - used), used >= wo ? "" : "-",
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
    why_item_end(&b);
}
