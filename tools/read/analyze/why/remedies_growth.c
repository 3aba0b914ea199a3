/* What to try when memory grows (leak, unbounded_site) or the request itself is the cause (request_too_large,
 * step_input): from the statements why/ made of the ring's replay and of the failure (see remedies.c's head
 * for when each is given). */
#include "analyze/why/remedy.h"
#include "analyze/why/ring_replay.h"

#include <inttypes.h>
#include <string.h>

#include "analyze/breakdown.h"
#include "analyze/stackview.h"

static bool stack_has_python(const struct ot_analysis *a, uint64_t stack_id)
{
    struct ot_frame_walk w;
    ot_walk_begin(&w, a->res, ot_snapshot_stack(a->s, stack_id), OT_WALK_PY);
    return ot_walk_next(&w);
}
/* Live memory that grows by a steady amount every interval is held across intervals. The growth counts
 * when the ring also saw frees, when the framework's own view says the growth is allocated tensors, or when
 * no caching allocator is on the growing site's stack (one that frees nothing to the driver grows its cache
 * the same way). */
void remedy_leak(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *site = why_find(a->why, "growing_site");
    /* Without frees, growth through a caching allocator may be its cache; growth from the driver directly
     * (no allocator on the site's stack) is not. */
    if (!site || !(item_num(site, "frees_in_ring") || item_num(site, "framework_allocated") ||
                   !item_num(site, "allocator_on_stack")))
        return;
    uint64_t n = item_num(site, "intervals"), nsteps = item_num(site, "steps");
    char b3[32];
    uint64_t site_growth = item_num(site, "growth_bytes"), growth = site_growth;
    int64_t dev = (int64_t)item_num(site, "device_growth_bytes");
    /* Several sites grew together between markers (a summed loss keeps several tensors per step). Windows are
     * cut by event counts, not iterations: the first holds the program's start-up (its weights), which the
     * device's growth would count as leaked, and its rate would contradict the site's. */
    if (dev > 0 && (uint64_t)dev > growth && !item_num(site, "time_windows"))
        growth = (uint64_t)dev;
    /* Growth too small to matter next to the peak supports no remedy. */
    const struct ot_peak_view *p = a->peak;
    if (!growth || !n || !p || growth * 100 < p->bytes)
        return;
    char b1[32], b2[32], b4[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "leak"))
        return;
    uint64_t ns = item_num(site, "duration_ns");
    double secs = (double)ns / 1e9;
    uint64_t from_n = item_num(site, "from_count"), to_n = item_num(site, "to_count");
    uint64_t kept = to_n > from_n ? to_n - from_n : 0;
    char sp[32];
    bool windows = item_num(site, "time_windows"), kind = item_num(site, "marker_kind");
    uint64_t dropped = item_num(site, "dropped_events"), held = item_num(site, "held_bytes");
    /* What the sites the statement names kept together (walk 9, #10d). */
    uint64_t named = ot_sat_add(ot_sat_add(site_growth, item_num(site, "second_growth_bytes")),
                                item_num(site, "third_growth_bytes"));
    /* Growth only in the intervals one kind of marker began (a validation pass's): said per such interval,
     * with the site that keeps it (walk 9, #13: the report blamed the validation pass's size instead). */
    if (kind) {
        fprintf(b.f, "Live memory grew by %s after each marker ", why_bytes(b1, growth / n));
        if (!why_put_kind(b.f, a, item_num(site, "from_marker_seq")))
            fputs("of one kind", b.f);
        fprintf(b.f, ", over %s of them (%s in all), kept by ", ot_fmt_count(b4, n), why_bytes(b2, growth));
        why_put_headline(b.f, a, item_num(site, "stack_id"));
        fputs(": ", b.f);
    } else if (nsteps)
        fprintf(b.f, "Live memory grew by %s per %s over %s step%s", why_bytes(b1, growth / nsteps),
                item_num(site, "step_markers") ? "optimizer step" : "step", ot_fmt_count(b4, nsteps), nsteps == 1 ? "" : "s");
    else if (windows && why_rate_ok(ns))
        fprintf(b.f, "Live memory grew by %s per second over %.3g s", why_bytes(b1, (uint64_t)((double)growth / secs)), secs);
    else if (windows)
        fprintf(b.f, "Live memory grew by %s%s%s", why_bytes(b1, growth), ns ? " in " : "", ns ? why_span(sp, sizeof sp, ns) : "");
    else
        fprintf(b.f, "Live memory grew by %s per marker interval over %s intervals", why_bytes(b1, growth / n), ot_fmt_count(b4, n));
    /* With windows the growth is the site's (above): over less than a second, per allocation it kept. A ring
     * that dropped its first events measured the growth over those it kept only: the site holds more (walk 9,
     * #4: "38.0 MiB in all" for a site holding 726 MiB). */
    if (kind)
        ;
    else if (windows && !why_rate_ok(ns) && kept)
        fprintf(b.f, " (%s per allocation kept, at the growing site above): ", why_bytes(b2, growth / kept));
    else if (windows && !why_rate_ok(ns))
        fputs(" (at the growing site above): ", b.f);
    else if (growth > site_growth) {
        bool several = named > site_growth || item_num(site, "line_sites");
        fprintf(b.f, " (%s in all", why_bytes(b2, growth));
        if (dropped)
            fprintf(b.f, " over the events the ring kept, its first %s dropped", ot_fmt_count(b3, dropped));
        fprintf(b.f, "; the growing site%s above kept %s of it", several ? "s" : "", why_bytes(b3, several ? named : site_growth));
        if (dropped && held > site_growth)
            fprintf(b.f, ", and %s %s %s", several ? "the largest holds" : "holds", why_bytes(b4, held),
                    a->s->has_failure ? "at the failure" : "at the snapshot");
        fputs("): ", b.f);
    }
    else if (dropped && held > growth)
        fprintf(b.f, " (%s in all over the events the ring kept, its first %s dropped; the growing site above holds %s %s): ",
                why_bytes(b2, growth), ot_fmt_count(b3, dropped), why_bytes(b4, held),
                a->s->has_failure ? "at the failure" : "at the snapshot");
    else
        fprintf(b.f, " (%s in all, at the growing site above): ", why_bytes(b2, growth));
    /* The words are the growing site's framework's: the stack says which. Only a stack with no Python frame
     * (a native thread's, autograd's backward without a borrowed stack) falls back on the frameworks' view
     * of a Python process that saw PyTorch alone: a stack that shows the program's own lines calling the
     * driver (ctypes) is the program's, whatever it imported. */
    const char *fw = ot_stack_framework(a, item_num(site, "stack_id"));
    if (!fw && !stack_has_python(a, item_num(site, "stack_id")) && a->s->meta.python_version.n && a->s->fw.present &&
        a->s->fw.ninfo && pytorch_or_unknown(&a->s->fw))
        fw = "torch";
    /* With no model on the GPU (breakdown.h: no_model) there is no loss, graph or training step to speak of. */
    if (fw && strcmp(fw, "torch") == 0 && a->breakdown && a->breakdown->no_model)
        fputs("memory that grows by the same amount every iteration is held across iterations: do not keep tensors (or "
              "views of them) in lists or globals from one iteration to the next; keep host copies of what is needed "
              "later (x.item(), x.cpu()) and let the device tensors go (del); freed tensors return to PyTorch's cache, "
              "which a later allocation reuses.", b.f);
    else if (fw && strcmp(fw, "torch") == 0)
        fputs("memory that grows by the same amount every iteration is held across iterations, and gradient checkpointing "
              "or a smaller batch only delays the failure: accumulate loss.item() (or loss.detach()), not the loss tensor; do "
              "not keep outputs or their graphs in lists; drop retain_graph=True unless the graph is used again; "
              "evaluate under torch.no_grad().", b.f);
    else if (fw && strcmp(fw, "cupy") == 0)
        fputs("memory that grows by the same amount every iteration is held across iterations: do not keep CuPy arrays (or "
              "views of them) in lists or globals from one iteration to the next; accumulate scalars on the host (float(x), "
              "x.item(), cupy.asnumpy), not as device arrays; freed arrays return to CuPy's pool, not to the device.", b.f);
    else if (fw && strcmp(fw, "jax") == 0)
        fputs("memory that grows by the same amount every iteration is held across iterations: do not keep JAX arrays in "
              "lists or globals from one step to the next; accumulate metrics on the host (float(x), jax.device_get), and "
              "let the old state go when a jitted step returns the new one (donate_argnums).", b.f);
    else if (kind)
        fputs("free what it allocates after each such marker, or bound what it keeps.", b.f);
    else
        fputs("free what the growing site allocates each iteration, or bound what it keeps.", b.f);
    WHY_NUMS_U(&b, {"growth_bytes", growth}, {"bytes_per_interval", growth / n}, {"intervals", n}, {"steps", nsteps},
               {"bytes_per_step", nsteps ? growth / nsteps : 0});
    why_item_end(&b);
}

