/* What to try: each cause the numbers diagnose, mapped to the remedies the OOM guides give, with the
 * exact setting and the number that justifies it. A remedy whose number does not support it is left out:
 * nothing here is generic advice.
 *
 *   no_grad         activations are at least half of the peak while no gradient, no optimizer state and no
 *                   optimizer step (done or under way) exist, and no optimizer holds a device parameter
 *                   (PyTorch identity): evaluation or inference with autograd on
 *   activations     activations and temporaries are at least half of the peak (not with no_grad, nor with a
 *                   leak that grew by at least half of the peak)
 *   optimizer_state optimizer state is at least 15% of the used memory and at least 1.5x the parameters,
 *                   or was being created at the failure (less than its states x the gradients, or the
 *                   failed request came from the optimizer) toward at least 1.5x the parameters
 *   parameters      parameters are at least half of the device's used memory
 *   fragmentation   PyTorch's request is larger than its largest free block while its free blocks would hold it
 *   other_process   another process holds at least 10% of the device
 *   jax_preallocation  JAX preallocated at least half of the device
 *   framework_pool_cache  CuPy's pool keeps freed memory of at least 15% of the used memory
 *   leak            a call site grew in every interval (why: growing_site) by at least 1% of the peak in all,
 *                   and the ring saw frees or the framework's view says the growth is allocated tensors
 *   unbounded_site  a call site only added to what it held and was still growing (why: unfreed_site): free its
 *                   entries, or bound it to the allocations that its bytes and the free memory make room for
 *   request_too_large  the failed request alone is larger than the device's total (why: request_exceeds_total)
 *   pin_less           a pinned host request failed (why: host_request)
 *   free_unused        nothing was freed, by many sites alike (why: nothing_freed)
 *   step_input      the interval between markers under way at the failure asked for at least 1.5x the one
 *                   before it, which fit and freed its memory (why: step_demand), and no leak explains it
 *   bound_input     a step's request (else its height) grew step after step (why: growing_request): bound what
 *                   one step gets; beside a leak, how many steps the leak's fix alone lets run, and the one that
 *                   stops more bytes a step first
 *   headroom        no failure, but the peak left less than 15% of the device free
 *   pool_trim       the request was larger than the free memory, and the stream-ordered pools' idle memory
 *                   (why: pool_cached) with the free memory would have covered it
 *   make_room       the request was larger than the free memory, no other remedy applies, and the largest
 *                   call site live at the failure holds at least what the request was short: free (or move to
 *                   the host) what it holds before the request, or make the request no larger than the free
 *
 * Strongest first: remedies for what refused this very request while memory existed (other_process,
 * fragmentation, jax_preallocation, framework_pool_cache) first, by the bytes each addresses; then those that
 * answer a cause the Why states, in the order the Why states them (a leak beside a step's need that grows: the
 * one that stops more bytes a step first); then those that rest on a category's share of What held the memory
 * (no_grad, activations, optimizer_state, parameters) or on the peak (headroom), by the bytes each addresses.
 * Only the first two are kept (the guides' "fix the largest share first"; a third remedy addresses less
 * than either). A category under 15% of the used memory gets no remedy: removing all of it gives back less
 * than the 15-20% headroom the guides advise keeping free, so it cannot be what made the program not fit.
 *
 * The remedies for growth and for the request are in remedies_growth.c. */
#include "analyze/why/remedy.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/breakdown.h"

static double share(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}
/* The minimum share of the used memory for a category to get a remedy (see the head of this file). */
#define MIN_SHARE_PCT 15

/* Evaluation or inference with autograd on: PyTorch's identity shows parameters but no gradient and no
 * optimizer state, and the companion saw no optimizer step. Autograd then keeps every activation for a
 * backward that never comes. torch's grad_enabled (torch.is_grad_enabled() at the framework OOM), when
 * recorded, must say 1: with autograd off the activations are the program's own tensors. */
