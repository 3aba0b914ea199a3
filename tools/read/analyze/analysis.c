#include "analyze/analysis.h"

#include <inttypes.h>
#include <stdlib.h>

#include "analyze/stackview.h"

struct ot_pool_totals ot_pools_of(const struct ot_snapshot *s, int64_t device)
{
    struct ot_pool_totals t = {0};
    for (size_t i = 0; i < s->npools; i++) {
        const struct snap_pool *p = &s->pools[i];
        if (p->device != device)
            continue;
        t.count++;
        if (p->flags & OT_POOL_UNREADABLE)
            continue;
        t.reserved_bytes = ot_sat_add(t.reserved_bytes, p->reserved_bytes);
        t.used_bytes = ot_sat_add(t.used_bytes, p->used_bytes);
    }
    return t;
}

uint64_t ot_other_process_bytes(const struct ot_snapshot *s, int64_t device, size_t *count)
{
    uint64_t b = 0;
    size_t n = 0;
    for (size_t i = 0; i < s->nprocesses; i++) {
        const struct ot_process *p = &s->processes[i];
        /* The tracer's own process may appear in NVML's list; it is not an "other" process. */
        if (p->device != device || p->pid == s->meta.pid)
            continue;
        b = ot_sat_add(b, p->used_bytes);
        n++;
    }
    if (count)
        *count = n;
    return b;
}

struct ot_imported ot_imported_on(const struct ot_snapshot *s, const struct snap_device *d)
{
    struct ot_imported m = {d->ncat > OT_CAT_IMPORTED ? d->by_category[OT_CAT_IMPORTED] : 0, 0};
    uint64_t stand_ins = 0;
    for (size_t i = 0; s->has_live && i < s->nlive; i++)
        if (s->live[i].device == d->ordinal && ot_size_unknown(&s->live[i])) {
            m.unsized++;
            stand_ins = ot_sat_add(stand_ins, s->live[i].size);
        }
    m.bytes = m.bytes >= stand_ins ? m.bytes - stand_ins : 0;
    return m;
}

void ot_untracked_of(const struct ot_snapshot *s, const struct snap_device *d, struct ot_untracked *u)
{
    memset(u, 0, sizeof(*u));
    u->tracked = d->tracked_bytes;
    u->others = ot_other_process_bytes(s, d->ordinal, &u->nothers);
    u->has_baseline = d->flags & OT_DEV_BASELINE_KNOWN;
    u->baseline = u->has_baseline ? d->baseline_used_bytes : 0;
    u->known = (d->flags & OT_DEV_MEMINFO_KNOWN) && d->total_bytes >= d->free_bytes;
    if (!u->known)
        return;
    u->used = d->total_bytes - d->free_bytes;
    struct ot_pool_totals pt = ot_pools_of(s, d->ordinal);
    u->pooled = pt.reserved_bytes > pt.used_bytes ? pt.reserved_bytes - pt.used_bytes : 0;
    u->explained = ot_sat_add(ot_sat_add(ot_sat_add(u->baseline, u->tracked), u->others), u->pooled);
    u->bytes = u->used >= u->explained ? (int64_t)(u->used - u->explained) : -(int64_t)(u->explained - u->used);
}

void ot_meminfo_gap_of(const struct ot_snapshot *s, const struct snap_device *d, struct ot_meminfo_gap *g)
{
    memset(g, 0, sizeof(*g));
    g->current = -1;
    if (!s->has_processes)
        g->nvml = OT_MEMINFO_NVML_NOT_ASKED;
    else if (s->processes_source != OT_PROCESSES_NVML)
        g->nvml = OT_MEMINFO_NVML_NOT_LOADED;
    else
        g->nvml = OT_MEMINFO_NVML_NO_FIGURE;
    g->note = s->processes_note;
    if (g->nvml == OT_MEMINFO_NVML_NO_FIGURE)
        return; /* a device with figures may have had them from NVML: which one was current is unknown */
    for (size_t i = 0; i < s->ndevices; i++)
        if (&s->devices[i] != d && (s->devices[i].flags & OT_DEV_MEMINFO_KNOWN))
            g->current = s->devices[i].ordinal;
}