/* A call site that only adds to what it holds (why: unfreed_site) fills any device: free what it keeps, or
 * bound it to what the device has room for, from its own bytes and the free memory cuMemGetInfo measured. */
void remedy_unbounded_site(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "unfreed_site");
    uint64_t n = it ? item_num(it, "allocations") : 0, held = it ? item_num(it, "site_bytes") : 0;
    if (!n || !held)
        return;
    int64_t dev = (int64_t)item_num(it, "device");
    uint64_t each = held / n, ns = item_num(it, "duration_ns");
    const struct snap_device *d = ot_snapshot_device(a->s, dev);
    bool meminfo = d && (d->flags & OT_DEV_MEMINFO_KNOWN) && each;
    char b1[32], b2[32], b3[32], b4[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "unbounded_site"))
        return;
    why_put_headline(b.f, a, item_num(it, "stack_id"));
    fprintf(b.f, " only adds to what it holds (%s allocation%s, %s, none freed), so it fills any device in time: free its "
            "entries once they are no longer used, or bound it",
            ot_fmt_count(b1, n), n == 1 ? "" : "s", why_bytes(b2, held));
    uint64_t fits = 0;
    if (meminfo) {
        fits = ot_sat_add(held, d->free_bytes) / each;
        fprintf(b.f, ": its %s and the %s free on device %" PRId64 " make room for %s allocation%s of %s, so cap it below "
                "that (evict the oldest) to leave room for the rest of the program",
                why_bytes(b1, held), why_bytes(b2, d->free_bytes), dev, ot_fmt_count(b3, fits), fits == 1 ? "" : "s",
                why_bytes(b4, each));
    }
    double secs = (double)ns / 1e9;
    if (!a->s->has_failure && meminfo && why_rate_ok(ns)) {
        double rate = (double)held / secs;
        fprintf(b.f, "; at its rate (%s per second) the device's free memory lasts about %.3g s more",
                why_bytes(b1, (uint64_t)rate), (double)d->free_bytes / rate);
    }
    fputc('.', b.f);
    WHY_NUMS_U(&b, {"growth_bytes", held}, {"allocations", n}, {"bytes_per_allocation", each});
    if (meminfo)
        WHY_NUMS_U(&b, {"free_bytes", d->free_bytes}, {"fits_allocations", fits});
    why_item_end(&b);
}