static bool inference_with_grad(const struct ot_analysis *a, const struct ot_breakdown *bd, int *grad_enabled)
{
    const struct ot_snapshot *s = a->s;
    const struct ot_bd_moment *m = &bd->now;
    *grad_enabled = -1;
    if (!bd->identity || !m->known || !m->bytes[OT_BD_PARAMETERS] || m->inferred[OT_BD_PARAMETERS] ||
        m->bytes[OT_BD_GRADIENTS] || m->bytes[OT_BD_OPTIMIZER] || bd->peak.bytes[OT_BD_OPTIMIZER] ||
        bd->peak.bytes[OT_BD_GRADIENTS])
        return false;
    for (size_t i = 0; i < s->fw.nsteps; i++)
        if (ot_str_eq(s->fw.steps[i].framework, "torch"))
            return false;
    uint64_t ge, under_way, training;
    if (ot_fw_stat(s, "torch", (uint64_t)bd->device, "step_in_progress", &under_way))
        return false; /* the companion saw a training step under way */
    if (ot_fw_stat(s, "torch", (uint64_t)bd->device, "optimizers", &training) && training)
        return false; /* an optimizer holds the model's device parameters: training before its first step */
    if (ot_fw_stat(s, "torch", (uint64_t)bd->device, "grad_enabled", &ge)) {
        *grad_enabled = ge != 0;
        if (!ge)
            return false;
    }
    return true;
}

/* Activations at least half of the peak (of the snapshot without one). In evaluation or inference with
 * autograd on (inference: see inference_with_grad) the remedy is no_grad; otherwise checkpointing or a
 * smaller batch. */
static void activations(struct ot_why *w, const struct ot_breakdown *bd, bool python, bool inference, int grad_enabled)
{
    const struct ot_bd_moment *m = bd->peak.known ? &bd->peak : &bd->now;
    uint64_t act = m->bytes[OT_BD_ACTIVATIONS];
    if (!m->known || !m->whole || act * 2 < m->whole)
        return;
    /* Stacks alone call every allocation of a program without a framework "activations": the remedy needs
     * identity, or at least a Python program whose framework frames were read. */
    if (!bd->identity && m->inferred[OT_BD_ACTIVATIONS] * 2 > act && !python)
        return;
    const char *of = m == &bd->peak ? "peak" : "used memory";
    char b1[32];
    struct why_item_b b;
    if (inference) {
        if (!why_item_say(&b, w, "no_grad",
                "Activations are %.0f%% of the %s (%s) while no gradient and no optimizer state exist and no optimizer "
                "step ran%s: in evaluation or inference, autograd keeps every activation for a backward that never "
                "comes; run it under torch.no_grad() or torch.inference_mode() (and model.eval()).",
                share(act, m->whole), of, why_bytes(b1, act),
                grad_enabled == 1 ? ", and autograd was on at the failure (torch.is_grad_enabled())" : ""))
            return;
    } else if (!why_item_say(&b, w, "activations",
                   "Activations and temporaries are %.0f%% of the %s (%s%s): gradient checkpointing "
                   "(torch.utils.checkpoint on the largest blocks), or half the batch with twice the gradient accumulation "
                   "steps; autocast to bf16 halves them again where the model runs in fp32.",
                   share(act, m->whole), of, why_bytes(b1, act),
                   m->inferred[OT_BD_ACTIVATIONS] * 2 > act ? ", inferred from stacks" : "")) {
        return;
    }
    why_num_u(&b, "activations_bytes", act);
    why_num_u(&b, "whole_bytes", m->whole);
    if (inference) {
        why_num_u(&b, "parameters_bytes", bd->now.bytes[OT_BD_PARAMETERS]);
        if (grad_enabled >= 0)
            why_num_u(&b, "grad_enabled", (uint64_t)grad_enabled);
    }
    why_item_end(&b);
}

/* The optimizer's per-parameter states, from the state's split by label ("Adam.exp_avg"): those of one
 * class with at least 1% of the parameters' bytes (Adam's scalar "step" is not one). Returns how many, with
 * their class and names; 0 when the split names no state or several classes. */
struct opt_states {
    size_t n;
    struct ot_str cls;
    struct ot_str name[OT_BD_MAX_PARTS];
    uint64_t largest; /* the largest state's bytes */
};

