/* What to try: each cause the numbers diagnose, mapped to the remedies the OOM guides give, with the
 * exact setting and the number that justifies it. A remedy whose number does not support it is left out:
 * nothing here is generic advice.
 *
 *   activations     activations and temporaries are at least half of the peak
 *   optimizer_state optimizer state is at least 1.5x the parameters
 *   parameters      parameters are at least half of the device's used memory
 *   fragmentation   PyTorch's request is larger than its largest free block while its free blocks would hold it
 *   other_process   another process holds at least 10% of the device
 *   jax_preallocation  JAX preallocated at least half of the device
 *   leak            a call site grew in every marker interval by at least 1% of the peak, and the ring saw
 *                   frees (why: growing_site)
 *   headroom        no failure, but the peak left less than 15% of the device free */
#include "analyze/why/item.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/breakdown.h"

static double share(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* The activation remedies are PyTorch's (checkpointing, autocast): a snapshot whose frameworks' view names
 * only others (JAX, CuPy) does not get them from stack guesses. */
static bool pytorch_or_unknown(const struct ot_framework *fw)
{
    if (!fw->present || !fw->ninfo)
        return true;
    for (size_t i = 0; i < fw->ninfo; i++)
        if (ot_str_eq(fw->info[i].framework, "torch"))
            return true;
    return false;
}

static void activations(struct ot_why *w, const struct ot_breakdown *bd, bool python)
{
    const struct ot_bd_moment *m = bd->peak.known ? &bd->peak : &bd->now;
    uint64_t act = m->bytes[OT_BD_ACTIVATIONS];
    if (!m->known || !m->whole || act * 2 < m->whole)
        return;
    /* Stacks alone call every allocation of a program without a framework "activations": the remedy needs
     * identity, or at least a Python program whose framework frames were read. */
    if (!bd->identity && m->inferred[OT_BD_ACTIVATIONS] * 2 > act && !python)
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "activations",
            "Activations and temporaries are %.0f%% of the %s (%s%s): gradient checkpointing "
            "(torch.utils.checkpoint on the largest blocks), or half the batch with twice the gradient accumulation steps; "
            "autocast to bf16 halves them again where the model runs in fp32.",
            share(act, m->whole), m == &bd->peak ? "peak" : "used memory", why_bytes(b1, act),
            m->inferred[OT_BD_ACTIVATIONS] * 2 > act ? ", inferred from stacks" : ""))
        return;
    why_num_u(&b, "activations_bytes", act);
    why_num_u(&b, "whole_bytes", m->whole);
    why_item_end(&b);
}

static void optimizer_state(struct ot_why *w, const struct ot_breakdown *bd)
{
    const struct ot_bd_moment *m = &bd->now;
    uint64_t st = m->bytes[OT_BD_OPTIMIZER], par = m->bytes[OT_BD_PARAMETERS];
    if (!m->known || !par || st * 2 < par * 3)
        return;
    char b1[32], b2[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "optimizer_state",
            "The optimizer state is %.1fx the parameters (%s against %s): an 8-bit optimizer "
            "(bitsandbytes.optim.Adam8bit), or ZeRO-2 / FSDP to shard it (and the gradients) across ranks.",
            (double)st / (double)par, why_bytes(b1, st), why_bytes(b2, par)))
        return;
    why_num_u(&b, "optimizer_state_bytes", st);
    why_num_u(&b, "parameters_bytes", par);
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
    const struct ot_process *top = NULL;
    for (size_t i = 0; i < s->nprocesses; i++) {
        const struct ot_process *p = &s->processes[i];
        if (p->device == dev && p->pid != s->meta.pid && (!top || p->used_bytes > top->used_bytes))
            top = p;
    }
    if (!top || top->used_bytes * 10 < d->total_bytes)
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "other_process", "pid %" PRIu64, top->pid))
        return;
    if (top->name.n) {
        fputs(" (", b.f);
        ot_fput_safe_max(b.f, top->name, 128);
        fputc(')', b.f);
    }
    if (top->pid && s->meta.pid && top->pid != s->meta.pid && s->meta.ppid == top->pid)
        fputs(", this process's parent,", b.f);
    fprintf(b.f, " holds %s, %.0f%% of device %" PRId64 ": stop it (check it is not a zombie of an earlier run) or "
            "use another card (CUDA_VISIBLE_DEVICES).", why_bytes(b1, top->used_bytes), share(top->used_bytes, d->total_bytes), dev);
    WHY_NUMS_U(&b, {"pid", top->pid}, {"used_bytes", top->used_bytes}, {"total_bytes", d->total_bytes});
    why_item_end(&b);
}