/* A request larger than the whole device (why: request_exceeds_total): nothing the program frees makes it fit. */
void remedy_request_too_large(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "request_exceeds_total");
    const struct ot_snapshot *s = a->s;
    if (!it || !s->has_failure)
        return;
    uint64_t req = item_num(it, "requested_bytes"), total = item_num(it, "total_bytes");
    char b1[32], b2[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "request_too_large"))
        return;
    fprintf(b.f, "The request for %s is larger than device %" PRId64 "'s whole %s, so nothing the program frees makes it fit: ",
            why_bytes(b1, req), s->failure.device, why_bytes(b2, total));
    if (s->failure.stack_id) {
        fputs("make the allocation at ", b.f);
        why_put_headline(b.f, a, s->failure.stack_id);
        fputs(" smaller", b.f);
    } else {
        fputs("make it smaller", b.f);
    }
    fputs(" (check the size it computes; allocate in pieces, or shard it across devices), or use a device with more memory.", b.f);
    WHY_NUMS_U(&b, {"requested_bytes", req}, {"total_bytes", total});
    why_item_end(&b);
}

/* Nothing freed by many sites, none standing out (why: nothing_freed): no one site to cut. */
void remedy_free_unused(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "nothing_freed");
    uint64_t n = it ? item_num(it, "allocations") : 0, live = it ? item_num(it, "live_bytes") : 0;
    if (!n || !live)
        return;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "free_unused"))
        return;
    uint64_t sites = item_num(it, "sites");
    fprintf(b.f, "The program freed none of its %s allocations on device %" PRId64 " (%s live, from %s call sites, none over "
            "%.1f%%), so no one site is the cause: free each buffer once its use ends, or reuse it for the next one "
            "instead of allocating anew; the sites that hold most are under What held the memory.",
            ot_fmt_count(b1, n), (int64_t)item_num(it, "device"), why_bytes(b2, live), ot_fmt_count(b3, sites),
            100.0 * why_share(item_num(it, "largest_site_bytes"), live));
    WHY_NUMS_U(&b, {"allocations", n}, {"live_bytes", live}, {"sites", sites});
    why_item_end(&b);
}

