/* The JSON report, schema "oomtrace-report/1", specified field by field in docs/JSON.md. Unknown
 * values are null, never omitted and never 0, so a consumer can tell "zero" from "not recorded". */
#include <inttypes.h>
#include <stdlib.h>

#include "render/json_breakdown.h"
#include "render/json_writer.h"
#include "render/report.h"
#include "analyze/allocview.h"
#include "analyze/breakdown.h"
#include "render/fwview.h"
#include "analyze/stackview.h"
#include "analyze/why.h"

#define OT_JSON_MARKERS_BEFORE 5

struct jx {
    struct ot_json j;
    const struct ot_analysis *a;
    const struct ot_snapshot *s;
    const struct ot_report_opts *o;
};

static void frame(struct jx *x, const char *key, const struct ot_frame *f)
{
    struct ot_json *j = &x->j;
    bool native = f->kind == OT_FRAME_NATIVE;
    ot_json_obj(j, key);
    ot_json_cstr(j, "kind", native ? "native" : "python");
    ot_json_str(j, "function", f->function);
    ot_json_str(j, "file", f->file);
    ot_json_u64_or_null(j, "line", f->has_line, f->line);
    ot_json_str(j, "module", native ? f->module : (struct ot_str){NULL, 0});
    ot_json_u64_or_null(j, "address", native, f->address);
    ot_json_u64_or_null(j, "offset", native && f->has_offset, f->offset);
    ot_json_u64_or_null(j, "module_offset", native && f->has_module_offset, f->module_offset);
    ot_json_bool(j, "inlined", f->inlined);
    ot_json_bool(j, "symbolized", f->symbolized);
    ot_json_obj_end(j);
}

/* "stack": [frames] or null when the id is not in STACKS, plus its flags. */
static void stack(struct jx *x, uint64_t id)
{
    struct ot_json *j = &x->j;
    const struct ot_stack *st = ot_snapshot_stack(x->s, id);
    ot_json_u64(j, "stack_id", id);
    if (!st) {
        ot_json_null(j, "stack_truncated");
        ot_json_null(j, "stack_borrowed_from_tid");
        ot_json_null(j, "stack");
        return;
    }
    ot_json_bool(j, "stack_truncated", st->flags & OT_STACK_TRUNCATED);
    if (st->flags & OT_STACK_BORROWED)
        ot_json_u64(j, "stack_borrowed_from_tid", st->lender_tid);
    else
        ot_json_null(j, "stack_borrowed_from_tid");
    ot_json_arr(j, "stack");
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, x->a->res, st, OT_WALK_ALL); ot_walk_next(&w);)
        frame(x, NULL, w.f);
    ot_json_arr_end(j);
}

/* "share": bytes over the moment's whole, null when the whole is 0. */
static void share(struct ot_json *j, uint64_t bytes, uint64_t whole)
{
    if (whole)
        ot_json_f64(j, "share", (double)bytes / (double)whole);
    else
        ot_json_null(j, "share");
}

