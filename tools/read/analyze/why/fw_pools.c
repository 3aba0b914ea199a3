/* framework_pool_cached: memory the program freed that another framework's pool keeps (CuPy's default
 * pool; XLA's pool beyond what JAX's arrays use, when it does not preallocate). */
#include "analyze/why/item.h"

#include <inttypes.h>

void why_fw_pools(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    if (!s->fw.present || dev < 0)
        return;
    uint64_t used, total, freeb;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (ot_fw_stat(s, "cupy", (uint64_t)dev, "pool_free_bytes", &freeb) && freeb &&
        ot_fw_stat(s, "cupy", (uint64_t)dev, "pool_used_bytes", &used) &&
        ot_fw_stat(s, "cupy", (uint64_t)dev, "pool_total_bytes", &total) && why_item_begin(&b, w, "framework_pool_cached")) {
        fprintf(b.f, "CuPy's memory pool kept %s that the program had freed (pool %s, of which %s in use by live"
                " arrays): the device counts it as used; cupy.get_default_memory_pool().free_all_blocks() returns it",
                why_bytes(b1, freeb), why_bytes(b2, total), why_bytes(b3, used));
        if (s->has_failure && s->failure.device == dev)
            fprintf(b.f, " (%s the failed request of %s)", freeb >= s->failure.requested_bytes ? "more than" : "less than",
                    why_bytes(b1, s->failure.requested_bytes));
        fputc('.', b.f);
        WHY_NUMS_U(&b, {"pool_free_bytes", freeb}, {"pool_used_bytes", used}, {"pool_total_bytes", total});
        why_item_end(&b);
    }
    struct ot_str pre = ot_fw_setting_get(&s->fw, "jax", "preallocate_effective");
    uint64_t pool, in_use;
    if (!ot_str_eq(pre, "true") && ot_fw_stat(s, "jax", (uint64_t)dev, "pool_bytes", &pool) &&
        ot_fw_stat(s, "jax", (uint64_t)dev, "bytes_in_use", &in_use) && pool > in_use &&
        why_item_begin(&b, w, "framework_pool_cached")) {
        fprintf(b.f, "XLA's allocator for JAX kept %s on device %" PRId64 " beyond what live arrays use (pool %s, in use %s).",
                why_bytes(b1, pool - in_use), dev, why_bytes(b2, pool), why_bytes(b3, in_use));
        WHY_NUMS_U(&b, {"pool_bytes", pool}, {"bytes_in_use", in_use}, {"pool_free_bytes", pool - in_use});
        why_item_end(&b);
    }
}