static int add_peak_views(struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    size_t max = s->ndevices + s->npeaks;
    a->peaks = calloc(max ? max : 1, sizeof(*a->peaks));
    if (!a->peaks)
        return -1;
    for (size_t i = 0; i < s->ndevices; i++) {
        struct ot_peak_view *v = &a->peaks[a->npeaks++];
        v->dev = &s->devices[i];
        v->device = v->dev->ordinal;
        v->bytes = v->dev->peak_bytes;
        v->time_ns = v->dev->peak_time_ns;
        v->seq = v->dev->peak_seq;
    }
    for (size_t i = 0; i < s->npeaks; i++) {
        const struct ot_peak *p = &s->peaks[i];
        struct ot_peak_view *v = NULL;
        for (size_t k = 0; k < a->npeaks; k++)
            if (a->peaks[k].device == p->device)
                v = &a->peaks[k];
        if (!v) {
            v = &a->peaks[a->npeaks++];
            v->device = p->device;
        }
        v->section = p;
        if (v->dev && v->dev->peak_bytes != p->peak_bytes)
            ot_note(&a->notes, "device %" PRId64 ": the device's recorded peak is %" PRIu64 " bytes, the peak recorded with its live set %" PRIu64
                    "; the latter is used", p->device, v->dev->peak_bytes, p->peak_bytes);
        v->bytes = p->peak_bytes;
        v->time_ns = p->peak_time_ns;
        v->seq = p->peak_seq;
        struct ot_site_filter f = {.device = p->device, .device_memory = true};
        if (ot_sites_build(p->recs, p->count, &f, &v->sites) < 0)
            return -1;
        v->has_sites = true;
        if (p->lost)
            ot_note(&a->notes, "device %" PRId64 ": the tracer had no memory to keep %" PRIu64 " records of the"
                    " live set at the peak; its call sites miss them (the peak's byte count is exact)",
                    p->device, p->lost);
        else if (v->sites.bytes != p->peak_bytes)
            ot_note(&a->notes, "device %" PRId64 ": the allocations live at the peak sum to %" PRIu64 " bytes, not the %" PRIu64
                    " recorded for the peak", p->device, v->sites.bytes, p->peak_bytes);
    }

    const struct ot_snapshot *ss = a->s;
    if (ss->has_failure && ss->failure.device >= 0) {
        for (size_t k = 0; k < a->npeaks; k++)
            if (a->peaks[k].device == ss->failure.device)
                a->peak = &a->peaks[k];
        if (!a->peak)
            ot_note(&a->notes, "no peak is known for the failing device %" PRId64, ss->failure.device);
    } else { /* no failure, or one on the host (pinned memory): the devices' largest peak */
        for (size_t k = 0; k < a->npeaks; k++)
            if (!a->peak || a->peaks[k].bytes > a->peak->bytes)
                a->peak = &a->peaks[k];
    }
    return 0;
}

static int add_live(struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    struct ot_site_filter all = {.any_device = true, .device_memory = true};
    if (ot_sites_build(s->live, s->nlive, &all, &a->live) < 0)
        return -1;
    for (size_t i = 0; i < s->nlive; i++) {
        const struct ot_record *r = &s->live[i];
        if (r->category == OT_CAT_HOST_PINNED) {
            a->host_pinned_bytes = ot_sat_add(a->host_pinned_bytes, r->size);
            a->host_pinned_count++;
        } else if (r->category == OT_CAT_IMPORTED) {
            a->imported_count++;
            if (ot_size_unknown(r))
                a->imported_unsized++;
            else
                a->imported_bytes = ot_sat_add(a->imported_bytes, r->size);
        } else if (!(ot_category_is_device64(r->category))) {
            a->other_bytes = ot_sat_add(a->other_bytes, r->size);
            a->other_count++;
        }
    }
    if (a->other_count)
        ot_note(&a->notes, "%" PRIu64 " live records (%" PRIu64 " bytes) have a category this reader does not know",
                a->other_count, a->other_bytes);

    if (s->has_failure && s->has_live) {
        a->has_at_failure = true;
        a->failure_device = s->failure.device;
        struct ot_site_filter f = {.device = s->failure.device, .device_memory = true};
        if (ot_sites_build(s->live, s->nlive, &f, &a->at_failure) < 0)
            return -1;
    }
    /* tracked_bytes and the LIVE records describe the same set; a difference points at the writer. */
    if (s->has_live) {
        for (size_t i = 0; i < s->ndevices; i++) {
            const struct snap_device *d = &s->devices[i];
            uint64_t sum = 0;
            for (size_t k = 0; k < s->nlive; k++) {
                const struct ot_record *r = &s->live[k];
                if (r->device == d->ordinal && ot_category_is_device64(r->category))
                    sum = ot_sat_add(sum, r->size);
            }
            if (sum != d->tracked_bytes)
                ot_note(&a->notes, "device %" PRId64 ": the live allocations sum to %" PRIu64 " bytes, the device's tracked bytes are %" PRIu64,
                        d->ordinal, sum, d->tracked_bytes);
        }
    }
    return 0;
}

