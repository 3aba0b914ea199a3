/* The statements, detector by detector, for one analysis. */
#include "analyze/why/item.h"

#include <stdlib.h>
#include <string.h>

struct ot_why *ot_why_new(const struct ot_analysis *a)
{
    struct ot_why *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    const struct ot_snapshot *s = a->s;
    if (s->has_failure) {
        w->device = s->failure.device;
        w->has_device = true;
    } else if (a->peak) {
        w->device = a->peak->device;
        w->has_device = true;
    }
    why_request(w, a);
    /* A request larger than the whole device fails whatever else the program held: what held the memory, who
     * else holds the device and how it grew are beside the point (freeing any of it cannot help). */
    if (w->n && strcmp(w->v[w->n - 1].kind, "request_exceeds_total") == 0)
        return w;
    /* A framework's own refusal or layout explains a failure before the driver's numbers do. */
    why_fw_limit(w, a);
    why_fragmentation(w, a);
    if (w->has_device && w->device >= 0) {
        why_jax_prealloc(w, a, w->device);
        why_framework_cache(w, a, w->device);
        why_fw_pools(w, a, w->device);
        why_graph_pool(w, a, w->device);
        why_others(w, a, w->device);
        why_pools(w, a, w->device);
    }
    why_peak_site(w, a);
    why_peak_phase(w, a);
    why_step_inputs(w, a);
    if (w->has_device && w->device >= 0)
        why_ring(w, a, w->device);
    return w;
}

void ot_why_free(struct ot_why *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i].text);
    free(w);
}
