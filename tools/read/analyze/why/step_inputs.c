/* step_inputs: the optimizer step under way at the failure ran with other model inputs than an earlier step
 * (the companion's step_in_progress and its inputs' shapes, against the latest step in its step record whose
 * inputs it sampled):
 * the guides' "the sequence length jumped from 1024 to 2048 just before the OOM". */
#include "analyze/why/item.h"

#include <inttypes.h>
#include <string.h>

void why_step_inputs(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    uint64_t step;
    if (!s->has_failure || !ot_fw_stat(s, "torch", (uint64_t)s->failure.device, "step_in_progress", &step) || step < 2)
        return;
    struct ot_str now = ot_fw_setting_get(&s->fw, "torch", "step_in_progress_input_shapes");
    if (!now.n)
        return;
    /* The latest earlier step whose inputs the companion saw (it samples them: at most once a second, so a
     * short step's entry mostly carries none), as the step hook recorded it when it ended; and the latest
     * earlier step whose allocator counters the companion read (only every 10,000 x their cost: such
     * entries mostly carry 0 and 0; docs/FORMAT.md, STEPS). */
    const struct ot_fw_step *prev = NULL, *read = NULL;
    for (size_t i = 0; i < s->fw.nsteps; i++) {
        const struct ot_fw_step *x = &s->fw.steps[i];
        if (!ot_str_eq(x->framework, "torch") || x->step >= step)
            continue;
        if (x->input_shapes.n && (!prev || x->step > prev->step))
            prev = x;
        if ((x->allocated_bytes || x->reserved_bytes) && (!read || x->step > read->step))
            read = x;
    }
    if (!prev || (prev->input_shapes.n == now.n && memcmp(prev->input_shapes.p, now.p, now.n) == 0))
        return;
    char b1[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "step_inputs", "The model's inputs changed just before the failure: optimizer step %" PRIu64
                      " was under way with ", step))
        return;
    ot_fput_safe_max(b.f, now, 200);
    fprintf(b.f, ", where step %" PRIu64 " had ", prev->step);
    ot_fput_safe_max(b.f, prev->input_shapes, 200);
    if (read == prev)
        fprintf(b.f, " (and ended with %s allocated by PyTorch).", why_bytes(b1, read->allocated_bytes));
    else if (read)
        fprintf(b.f, " (step %" PRIu64 " ended with %s allocated by PyTorch).", read->step, why_bytes(b1, read->allocated_bytes));
    else
        fputc('.', b.f);
    WHY_NUMS_U(&b, {"step", step}, {"previous_step", prev->step});
    if (read)
        WHY_NUMS_U(&b, {"previous_allocated_bytes", read->allocated_bytes}, {"allocated_step", read->step});
    why_item_end(&b);
}