static size_t optimizer_states(const struct ot_bd_moment *m, uint64_t par, struct opt_states *o)
{
    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < m->nparts; i++) {
        const struct ot_bd_part *p = &m->parts[i];
        if (p->row != OT_BD_OPTIMIZER || p->bytes * 100 < par)
            continue;
        const char *dot = p->label.n ? memchr(p->label.p, '.', p->label.n) : NULL;
        if (!dot)
            return o->n = 0;
        struct ot_str cls = {p->label.p, (size_t)(dot - p->label.p)};
        if (o->n && (cls.n != o->cls.n || memcmp(cls.p, o->cls.p, cls.n) != 0))
            return o->n = 0; /* several optimizers: no one class's rule */
        o->cls = cls;
        o->name[o->n++] = (struct ot_str){dot + 1, p->label.n - cls.n - 1};
        if (p->bytes > o->largest)
            o->largest = p->bytes;
    }
    return o->n;
}

static void put_states(FILE *f, const struct opt_states *o)
{
    for (size_t i = 0; i < o->n; i++) {
        if (i)
            fputs(", ", f);
        ot_fput_safe_max(f, o->name[i], 64);
    }
}

static void optimizer_state(struct ot_why *w, const struct ot_analysis *a, const struct ot_breakdown *bd)
{
    const struct ot_snapshot *s = a->s;
    const struct ot_bd_moment *m = &bd->now;
    uint64_t st = m->bytes[OT_BD_OPTIMIZER], par = m->bytes[OT_BD_PARAMETERS], grad = m->bytes[OT_BD_GRADIENTS];
    if (!m->known || !par || !st || !m->whole || st * 100 < m->whole * MIN_SHARE_PCT)
        return;
    /* At the first step the state is created tensor by tensor: one state per parameter that has a gradient,
     * for each of the optimizer's per-parameter states. Less than that at the failure, or the failed request
     * made by the optimizer itself, means the device ran out while it was being created. */
    struct opt_states o;
    bool failed_here = s->has_failure && bd->at_failure;
    uint64_t need = optimizer_states(m, par, &o) && grad ? o.n * grad : 0;
    bool creating = failed_here && need && (o.largest * 100 < grad * 99 ||
                                            (s->failure.stack_id && ot_bd_guess(a, s->failure.stack_id) == OT_BD_OPTIMIZER));
    if (creating && st >= need)
        creating = false;
    if (!(st * 2 >= par * 3 || (creating && need * 2 >= par * 3)))
        return;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    uint64_t step = 0;
    if (!ot_fw_stat(s, "torch", (uint64_t)bd->device, "step_in_progress", &step))
        step = 0;
    if (creating) {
        if (!why_item_begin(&b, w, "optimizer_state"))
            return;
        fputs("The optimizer state was being created when the device ran out", b.f);
        if (step == 1)
            fputs(", in the first optimizer step", b.f);
        else if (step)
            fprintf(b.f, ", in optimizer step %" PRIu64, step);
        fputs(": ", b.f);
        ot_fput_safe_max(b.f, o.cls, 64);
        fprintf(b.f, " keeps %zu state%s per parameter (", o.n, o.n == 1 ? "" : "s");
        put_states(b.f, &o);
        fprintf(b.f, "), which would need %.1f x the parameters (%s: %zu x the %s of parameters that have "
                "gradients); %s of it, %.0f%% of the used memory, existed at the failure. An 8-bit optimizer "
                "(bitsandbytes.optim.Adam8bit) stores it in a quarter of that, ZeRO-1/2 or FSDP shards it across ranks, "
                "and a lighter optimizer needs less (SGD with momentum keeps one state per parameter, Adafactor factors "
                "the second moment).",
                (double)need / (double)par, why_bytes(b1, need), o.n, why_bytes(b2, grad), why_bytes(b3, st),
                share(st, m->whole));
        WHY_NUMS_U(&b, {"optimizer_state_bytes", st}, {"parameters_bytes", par}, {"gradients_bytes", grad},
                   {"states_per_parameter", o.n}, {"needed_bytes", need}, {"whole_bytes", m->whole});
        if (step)
            why_num_u(&b, "step_in_progress", step);
    } else {
        if (!why_item_say(&b, w, "optimizer_state",
                "The optimizer state is %.1fx the parameters (%s against %s, %.0f%% of the used memory): an 8-bit "
                "optimizer (bitsandbytes.optim.Adam8bit), or ZeRO-2 / FSDP to shard it (and the gradients) across ranks.",
                (double)st / (double)par, why_bytes(b1, st), why_bytes(b2, par), share(st, m->whole)))
            return;
        WHY_NUMS_U(&b, {"optimizer_state_bytes", st}, {"parameters_bytes", par}, {"whole_bytes", m->whole});
    }
    why_item_end(&b);
}