static void jax_preallocation(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    const struct snap_device *d = ot_snapshot_device(s, dev);
    int64_t limit = 0;
    if (!d || !d->total_bytes || !ot_fw_stat_get(&s->fw, "jax", (uint64_t)dev, "bytes_limit", &limit) || limit <= 0)
        return;
    struct ot_str pre = ot_fw_setting_get(&s->fw, "jax", "preallocate_effective");
    if (!ot_str_eq(pre, "true") || (uint64_t)limit * 2 < d->total_bytes)
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "jax_preallocation",
            "JAX preallocated %s, %.0f%% of device %" PRId64 ", for its own pool: XLA_PYTHON_CLIENT_PREALLOCATE=false "
            "(allocate on demand), or XLA_PYTHON_CLIENT_MEM_FRACTION to size the pool, if another framework or process "
            "shares the card.", why_bytes(b1, (uint64_t)limit), share((uint64_t)limit, d->total_bytes), dev))
        return;
    why_num_u(&b, "bytes_limit", (uint64_t)limit);
    why_num_u(&b, "total_bytes", d->total_bytes);
    why_item_end(&b);
}

static void leak(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why *why = a->why;
    if (!why)
        return;
    for (size_t i = 0; i < why->n; i++) {
        const struct ot_why_item *it = &why->v[i];
        if (strcmp(it->kind, "growing_site") != 0)
            continue;
        uint64_t frees = 0, intervals = 0, to_bytes = 0, from_bytes = 0;
        for (size_t k = 0; k < it->nnum; k++) {
            if (strcmp(it->num[k].key, "frees_in_ring") == 0)
                frees = it->num[k].u;
            else if (strcmp(it->num[k].key, "intervals") == 0)
                intervals = it->num[k].u;
            else if (strcmp(it->num[k].key, "to_bytes") == 0)
                to_bytes = it->num[k].u;
            else if (strcmp(it->num[k].key, "from_bytes") == 0)
                from_bytes = it->num[k].u;
        }
        if (!frees || to_bytes <= from_bytes)
            return; /* a caching allocator frees nothing: growth alone is not a leak */
        /* Growth too small to matter next to the peak supports no remedy. */
        const struct ot_peak_view *p = a->peak;
        if (!p || (to_bytes - from_bytes) * 100 < p->bytes)
            return;
        char b1[32];
        struct why_item_b b;
        if (!why_item_begin(&b, w, "leak"))
            return;
        if (a->s->meta.python_version.n)
            fprintf(b.f, "A call site kept %s more after %" PRIu64 " intervals (the growing site above): if it accumulates a "
                    "loss or a metric, add loss.item(), not the tensor; run evaluation under torch.no_grad(); drop "
                    "references that keep graphs alive.", why_bytes(b1, to_bytes - from_bytes), intervals);
        else
            fprintf(b.f, "A call site kept %s more after %" PRIu64 " intervals (the growing site above): free what it "
                    "allocates each interval, or bound what it keeps.", why_bytes(b1, to_bytes - from_bytes), intervals);
        why_num_u(&b, "growth_bytes", to_bytes - from_bytes);
        why_num_u(&b, "intervals", intervals);
        why_item_end(&b);
        return;
    }
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
    other_process(w, a, w->device);
    fragmentation(w, a, w->device);
    jax_preallocation(w, a, w->device);
    if (bd && bd->has_device) {
        activations(w, bd, a->s->meta.python_version.n > 0 && pytorch_or_unknown(&a->s->fw));
        optimizer_state(w, bd);
        parameters(w, bd);
    }
    leak(w, a);
    if (w->has_device)
        headroom(w, a, w->device);
    return w;
}