/* A pinned host request refused (why: host_request): smaller or fewer page-locked buffers, or a higher limit. */
void remedy_pin_less(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "host_request");
    const struct ot_snapshot *s = a->s;
    if (!it || !s->has_failure)
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "pin_less"))
        return;
    fputs("Pin less host memory at once: ", b.f);
    if (s->failure.requested_bytes)
        fprintf(b.f, "make the %s page-locked buffer", why_bytes(b1, s->failure.requested_bytes));
    else
        fputs("make the page-locked buffer", b.f);
    if (s->failure.stack_id) {
        fputs(" at ", b.f);
        why_put_headline(b.f, a, s->failure.stack_id);
    }
    fputs(" smaller, or pinned by fewer workers (a DataLoader's pin_memory=True with many workers), or use pageable "
          "memory; or raise the locked-memory limit (ulimit -l, a container's memlock) if the host has the RAM.", b.f);
    why_num_u(&b, "requested_bytes", s->failure.requested_bytes);
    why_item_end(&b);
}

/* A step that asked for much more than the one before it was given a larger input (why: step_demand). */
void remedy_step_input(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "step_demand");
    uint64_t demand = it ? item_num(it, "step_demand_bytes") : 0, before = it ? item_num(it, "previous_demand_bytes") : 0;
    if (!demand || !before)
        return;
    char b1[32], b2[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "step_input"))
        return;
    fputs("What ran after ", b.f);
    why_put_marker(b.f, a, item_num(it, "marker_seq"));
    fprintf(b.f, " asked for %s, %.1fx the %s of what ran after ", why_bytes(b1, demand), (double)demand / (double)before,
            why_bytes(b2, before));
    why_put_marker(b.f, a, item_num(it, "previous_marker_seq"));
    if (!item_num(it, "same_kind")) {
        uint64_t held = item_num(it, "live_before_bytes");
        fputs(", a phase of another kind, which fit: this phase is no larger step but work of its own. Give it less at once "
              "(a smaller batch for it, or its work in pieces)", b.f);
        if (held)
            fprintf(b.f, ", or free (or move to the host) what was live when it began (%s) before it starts", why_bytes(b1, held));
        fputc('.', b.f);
        WHY_NUMS_U(&b, {"step_demand_bytes", demand}, {"previous_demand_bytes", before}, {"same_kind", 0});
        why_item_end(&b);
        return;
    }
    fputs(", which fit: that step was given more (a longer input, a larger batch) or did more. Bound the largest input one step gets (truncate it, or bucket inputs by "
          "size so that one long input cannot exceed what fits), or split such a step into micro-batches with gradient "
          "accumulation.", b.f);
    WHY_NUMS_U(&b, {"step_demand_bytes", demand}, {"previous_demand_bytes", before}, {"same_kind", 1});
    why_item_end(&b);
}