static void parameters(struct ot_why *w, const struct ot_breakdown *bd)
{
    const struct ot_bd_moment *m = &bd->now;
    uint64_t par = m->bytes[OT_BD_PARAMETERS];
    if (!m->known || !m->whole || par * 2 < m->whole)
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "parameters",
            "Parameters are %.0f%% of the used memory (%s): load them in bf16, 8-bit or 4-bit "
            "(quantized loading), or train adapters (LoRA, QLoRA) instead of every weight.",
            share(par, m->whole), why_bytes(b1, par)))
        return;
    why_num_u(&b, "parameters_bytes", par);
    why_num_u(&b, "whole_bytes", m->whole);
    why_item_end(&b);
}

static void fragmentation(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    const struct ot_framework *fw = &s->fw;
    if (!s->has_failure || s->failure.device != dev || !fw->present)
        return;
    uint64_t req = s->failure.requested_bytes, largest = 0, free_total = 0;
    size_t nfree = 0;
    for (size_t i = 0; i < fw->nblocks; i++) {
        const struct ot_fw_block *k = &fw->blocks[i];
        if (k->state != OT_FW_BLOCK_INACTIVE || k->segment >= fw->nsegments)
            continue;
        const struct ot_fw_segment *g = &fw->segments[k->segment];
        if ((int64_t)g->device != dev || (g->flags & OT_FW_SEG_PRIVATE_POOL) || !ot_str_eq(g->framework, "torch"))
            continue;
        free_total = ot_sat_add(free_total, k->size);
        if (k->size > largest)
            largest = k->size;
        nfree++;
    }
    if (!req || free_total < req || largest >= req)
        return;
    struct ot_str es = ot_fw_setting_get(fw, "torch", "expandable_segments");
    if (ot_str_eq(es, "True") || ot_str_eq(es, "true") || ot_str_eq(es, "1"))
        return; /* already on: the remedy is in place */
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "fragmentation",
            "The request of %s is larger than PyTorch's largest free block (%s) while %s sit free in %zu "
            "blocks of its cache: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before the process starts "
            "(torch.cuda.empty_cache() only returns the cache; it does not join the pieces).",
            why_bytes(b1, req), why_bytes(b2, largest), why_bytes(b3, free_total), nfree))
        return;
    WHY_NUMS_U(&b, {"requested_bytes", req}, {"largest_free_block_bytes", largest},
               {"free_in_cache_bytes", free_total});
    why_item_end(&b);
}

static void other_process(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    const struct snap_device *d = ot_snapshot_device(s, dev);
    if (!d || !d->total_bytes)
        return;
    const struct ot_process *top = NULL, *top_child = NULL;
    uint64_t children = 0;
    size_t nchildren = 0;
    for (size_t i = 0; i < s->nprocesses; i++) {
        const struct ot_process *p = &s->processes[i];
        if (p->device != dev || p->pid == s->meta.pid)
            continue;
        if (!top || p->used_bytes > top->used_bytes)
            top = p;
        if (why_process_is_child(p)) {
            children = ot_sat_add(children, p->used_bytes);
            nchildren++;
            if (!top_child || p->used_bytes > top_child->used_bytes)
                top_child = p;
        }
    }
    /* This process's own children (DataLoader workers, multiprocessing workers that touched CUDA) each hold a
     * context and what they allocated: together they are one cause, and stopping them is this program's fix. */
    bool kids = top_child && children * 10 >= d->total_bytes && children >= (top ? top->used_bytes : 0);
    uint64_t held = kids ? children : top ? top->used_bytes : 0;
    if (!top || held * 10 < d->total_bytes)
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "other_process"))
        return;
    if (kids) {
        if (nchildren > 1)
            fprintf(b.f, "%zu child processes of this one hold %s, %.0f%% of device %" PRId64 " (the largest: ", nchildren,
                    why_bytes(b1, children), share(children, d->total_bytes), dev);
        why_put_process(b.f, s, top_child);
        if (nchildren > 1)
            fprintf(b.f, ", %s)", why_bytes(b1, top_child->used_bytes));
        else
            fprintf(b.f, " holds %s, %.0f%% of device %" PRId64, why_bytes(b1, children), share(children, d->total_bytes), dev);
        fputs(": a child that touched CUDA opened its own context and allocates on the card (a DataLoader worker that "
              "moves tensors to the GPU, a multiprocessing worker); keep CUDA in the main process (return CPU tensors from "
              "the Dataset, pin_memory=True), or stop the children before this process allocates.", b.f);
    } else {
        why_put_process(b.f, s, top);
        fprintf(b.f, " holds %s, %.0f%% of device %" PRId64 ": stop it (check it is not a zombie of an earlier run) or "
                "use another card (CUDA_VISIBLE_DEVICES).", why_bytes(b1, top->used_bytes), share(top->used_bytes, d->total_bytes), dev);
    }
    const struct ot_process *named = kids ? top_child : top;
    WHY_NUMS_U(&b, {"pid", named->pid}, {"used_bytes", held}, {"total_bytes", d->total_bytes});
    if (kids)
        WHY_NUMS_U(&b, {"child_processes", nchildren});
    why_item_end(&b);
}

