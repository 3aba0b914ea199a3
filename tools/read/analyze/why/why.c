/* The statements, detector by detector, for one analysis. */
#include "analyze/why/item.h"

#include <stdlib.h>
#include <string.h>

static bool num_of(const struct ot_why_item *it, const char *key, uint64_t *v)
{
    for (size_t k = 0; k < it->nnum; k++)
        if (strcmp(it->num[k].key, key) == 0) {
            *v = it->num[k].kind == OT_WHY_I64 ? (uint64_t)it->num[k].i : it->num[k].u;
            return true;
        }
    return false;
}

/* The interval under way at the failure, when step_demand states it, is one fact: the phase that holds the
 * peak after the same marker (one interval) and the largest rise from that marker are said by it already, so
 * they are dropped rather than read as three causes. */
static void one_statement_per_interval(struct ot_why *w)
{
    uint64_t m = 0, v = 0, n = 0;
    size_t k = 0;
    while (k < w->n && !(strcmp(w->v[k].kind, "step_demand") == 0 && num_of(&w->v[k], "marker_seq", &m)))
        k++;
    if (k == w->n)
        return;
    size_t out = 0;
    for (size_t i = 0; i < w->n; i++) {
        const struct ot_why_item *it = &w->v[i];
        bool same = (strcmp(it->kind, "largest_rise") == 0 && num_of(it, "from_seq", &v) && v == m) ||
                    (strcmp(it->kind, "peak_phase") == 0 && num_of(it, "marker_seq", &v) && v == m &&
                     num_of(it, "intervals", &n) && n <= 1);
        if (same)
            free(w->v[i].text);
        else
            w->v[out++] = w->v[i];
    }
    w->n = out;
}

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
    why_pool_cap(w, a);
    /* A request larger than the whole device fails whatever else the program held: what held the memory, who
     * else holds the device and how it grew are beside the point (freeing any of it cannot help). */
    if (w->n && strcmp(w->v[w->n - 1].kind, "host_request") == 0)
        return w; /* no device's memory decided it */
    if (w->n && strcmp(w->v[w->n - 1].kind, "request_exceeds_total") == 0) {
        why_step_inputs(w, a); /* a step whose inputs grew is why its request grew past the device */
        return w;
    }
    /* A framework's own refusal or layout explains a failure before the driver's numbers do. */
    why_fw_limit(w, a);
    why_fragmentation(w, a);
    if (w->has_device && w->device >= 0) {
        why_jax_prealloc(w, a, w->device);
        why_framework_cache(w, a, w->device);
        why_fw_pools(w, a, w->device);
        why_graph_pool(w, a, w->device);
        why_others(w, a, w->device);
        why_baseline(w, a, w->device);
        why_pools(w, a, w->device);
    }
    why_peak_site(w, a);
    why_peak_phase(w, a);
    why_step_inputs(w, a);
    if (w->has_device && w->device >= 0)
        why_ring(w, a, w->device);
    one_statement_per_interval(w);
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