struct prime {
    struct ot_analysis *a;
    struct ot_u64map seen; /* stack ids already resolved */
    size_t missing;        /* distinct ids not in STACKS */
};

static void prime_stack(struct prime *p, uint64_t id)
{
    uint32_t n = (uint32_t)p->seen.count;
    if (n == OT_U64MAP_NONE || ot_u64map_put(&p->seen, id, n) != n)
        return;
    const struct ot_stack *st = ot_snapshot_stack(p->a->s, id);
    if (!st) {
        p->missing++;
        return;
    }
    struct ot_frame_walk w; /* walking the stack resolves each of its words once, into the resolver's cache */
    for (ot_walk_begin(&w, p->a->res, st, OT_WALK_ALL); ot_walk_next(&w);)
        ;
}

static void prime_sites(struct prime *p, const struct ot_sites *t)
{
    for (size_t i = 0; i < t->n; i++)
        prime_stack(p, t->v[i].stack_id);
}

int ot_analysis_build(struct ot_analysis *a, const struct ot_snapshot *s, struct ot_resolver *res,
                       const struct ot_symbolizer_info *sym, char errbuf[OT_ERRBUF])
{
    memset(a, 0, sizeof(*a));
    a->s = s;
    a->res = res;
    a->sym = *sym;
    if (ot_events_scan(s, &a->ev, errbuf) < 0)
        return -1;
    ot_marker_labels_build(&a->marker_labels, s, &a->ev);
    if (add_peak_views(a) < 0 || add_live(a) < 0) {
        snprintf(errbuf, OT_ERRBUF, "out of memory while grouping allocations");
        return -1;
    }

    const struct ot_meta *m = &s->meta;
    if (m->trigger == OT_TRIGGER_OOM && !s->has_failure)
        ot_note(&a->notes, "the trigger is oom but the snapshot records no failed request");
    if (s->has_failure && m->trigger != OT_TRIGGER_OOM && m->trigger != OT_TRIGGER_FRAMEWORK_OOM)
        ot_note(&a->notes, "a failed request in a snapshot whose trigger is not oom");
    if (s->seen & (1u << OT_SEC_EVENTS)) {
        if (s->chunk_events != m->events_kept)
            ot_note(&a->notes, "the ring holds %" PRIu64 " events, the snapshot's counts say %" PRIu64 " kept", s->chunk_events,
                    m->events_kept);
    }
    if (ot_sat_add(m->events_kept, m->events_dropped) != m->events_recorded)
        ot_note(&a->notes, "events: recorded %" PRIu64 " != kept %" PRIu64 " + dropped %" PRIu64, m->events_recorded,
                m->events_kept, m->events_dropped);
    if (s->nunknown_sections)
        ot_note(&a->notes, "%zu sections of types this reader does not know were skipped (format %u.%u)",
                s->nunknown_sections, s->version_major, s->version_minor);

    /* Resolve every stack a report can show now, so that the notes below are complete before either
     * report starts writing. */
    struct prime p = {.a = a};
    if (s->has_failure)
        prime_stack(&p, s->failure.stack_id);
    prime_sites(&p, &a->live);
    for (size_t i = 0; i < a->npeaks; i++)
        prime_sites(&p, &a->peaks[i].sites);
    ot_u64map_free(&p.seen);
    /* Grouping reads the stacks just resolved; a table left ungrouped (out of memory) is still whole. */
    if (ot_sites_group(&a->live, res, s) < 0 || ot_sites_group(&a->at_failure, res, s) < 0)
        ot_note(&a->notes, "out of memory grouping call sites by the program's lines");
    for (size_t i = 0; i < a->npeaks; i++)
        if (a->peaks[i].has_sites && ot_sites_group(&a->peaks[i].sites, res, s) < 0)
            ot_note(&a->notes, "out of memory grouping call sites by the program's lines");
    if (p.missing)
        ot_note(&a->notes, "%zu stack ids used by records are not among the recorded stacks", p.missing);
    struct ot_resolve_stats rs;
    ot_resolver_stats(res, &rs);
    a->sym.cxx_names = rs.cxx_names;
    if (rs.missing_pyframes)
        ot_note(&a->notes, "%zu Python frame ids used by stacks are not among the recorded Python frames", rs.missing_pyframes);
    return 0;
}

void ot_analysis_release(struct ot_analysis *a)
{
    for (size_t i = 0; i < a->npeaks; i++)
        ot_sites_free(&a->peaks[i].sites);
    free(a->peaks);
    ot_sites_free(&a->at_failure);
    ot_sites_free(&a->live);
    ot_notes_free(&a->notes);
    ot_marker_labels_free(&a->marker_labels);
    memset(a, 0, sizeof(*a));
}