/* Memory the program freed that CuPy's pool keeps, while another framework (or CuPy itself) needs it. */
static void pool_cache(struct ot_why *w, const struct ot_analysis *a, const struct ot_breakdown *bd)
{
    const struct ot_bd_moment *m = &bd->now;
    uint64_t freeb, total;
    if (!m->known || !m->whole || !ot_fw_stat(a->s, "cupy", (uint64_t)bd->device, "pool_free_bytes", &freeb))
        return;
    /* As much of it as this process's driver allocations hold (the breakdown's part). */
    uint64_t held = ot_bd_part_bytes(m, OT_BD_CACHE, OT_BD_PART_CUPY_POOL);
    if (freeb > held)
        freeb = held;
    if (!freeb || freeb * 100 < m->whole * MIN_SHARE_PCT)
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "framework_pool_cache",
            "CuPy's memory pool keeps %s that the program freed, %.0f%% of the used memory: call "
            "cupy.get_default_memory_pool().free_all_blocks() once its arrays are gone (before another framework "
            "allocates), or cap the pool with cupy.get_default_memory_pool().set_limit(size=...).",
            why_bytes(b1, freeb), share(freeb, m->whole)))
        return;
    why_num_u(&b, "pool_free_bytes", freeb);
    if (ot_fw_stat(a->s, "cupy", (uint64_t)bd->device, "pool_total_bytes", &total))
        why_num_u(&b, "pool_total_bytes", total);
    why_num_u(&b, "whole_bytes", m->whole);
    why_item_end(&b);
}

static void jax_preallocation(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    const struct snap_device *d = ot_snapshot_device(s, dev);
    uint64_t limit = 0;
    bool earlier;
    if (dev < 0 || !d || !d->total_bytes || !ot_fw_jax_prealloc_limit(s, (uint64_t)dev, &limit, &earlier) || !limit ||
        limit * 2 < d->total_bytes)
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "jax_preallocation",
            "JAX preallocated %s, %.0f%% of device %" PRId64 ", for its own pool: XLA_PYTHON_CLIENT_PREALLOCATE=false "
            "(allocate on demand), or XLA_PYTHON_CLIENT_MEM_FRACTION to size the pool, if another framework or process "
            "shares the card.", why_bytes(b1, (uint64_t)limit), share((uint64_t)limit, d->total_bytes), dev))
        return;
    w->earlier_read |= earlier;
    why_num_u(&b, "bytes_limit", (uint64_t)limit);
    why_num_u(&b, "total_bytes", d->total_bytes);
    why_item_end(&b);
}
static void headroom(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    const struct snap_device *d = ot_snapshot_device(s, dev);
    const struct ot_peak_view *p = a->peak;
    if (s->has_failure || !d || !p || p->device != dev || !d->total_bytes || !(d->flags & OT_DEV_BASELINE_KNOWN))
        return;
    uint64_t high = ot_sat_add(p->bytes, d->baseline_used_bytes);
    if (high >= d->total_bytes || (d->total_bytes - high) * 100 >= d->total_bytes * 15)
        return;
    char b1[32], b2[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "headroom",
            "The peak (%s, with %s in use before this process) left only %.1f%% of device %" PRId64 " free; the guides "
            "advise 15-20%% of headroom below the largest batch that fits: a smaller batch, or fixed input shapes so "
            "that one long input cannot exceed it.", why_bytes(b1, p->bytes), why_bytes(b2, d->baseline_used_bytes),
            share(d->total_bytes - high, d->total_bytes), dev))
        return;
    WHY_NUMS_U(&b, {"peak_bytes", p->bytes}, {"baseline_bytes", d->baseline_used_bytes},
               {"total_bytes", d->total_bytes});
    why_item_end(&b);
}