/* A step's need that grows from step to step (why: growing_request): bound what one step gets. With a leak
 * beside it (why: growing_site), fixing the leak gives back what it holds, and the growing request uses that
 * up too: how many more steps it lets run is said, from the failure's shortfall (why: request_exceeds_free). */
void remedy_bound_input(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "growing_request");
    const struct ot_snapshot *s = a->s;
    uint64_t per = it ? item_num(it, "bytes_per_step") : 0;
    if (!per)
        return;
    bool numbered = item_num(it, "numbered_steps");
    const char *unit = numbered ? "step" : "marker interval";
    uint64_t stack = item_num(it, "stack_id"), to = item_num(it, "to_bytes");
    char b1[32], b2[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "bound_input"))
        return;
    if (stack) {
        fputs("The request at ", b.f);
        why_put_headline(b.f, a, stack);
        fprintf(b.f, " grew by %s a %s, to %s at the failure", why_bytes(b1, per), unit, why_bytes(b2, to));
    } else {
        fprintf(b.f, "What a %s needs above its start grew by %s a %s, to %s %s", unit, why_bytes(b1, per), unit,
                why_bytes(b2, to), s->has_failure ? "at the failure" : numbered ? "in the latest step" : "in the latest interval");
    }
    fputs(": bound what one step gets (a maximum sequence length or batch size, inputs bucketed by length, a curriculum "
          "capped below what fits), or split such a step into micro-batches with gradient accumulation", b.f);
    /* The leak's fix alone: what it holds comes back, less what the failed request was short, and each step
     * after the failing one asks for per more. */
    const struct ot_why_item *leak = why_find(a->why, "growing_site"), *req = why_find(a->why, "request_exceeds_free");
    uint64_t held = leak ? item_num(leak, "held_bytes") : 0, short_b = req ? item_num(req, "short_bytes") : 0;
    uint64_t leak_rate = leak ? (item_num(leak, "steps") ? item_num(leak, "growth_bytes") / item_num(leak, "steps")
                                                         : item_num(leak, "growth_bytes") / (item_num(leak, "intervals") | 1)) : 0;
    uint64_t buys = 0;
    bool said = leak && req && s->has_failure && held;
    if (said) {
        buys = held >= short_b ? (held - short_b) / per + 1 : 0;
        fprintf(b.f, "; fixing the leak above (%s a %s) alone gives back the %s it holds, which this growth uses up in about "
                "%" PRIu64 " more %s%s", why_bytes(b1, leak_rate), unit, why_bytes(b2, held), buys, unit, buys == 1 ? "" : "s");
        uint64_t at;
        struct ot_str l;
        if (numbered && buys && ot_marker_label(a, item_num(it, "to_marker_seq"), &l) && why_label_step(l, &at))
            fprintf(b.f, " (to step %" PRIu64 ")", at + buys - 1);
    }
    fputc('.', b.f);
    WHY_NUMS_U(&b, {"growth_bytes", to - item_num(it, "from_bytes")}, {"bytes_per_step", per}, {"stack_id", stack});
    if (said)
        WHY_NUMS_U(&b, {"leak_bytes_per_step", leak_rate}, {"leak_fix_steps", buys});
    why_item_end(&b);
}
