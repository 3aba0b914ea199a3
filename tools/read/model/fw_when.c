/* The frameworks' view and the snapshot's moment.
 *
 * The writer stores the companion's last report as given (docs/FORMAT.md, FRAMEWORK), so a view can be
 * older than what the rest of the snapshot shows. The companion collects for a snapshot at a framework's
 * own OOM, at oomtrace.dump() and at exit; never at a driver-level failure, where the program's thread is
 * inside the framework's allocator, nor at a signal or a flush. The moment is the failure's time in an
 * out-of-memory snapshot (the framework's refusal is recorded just after its collection), else the
 * snapshot's. So:
 * - an exit snapshot whose view was collected at exit shows its moment (the interpreter's teardown frees
 *   what it frees after the collection, and the view is the one the program left);
 * - a driver-level OOM whose view was collected at a framework OOM shows an earlier failure (its message,
 *   its step), whatever came between;
 * - any other view shows the moment only when the ring holds no device allocation or free between its
 *   collection and the moment: a framework OOM's or a dump's own collection leaves none, and one the tracer
 *   refused (too large, no memory) or the companion failed to make leaves the previous view in place. One
 *   that is not the snapshot's own (its reason says so) is earlier also when the ring no longer holds the
 *   span: nothing then says it still holds.
 * The counts between are kept for the report either way. */
#include "model/fw_when.h"

#include "model/events.h"

/* The reason the companion gives a collection made for a snapshot of this trigger; NULL: none is. */
static const char *own_reason(uint64_t trigger)
{
    switch (trigger) {
    case OT_TRIGGER_FRAMEWORK_OOM: return "oom";
    case OT_TRIGGER_API: return "api";
    case OT_TRIGGER_EXIT: return "exit";
    case OT_TRIGGER_OOM: return "driver-oom"; /* a companion that could collect at a driver failure */
    default: return NULL;
    }
}

/* Device allocations and frees in (w->taken_ns, w->moment_ns]: the chunks from the last one that starts
 * at or before taken_ns (events are in time order but for a few ns between threads, so a chunk that starts
 * after taken_ns holds nothing earlier worth counting). */
static void count_between(const struct ot_snapshot *s, struct ot_fw_when *w)
{
    size_t first = 0;
    for (size_t i = s->nchunks; i-- > 0;)
        if (s->chunks[i].t0_ns <= w->taken_ns) {
            first = i;
            break;
        }
    /* Older chunks were dropped, and the oldest kept one starts after the view: some of the span is gone. */
    if ((s->meta.chunks_dropped || s->meta.events_dropped) && (!s->nchunks || s->chunks[0].t0_ns > w->taken_ns))
        w->counts_partial = true;
    struct ot_event_reader r;
    ot_event_reader_init(&r, s);
    r.next_chunk = first;
    const struct snap_event *ev;
    size_t n;
    char err[OT_ERRBUF];
    int rc;
    while ((rc = ot_event_reader_next(&r, &ev, &n, err)) > 0)
        for (size_t i = 0; i < n; i++) {
            if (ev[i].time_ns <= w->taken_ns || ev[i].time_ns > w->moment_ns)
                continue;
            if (ev[i].kind == OT_EV_ALLOC && ot_category_is_device(ev[i].category))
                w->allocations++;
            else if ((ev[i].kind == OT_EV_FREE && ot_category_is_device(ev[i].category)) ||
                     ev[i].kind == OT_EV_CONTEXT_END)
                w->frees++;
        }
    if (rc < 0)
        w->counts_partial = true;
    ot_event_reader_free(&r);
}

void ot_fw_settle(struct ot_snapshot *s)
{
    struct ot_framework *fw = &s->fw;
    if (!fw->present || !fw->ninfo)
        return;
    struct ot_fw_when *w = &s->fw_when;
    w->known = true;
    w->taken_ns = fw->info[0].taken_ns;
    for (size_t i = 1; i < fw->ninfo; i++)
        if (fw->info[i].taken_ns < w->taken_ns)
            w->taken_ns = fw->info[i].taken_ns;
    const bool driver_oom = s->meta.trigger == OT_TRIGGER_OOM && s->has_failure;
    const bool failure = s->has_failure && (driver_oom || s->meta.trigger == OT_TRIGGER_FRAMEWORK_OOM);
    w->moment_ns = failure ? s->failure.time_ns : s->meta.mono_ns;
    count_between(s, w);
    const char *own = own_reason(s->meta.trigger);
    bool for_it = own != NULL, at_framework_oom = false;
    for (size_t i = 0; i < fw->ninfo; i++) {
        for_it = for_it && ot_str_eq(fw->info[i].reason, own);
        at_framework_oom = at_framework_oom || ot_str_eq(fw->info[i].reason, "oom");
    }
    const bool changed = w->allocations || w->frees;
    if (driver_oom && at_framework_oom)
        w->earlier = w->taken_ns < w->moment_ns;
    else if (for_it)
        w->earlier = s->meta.trigger != OT_TRIGGER_EXIT && changed;
    else
        w->earlier = changed || w->counts_partial;
    if (w->earlier) {
        s->fw_earlier = *fw;
        *fw = (struct ot_framework){0};
    }
}