/* Memory freed into stream-ordered pools stays reserved from the device: a plain allocation (or another
 * library) cannot use it until the pool gives it back (why: pool_cached, when free + pooled covered the
 * request). */
static void pool_trim(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "pool_cached");
    const struct ot_snapshot *s = a->s;
    uint64_t avail = it ? item_num(it, "free_plus_cached_bytes") : 0, cached = it ? item_num(it, "cached_bytes") : 0;
    const struct snap_device *d = s->has_failure ? ot_snapshot_device(s, s->failure.device) : NULL;
    uint64_t req = s->has_failure ? s->failure.requested_bytes : 0;
    if (!it || !d || !cached || !req || avail < req || req <= d->free_bytes)
        return;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "pool_trim",
            "The stream-ordered pools on device %" PRId64 " kept %s idle while the request of %s was %s short: give it back "
            "before the allocation (cuStreamSynchronize, then cuMemPoolTrimTo(pool, 0); with PyTorch's cudaMallocAsync "
            "backend, torch.cuda.empty_cache()), let the pool release it by itself (cuMemPoolSetAttribute "
            "CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), or make the large request from the same pool (cuMemAllocAsync).",
            s->failure.device, why_bytes(b1, cached), why_bytes(b2, req), why_bytes(b3, req - d->free_bytes)))
        return;
    WHY_NUMS_U(&b, {"pool_free_bytes", cached}, {"requested_bytes", req}, {"short_bytes", req - d->free_bytes});
    why_item_end(&b);
}

/* A request short of the free memory by less than what one call site holds live at the failure: that site's
 * memory, or a smaller request, makes it fit. Only when nothing else explains the failure. A smaller request
 * is proposed only when the free memory is at least 1/MAKE_ROOM_PIECES of the request. */
#define MAKE_ROOM_PIECES 8
static void make_room(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "request_exceeds_free");
    const struct ot_snapshot *s = a->s;
    /* Nothing freed by many sites alike: the largest of them is one tie of many, not the one to free. */
    if (!it || !a->has_at_failure || !a->at_failure.n || why_find(a->why, "nothing_freed"))
        return;
    uint64_t req = item_num(it, "requested_bytes"), freeb = item_num(it, "free_bytes"), short_b = item_num(it, "short_bytes");
    const struct ot_site *top = &a->at_failure.v[0];
    if (!short_b || top->bytes < short_b)
        return;
    char b1[32], b2[32], b3[32], b4[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "make_room"))
        return;
    fprintf(b.f, "The request of %s was %s short of the %s free on device %" PRId64 ", and ", why_bytes(b1, req),
            why_bytes(b2, short_b), why_bytes(b3, freeb), s->failure.device);
    why_put_headline(b.f, a, top->stack_id);
    fprintf(b.f, " held %s live at the failure (%s allocation%s): free what it holds (or move it to the host) before the "
            "request", why_bytes(b4, top->bytes), ot_fmt_count(b1, top->count), top->count == 1 ? "" : "s");
    /* A smaller request is a remedy only while what is free holds a useful piece of it: "no larger than 0 B"
     * is none (walk 8, #1). */
    bool smaller = freeb && freeb >= req / MAKE_ROOM_PIECES;
    if (smaller) {
        fputs(", or make the request", b.f);
        if (s->failure.stack_id) {
            fputs(" at ", b.f);
            why_put_headline(b.f, a, s->failure.stack_id);
        }
        fprintf(b.f, " no larger than %s (in pieces, or a smaller batch).", why_bytes(b1, freeb));
    } else if (freeb) {
        fprintf(b.f, ": with %s free, less than 1/%d of the request, a smaller request is no way out; the memory must be "
                "freed first.", why_bytes(b1, freeb), MAKE_ROOM_PIECES);
    } else {
        fputs(": the device had nothing free, so no request of any size fits until memory is freed.", b.f);
    }
    WHY_NUMS_U(&b, {"site_bytes", top->bytes}, {"stack_id", top->stack_id}, {"requested_bytes", req},
               {"free_bytes", freeb}, {"short_bytes", short_b}, {"smaller_request", smaller});
    why_item_end(&b);
}