/* "groups": the sites under the program's lines (sites.h), as the text report's rows. */
static void groups(struct jx *x, const struct ot_sites *t, uint64_t whole)
{
    static const char *const keys[] = {[OT_GROUP_SITE] = "site", [OT_GROUP_USER_LINE] = "user_line",
                                       [OT_GROUP_NATIVE_FRAME] = "native_frame"};
    struct ot_json *j = &x->j;
    size_t n = t->ngroups;
    if (x->o->top_given && x->o->top < n)
        n = x->o->top;
    ot_json_arr(j, "groups");
    for (size_t i = 0; i < n; i++) {
        const struct ot_site_group *g = &t->groups[i];
        ot_json_obj(j, NULL);
        ot_json_cstr(j, "key", keys[g->key]);
        char *line = NULL;
        if (g->line) {
            line = ot_short_frame_str(g->line);
        } else {
            struct ot_stack_info si;
            ot_stack_info(x->a->res, x->s, t->v[t->member[g->first]].stack_id, &si);
            line = si.found ? ot_headline_str(&si, false) : NULL;
        }
        ot_json_cstr(j, "line", line);
        free(line);
        if (g->line) {
            frame(x, "frame", g->line);
        } else {
            ot_json_null(j, "frame");
        }
        ot_json_u64(j, "bytes", g->bytes);
        ot_json_u64(j, "count", g->count);
        share(j, g->bytes, whole);
        ot_json_arr(j, "stack_ids");
        for (size_t k = 0; k < g->n; k++)
            ot_json_u64(j, NULL, t->v[t->member[g->first + k]].stack_id);
        ot_json_arr_end(j);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
    ot_json_u64(j, "groups_total", t->ngroups);
}

/* "framework_segments": the segments this site's driver allocations hold and what is in them now
 * (allocview.h), for the moment the frameworks' view describes; null otherwise. */
static void fw_segments(struct jx *x, uint64_t stack_id, bool segments_now)
{
    struct ot_json *j = &x->j;
    const struct ot_fw_creator *c = segments_now ? ot_allocview_creator(x->a->fw, stack_id) : NULL;
    if (!c) {
        ot_json_null(j, "framework_segments");
        return;
    }
    ot_json_obj(j, "framework_segments");
    ot_json_str(j, "framework", c->framework);
    ot_json_u64(j, "segments", c->nsegments);
    ot_json_u64(j, "reserved_bytes", c->reserved_bytes);
    ot_json_u64(j, "allocated_bytes", c->allocated_bytes);
    ot_json_u64(j, "free_bytes", c->free_bytes);
    ot_json_bool(j, "misread_as_live", ot_fw_segments_misread(c->reserved_bytes, c->free_bytes));
    ot_json_obj_end(j);
}

static void sites(struct jx *x, const char *key, const struct ot_sites *t, uint64_t whole, bool segments_now)
{
    struct ot_json *j = &x->j;
    size_t n = t->n;
    if (x->o->top_given && x->o->top < n)
        n = x->o->top;
    ot_json_arr(j, key);
    for (size_t i = 0; i < n; i++) {
        const struct ot_site *v = &t->v[i];
        ot_json_obj(j, NULL);
        ot_json_u64(j, "bytes", v->bytes);
        ot_json_u64(j, "count", v->count);
        share(j, v->bytes, whole);
        struct ot_stack_info si;
        ot_stack_info(x->a->res, x->s, v->stack_id, &si);
        char *hl = si.found ? ot_headline_str(&si, false) : NULL;
        ot_json_cstr(j, "headline", hl);
        free(hl);
        stack(x, v->stack_id);
        fw_segments(x, v->stack_id, segments_now);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
    ot_json_u64(j, "sites_total", t->n);
    groups(x, t, whole);
}

static void marker(struct jx *x, const struct snap_marker *m)
{
    struct ot_json *j = &x->j;
    ot_json_obj(j, NULL);
    ot_json_u64(j, "seq", m->seq);
    ot_json_u64(j, "time_ns", m->time_ns);
    ot_json_u64(j, "tid", m->tid);
    ot_json_str(j, "label", m->label);
    ot_json_obj_end(j);
}

static void markers_before(struct jx *x, uint64_t seq)
{
    size_t first, n = ot_markers_before(x->s, seq, OT_JSON_MARKERS_BEFORE, &first);
    ot_json_arr(&x->j, "markers_before");
    for (size_t i = first; i < first + n; i++)
        marker(x, &x->s->markers[i]);
    ot_json_arr_end(&x->j);
}

static void process(struct jx *x)
{
    struct ot_json *j = &x->j;
    const struct ot_meta *m = &x->s->meta;
    ot_json_obj(j, "process");
    ot_json_u64(j, "pid", m->pid);
    ot_json_u64(j, "ppid", m->ppid);
    ot_json_str(j, "host", m->host);
    ot_json_arr(j, "cmdline");
    for (size_t i = 0; i < m->argc; i++)
        ot_json_str(j, NULL, m->argv[i]);
    ot_json_arr_end(j);
    ot_json_str(j, "exe", m->exe);
    ot_json_i64_or_null(j, "rank", m->rank >= 0, m->rank);
    ot_json_i64_or_null(j, "local_rank", m->local_rank >= 0, m->local_rank);
    ot_json_i64_or_null(j, "world_size", m->world_size >= 0, m->world_size);
    ot_json_str(j, "rank_source", m->rank_source.n ? m->rank_source : (struct ot_str){NULL, 0});
    ot_json_bool(j, "finished", x->s->file_flags & OT_FILE_COMPLETE);
    ot_json_str(j, "python_version", m->python_version.n ? m->python_version : (struct ot_str){NULL, 0});
    ot_json_str(j, "cuda_visible_devices", m->cuda_visible_devices.n ? m->cuda_visible_devices : (struct ot_str){NULL, 0});
    ot_json_obj_end(j);
}

static void device(struct jx *x, const struct snap_device *d)
{
    struct ot_json *j = &x->j;
    const struct ot_snapshot *s = x->s;
    char ub[80];
    bool mi = d->flags & OT_DEV_MEMINFO_KNOWN, bl = d->flags & OT_DEV_BASELINE_KNOWN;
    ot_json_obj(j, NULL);
    ot_json_i64(j, "ordinal", d->ordinal);
    ot_json_str(j, "name", d->name.n ? d->name : (struct ot_str){NULL, 0});
    ot_json_cstr(j, "uuid", ot_fmt_uuid(ub, d->uuid));
    ot_json_u64_or_null(j, "total_bytes", mi, d->total_bytes);
    ot_json_u64_or_null(j, "free_bytes", mi, d->free_bytes);
    ot_json_u64_or_null(j, "used_bytes", mi && d->total_bytes >= d->free_bytes, d->total_bytes - d->free_bytes);
    ot_json_u64_or_null(j, "baseline_used_bytes", bl, d->baseline_used_bytes);
    ot_json_u64(j, "tracked_bytes", d->tracked_bytes);
    ot_json_u64(j, "peak_bytes", d->peak_bytes);
    ot_json_u64(j, "peak_time_ns", d->peak_time_ns);
    ot_json_u64(j, "peak_seq", d->peak_seq);
    ot_json_obj(j, "by_category");
    for (size_t c = 1; c < d->ncat; c++) {
        char key[32];
        if (c < OT_CAT_COUNT)
            snprintf(key, sizeof(key), "%s", ot_category_name((unsigned)c));
        else
            snprintf(key, sizeof(key), "category_%zu", c);
        /* Imported bytes without the one-byte stand-ins of imports whose size is not known. */
        ot_json_u64(j, key, c == OT_CAT_IMPORTED ? ot_imported_on(s, d).bytes : d->by_category[c]);
    }
    ot_json_obj_end(j);
    ot_json_u64(j, "imported_size_unknown", ot_imported_on(s, d).unsized);
    struct ot_pool_totals pt = ot_pools_of(s, d->ordinal);
    ot_json_obj(j, "pools");
    ot_json_u64(j, "count", pt.count);
    ot_json_u64(j, "reserved_bytes", pt.reserved_bytes);
    ot_json_u64(j, "used_bytes", pt.used_bytes);
    ot_json_obj_end(j);
    size_t nother = 0;
    uint64_t other = ot_other_process_bytes(s, d->ordinal, &nother);
    ot_json_u64_or_null(j, "other_processes_bytes", s->has_processes && s->processes_source != OT_PROCESSES_NONE, other);
    ot_json_obj_end(j);
}

static void peak_view(struct jx *x, const char *key, const struct ot_peak_view *p)
{
    struct ot_json *j = &x->j;
    if (!p) {
        ot_json_null(j, key);
        return;
    }
    ot_json_obj(j, key);
    ot_json_i64(j, "device", p->device);
    ot_json_u64(j, "bytes", p->bytes);
    ot_json_u64(j, "time_ns", p->time_ns);
    ot_json_u64(j, "seq", p->seq);
    /* Where the peak's numbers come from, in the user's words (docs/JSON.md): the live set the tracer copied
     * at the peak, or only its running high-water mark. */
    ot_json_cstr(j, "source", p->section ? "live_set" : "high_water_mark");
    if (p->has_sites) {
        ot_json_u64(j, "count", p->sites.count);
        sites(x, "sites", &p->sites, p->bytes, false);
    } else {
        ot_json_null(j, "count");
        ot_json_null(j, "sites");
        ot_json_null(j, "sites_total");
        ot_json_null(j, "groups");
        ot_json_null(j, "groups_total");
    }
    markers_before(x, p->seq);
    ot_json_obj_end(j);
}

static void failure(struct jx *x)
{
    struct ot_json *j = &x->j;
    const struct ot_snapshot *s = x->s;
    if (!s->has_failure) {
        ot_json_null(j, "failure");
        return;
    }
    const struct snap_failure *f = &s->failure;
    ot_json_obj(j, "failure");
    ot_json_cstr(j, "api", ot_api_name64(f->api));
    ot_json_u64(j, "api_id", f->api);
    ot_json_cstr(j, "category", ot_category_name64(f->category));
    ot_json_u64(j, "requested_bytes", f->requested_bytes);
    ot_json_i64(j, "device", f->device);
    ot_json_u64(j, "result_code", f->result_code);
    ot_json_cstr(j, "result_name", ot_result_name(f->result_code));
    ot_json_u64(j, "time_ns", f->time_ns);
    ot_json_u64(j, "tid", f->tid);
    ot_json_u64(j, "seq", f->seq);
    stack(x, f->stack_id);
    markers_before(x, f->seq);
    ot_json_obj_end(j);
}

static void events(struct jx *x)
{
    struct ot_json *j = &x->j;
    const struct ot_meta *m = &x->s->meta;
    const struct ot_event_stats *e = &x->a->ev;
    bool ring = x->s->seen & (1u << OT_SEC_EVENTS);
    ot_json_obj(j, "events");
    ot_json_u64(j, "recorded", m->events_recorded);
    ot_json_u64(j, "kept", m->events_kept);
    ot_json_u64(j, "dropped", m->events_dropped);
    ot_json_u64(j, "chunks_dropped", m->chunks_dropped);
    ot_json_u64(j, "ring_budget_bytes", m->ring_budget_bytes);
    ot_json_u64(j, "ring_used_bytes", m->ring_used_bytes);
    ot_json_u64_or_null(j, "chunks", ring, x->s->nchunks);
    ot_json_u64_or_null(j, "decoded", ring, e->decoded);
    if (ring) {
        ot_json_obj(j, "by_kind");
        for (int k = 1; k <= OT_EV_KIND_MAX; k++)
            if (k != OT_EV_CONTEXT_END || e->by_kind[k]) /* present only where a context ended (docs/JSON.md) */
                ot_json_u64(j, ot_event_kind_name(k), e->by_kind[k]);
        ot_json_u64(j, "unknown", e->by_kind[0]);
        ot_json_obj_end(j);
    } else {
        ot_json_null(j, "by_kind");
    }
    ot_json_u64_or_null(j, "first_seq", e->decoded, e->first_seq);
    ot_json_u64_or_null(j, "last_seq", e->decoded, e->last_seq);
    ot_json_u64_or_null(j, "first_time_ns", e->decoded, e->first_time_ns);
    ot_json_u64_or_null(j, "last_time_ns", e->decoded, e->last_time_ns);
    ot_json_obj_end(j);
}

/* The stored enums as JSON words; a value this reader does not know (a later writer, a damaged file) is
 * "unknown". */
static const char *process_relation(uint64_t r)
{
    switch (r) {
    case OT_PROCESS_RELATION_NONE:
        return "none";
    case OT_PROCESS_RELATION_CHILD:
        return "child";
    case OT_PROCESS_RELATION_PARENT:
        return "parent";
    case OT_PROCESS_RELATION_SELF:
        return "self";
    default:
        return "unknown";
    }
}

static const char *process_name_source(uint64_t r)
{
    return r == OT_PROCESS_NAME_PROC ? "proc" : r == OT_PROCESS_NAME_NVML ? "nvml" : "none";
}

/* The "why" array: empty without statements, null when they could not be built. */
static void statements(struct ot_json *j, const char *key, const struct ot_why *w)
{
    if (!w) {
        ot_json_null(j, key);
        return;
    }
    ot_json_arr(j, key);
    for (size_t i = 0; i < w->n; i++) {
        const struct ot_why_item *it = &w->v[i];
        ot_json_obj(j, NULL);
        ot_json_cstr(j, "kind", it->kind);
        ot_json_cstr(j, "text", it->text);
        ot_json_obj(j, "numbers");
        for (size_t k = 0; k < it->nnum; k++) {
            const struct ot_why_number *n = &it->num[k];
            if (n->kind == OT_WHY_U64)
                ot_json_u64(j, n->key, n->u);
            else if (n->kind == OT_WHY_I64)
                ot_json_i64(j, n->key, n->i);
            else
                ot_json_f64(j, n->key, n->f);
        }
        ot_json_obj_end(j);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
}

static void symbolization(struct jx *x)
{
    struct ot_json *j = &x->j;
    const struct ot_symbolizer_info *y = &x->a->sym;
    ot_json_obj(j, "symbolization");
    ot_json_bool(j, "libdw", y->available);
    ot_json_bool(j, "demangler", y->demangler);
    ot_json_u64(j, "modules", y->modules);
    ot_json_u64(j, "verified", y->verified);
    ot_json_u64(j, "found_in_debug_dirs", y->elsewhere);
    ot_json_u64(j, "missing", y->missing);
    ot_json_arr(j, "missing_modules");
    for (size_t i = 0; i < y->missing && i < OT_SYM_MISSING_NAMED; i++)
        ot_json_str(j, NULL, x->a->s->modules[y->missing_idx[i]].path);
    ot_json_arr_end(j);
    ot_json_u64(j, "mismatched", y->mismatched);
    ot_json_u64(j, "unverifiable", y->unverifiable);
    ot_json_u64(j, "unreadable", y->unreadable);
    ot_json_u64(j, "cxx_names", y->cxx_names);
    ot_json_obj_end(j);
}

int ot_report_json(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    struct jx x = {.a = a, .s = a->s, .o = o};
    struct ot_json *j = &x.j;
    const struct ot_snapshot *s = a->s;
    const struct ot_meta *m = &s->meta;
    char vb[32];
    ot_json_init(j, f);
    ot_json_obj(j, NULL);
    ot_json_cstr(j, "schema", "oomtrace-report/1");
    ot_json_cstr(j, "file", o->path);
    snprintf(vb, sizeof(vb), "%u.%u", s->version_major, s->version_minor);
    ot_json_cstr(j, "format_version", vb);
    ot_json_str(j, "tracer_version", m->tracer_version);
    ot_json_cstr(j, "trigger", ot_trigger_name(m->trigger));
    ot_json_u64(j, "trigger_id", m->trigger);
    ot_json_str(j, "reason", m->reason.n ? m->reason : (struct ot_str){NULL, 0});
    ot_json_u64(j, "snapshot_seq", m->snapshot_seq);
    ot_json_u64_or_null(j, "wall_ns", m->wall_ns != 0, m->wall_ns);
    ot_json_u64(j, "mono_ns", m->mono_ns);
    ot_json_u64(j, "start_mono_ns", m->start_mono_ns);
    process(&x);

    ot_json_arr(j, "devices");
    for (size_t i = 0; i < s->ndevices; i++)
        device(&x, &s->devices[i]);
    ot_json_arr_end(j);

    failure(&x);
    ot_json_breakdown(j, "breakdown", a->breakdown);
    statements(j, "why", a->why);
    statements(j, "what_to_try", a->remedies);
    ot_fwview_json(j, a);
    peak_view(&x, "peak", a->peak);
    ot_json_arr(j, "peaks");
    for (size_t i = 0; i < a->npeaks; i++)
        peak_view(&x, NULL, &a->peaks[i]);
    ot_json_arr_end(j);

    if (a->has_at_failure) {
        ot_json_obj(j, "at_failure");
        ot_json_i64(j, "device", a->failure_device);
        ot_json_u64(j, "bytes", a->at_failure.bytes);
        ot_json_u64(j, "count", a->at_failure.count);
        sites(&x, "sites", &a->at_failure, a->at_failure.bytes, true);
        ot_json_obj_end(j);
    } else {
        ot_json_null(j, "at_failure");
    }

    if (s->has_live) {
        ot_json_obj(j, "live");
        ot_json_u64(j, "bytes", a->live.bytes);
        ot_json_u64(j, "count", a->live.count);
        sites(&x, "sites", &a->live, a->live.bytes, true);
        ot_json_obj_end(j);
        ot_json_obj(j, "host_pinned");
        ot_json_u64(j, "bytes", a->host_pinned_bytes);
        ot_json_u64(j, "count", a->host_pinned_count);
        ot_json_obj_end(j);
        ot_json_obj(j, "imported");
        ot_json_u64(j, "bytes", a->imported_bytes);
        ot_json_u64(j, "count", a->imported_count);
        ot_json_u64(j, "size_unknown", a->imported_unsized);
        ot_json_obj_end(j);
    } else {
        ot_json_null(j, "live");
        ot_json_null(j, "host_pinned");
        ot_json_null(j, "imported");
    }

    ot_json_arr(j, "pools");
    for (size_t i = 0; i < s->npools; i++) {
        const struct snap_pool *p = &s->pools[i];
        bool ok = !(p->flags & OT_POOL_UNREADABLE);
        ot_json_obj(j, NULL);
        ot_json_u64(j, "handle", p->handle);
        ot_json_i64(j, "device", p->device);
        ot_json_bool(j, "default", p->flags & OT_POOL_DEFAULT);
        ot_json_u64_or_null(j, "reserved_bytes", ok, p->reserved_bytes);
        ot_json_u64_or_null(j, "used_bytes", ok, p->used_bytes);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);

    if (s->has_processes) {
        ot_json_obj(j, "other_processes");
        ot_json_cstr(j, "source", s->processes_source == OT_PROCESSES_NVML ? "nvml" : s->processes_source == OT_PROCESSES_NONE ? "none" : "unknown");
        ot_json_str(j, "note", s->processes_note.n ? s->processes_note : (struct ot_str){NULL, 0});
        ot_json_arr(j, "list");
        for (size_t i = 0; i < s->nprocesses; i++) {
            const struct ot_process *p = &s->processes[i];
            ot_json_obj(j, NULL);
            ot_json_i64(j, "device", p->device);
            ot_json_u64(j, "pid", p->pid);
            ot_json_u64(j, "used_bytes", p->used_bytes);
            ot_json_str(j, "name", p->name);
            ot_json_cstr(j, "name_source", process_name_source(p->name_source));
            ot_json_str(j, "command", p->command.n ? p->command : (struct ot_str){NULL, 0});
            ot_json_cstr(j, "relation", process_relation(p->relation));
            ot_json_obj_end(j);
        }
        ot_json_arr_end(j);
        ot_json_obj_end(j);
    } else {
        ot_json_null(j, "other_processes");
    }

    ot_json_arr(j, "markers");
    for (size_t i = 0; i < s->nmarkers; i++)
        marker(&x, &s->markers[i]);
    ot_json_arr_end(j);

    ot_json_arr(j, "threads");
    for (size_t i = 0; i < s->nthreads; i++) {
        ot_json_obj(j, NULL);
        ot_json_u64(j, "tid", s->threads[i].tid);
        ot_json_str(j, "name", s->threads[i].name);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);

    events(&x);
    symbolization(&x);
    ot_json_arr(j, "notes");
    for (size_t i = 0; i < a->notes.n; i++)
        ot_json_cstr(j, NULL, a->notes.v[i]);
    ot_json_arr_end(j);
    ot_json_obj_end(j);
    ot_json_end(j);
    return ferror(f) ? -1 : 0;
}