/* The bytes a remedy addresses, from its numbers: what ranks it. */
static uint64_t weight(const struct ot_why_item *it)
{
    static const char *const keys[] = {"used_bytes", "free_in_cache_bytes", "bytes_limit", "pool_free_bytes", "activations_bytes",
                                       "optimizer_state_bytes", "parameters_bytes", "growth_bytes", "step_demand_bytes", "peak_bytes"};
    /* A remedy's first key in this list is the one it rests on. */
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        for (size_t k = 0; k < it->nnum; k++)
            if (strcmp(it->num[k].key, keys[i]) == 0)
                return it->num[k].kind == OT_WHY_I64 ? (uint64_t)it->num[k].i : it->num[k].u;
    return 0;
}

#define MAX_REMEDIES 2

/* Memory in use before the process started (why: baseline_in_use) that NVML could not name. */
static void baseline_in_use(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_why_item *it = why_find(a->why, "baseline_in_use");
    if (!it)
        return;
    uint64_t base = item_num(it, "baseline_bytes"), total = item_num(it, "total_bytes");
    char b1[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "baseline_in_use"))
        return;
    fprintf(b.f, "%s (%.0f%%) of device %" PRId64 " was in use before this process allocated: `nvidia-smi` (on the host, "
            "outside a container) lists the processes that hold it; stop them, or use another card (CUDA_VISIBLE_DEVICES).",
            why_bytes(b1, base), share(base, total), dev);
    WHY_NUMS_U(&b, {"used_bytes", base}, {"total_bytes", total});
    why_item_end(&b);
}

/* Remedies for what refused this very request while memory existed (another process on the card, the
 * cache in pieces, a preallocated pool) come before those for the categories that filled it. */
static bool direct(const struct ot_why_item *it)
{
    return strcmp(it->kind, "request_too_large") == 0 || strcmp(it->kind, "other_process") == 0 ||
           strcmp(it->kind, "baseline_in_use") == 0 || strcmp(it->kind, "fragmentation") == 0 ||
           strcmp(it->kind, "jax_preallocation") == 0 || strcmp(it->kind, "framework_pool_cache") == 0 ||
           strcmp(it->kind, "framework_limit") == 0;
}

/* A leak and a step's need that grows, each at its own bytes a step: the one that stops more of the device's growth
 * a step comes first (walk 11, #2: a request 16 MiB larger each step beside a 2 MiB leak, whose fix alone lets 13
 * more steps run). */
static bool growth_pair(const struct ot_why_item *x, const struct ot_why_item *y)
{
    return (strcmp(x->kind, "leak") == 0 && strcmp(y->kind, "bound_input") == 0) ||
           (strcmp(x->kind, "bound_input") == 0 && strcmp(y->kind, "leak") == 0);
}

static uint64_t per_step(const struct ot_why_item *it)
{
    uint64_t v = item_num(it, "bytes_per_step");
    return v ? v : item_num(it, "bytes_per_interval");
}

/* The Why statement each remedy answers. The remedies for a category's share of What held the memory
 * (no_grad, activations, optimizer_state, parameters) and headroom answer none: the Why states no cause for
 * them, only the breakdown's numbers. */
static const struct {
    const char *remedy, *statement;
} answers[] = {
    {"request_too_large", "request_exceeds_total"}, {"pin_less", "host_request"},
    {"pool_cap", "pool_cap"},                       {"other_process", "other_processes"},
    {"baseline_in_use", "baseline_in_use"},         {"fragmentation", "fragmentation"},
    {"jax_preallocation", "jax_preallocation"},     {"framework_pool_cache", "framework_pool_cached"},
    {"pool_trim", "pool_cached"},                   {"leak", "growing_site"},
    {"unbounded_site", "unfreed_site"},             {"free_unused", "nothing_freed"},
    {"bound_input", "growing_request"},             {"step_input", "step_demand"},
    {"make_room", "request_exceeds_free"},          {"framework_limit", "framework_limit"},
};

/* Where the statement a remedy answers stands in the Why; SIZE_MAX when it answers none, or the Why does not
 * make that statement. */
static size_t stated_at(const struct ot_why *why, const struct ot_why_item *it)
{
    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
        if (strcmp(answers[i].remedy, it->kind) != 0)
            continue;
        for (size_t k = 0; why && k < why->n; k++)
            if (strcmp(why->v[k].kind, answers[i].statement) == 0)
                return k;
        break;
    }
    return SIZE_MAX;
}

/* A reader takes the first remedy as the answer to the first cause the Why states: remedies for the causes it
 * states come in its order, and before those that rest on a category's bytes alone, however large (runs 45-46:
 * checkpointing, for activations at 53% of the peak, came before bounding the input of a request that the Why
 * said grew 256 MiB a step). */
static bool before(const struct ot_why *why, const struct ot_why_item *x, const struct ot_why_item *y)
{
    if (direct(x) != direct(y))
        return direct(x);
    /* The framework's own limit refused this very request: its remedy before another framework's pool's. */
    const bool fx = strcmp(x->kind, "framework_limit") == 0, fy = strcmp(y->kind, "framework_limit") == 0;
    if (fx != fy)
        return fx;
    if (growth_pair(x, y))
        return per_step(x) > per_step(y);
    size_t sx = stated_at(why, x), sy = stated_at(why, y);
    if (!direct(x) && sx != sy)
        return sx < sy;
    return weight(x) > weight(y);
}

static void keep_strongest(struct ot_why *w, const struct ot_why *why)
{
    /* Insertion sort, stable: equal ranks keep the order they were found in. */
    for (size_t i = 1; i < w->n; i++) {
        struct ot_why_item x = w->v[i];
        size_t j = i;
        for (; j > 0 && before(why, &x, &w->v[j - 1]); j--)
            w->v[j] = w->v[j - 1];
        w->v[j] = x;
    }
    while (w->n > MAX_REMEDIES)
        free(w->v[--w->n].text);
}

struct ot_why *ot_remedies_new(const struct ot_analysis *a)
{
    struct ot_why *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    const struct ot_breakdown *bd = a->breakdown;
    if (a->why && a->why->has_device) {
        w->device = a->why->device;
        w->has_device = true;
    }
    remedy_request_too_large(w, a);
    remedy_pin_less(w, a);
    remedy_pool_cap(w, a);
    if (w->n)
        return w; /* nothing else makes room for it (or the host refused, not a device) */
    other_process(w, a, w->device);
    baseline_in_use(w, a, w->device);
    fragmentation(w, a, w->device);
    jax_preallocation(w, a, w->device);
    pool_trim(w, a);
    remedy_fw_limit(w, a); /* (not alone: freeing memory makes room under the fraction too) */
    size_t before = w->n;
    remedy_leak(w, a);
    if (w->n == before)
        remedy_unbounded_site(w, a);
    if (w->n == before)
        remedy_free_unused(w, a);
    /* Memory held across steps that filled at least half of the peak: checkpointing or a smaller batch
     * does not stop it from growing, so the activations' remedies would mislead. */
    bool leaking = w->n > before && a->peak && item_num(&w->v[before], "growth_bytes") * 2 >= a->peak->bytes;
    /* A step's need that grows step after step is bounded by the same means as one step given a larger input. */
    size_t grown = w->n;
    remedy_bound_input(w, a);
    if (w->n == before && w->n == grown)
        remedy_step_input(w, a);
    if (bd && bd->has_device) {
        int grad_enabled = -1;
        bool torch = a->s->meta.python_version.n > 0 && pytorch_or_unknown(&a->s->fw);
        pool_cache(w, a, bd);
        bool inference = torch && inference_with_grad(a, bd, &grad_enabled);
        if (!leaking)
            activations(w, bd, torch, inference, grad_enabled);
        optimizer_state(w, a, bd);
        parameters(w, bd);
    }
    if (w->has_device)
        headroom(w, a, w->device);
    if (!w->n)
        make_room(w, a);
    keep_strongest(w, a->why);
    return w;
}
