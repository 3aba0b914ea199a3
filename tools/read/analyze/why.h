/* "Why": short statements that explain an out-of-memory (or a peak), each built only from numbers the
 * snapshot measured, each carrying those numbers. Nothing is said when the data for it is not there.
 *
 * Kinds (docs/JSON.md lists their numbers):
 *   request_exceeds_total  the failed request is larger than the whole device
 *   request_exceeds_free   the failed request is larger than the free memory (cuMemGetInfo at the snapshot)
 *   request_within_free    the failed request is not larger than the free memory at the snapshot
 *   other_processes        other processes held memory on the device (PROCESSES, NVML)
 *   pool_cached            stream-ordered pools hold memory their allocations do not use (POOLS)
 *   peak_site              one call site holds at least half of the peak (PEAK)
 *   peak_phase             at least half of the peak was allocated after one marker label (PEAK, MARKERS)
 *   step_inputs            the optimizer step under way at the failure had other model inputs than the step before
 *   growing_site           a call site's live memory grew in >= 3 consecutive marker intervals (EVENTS)
 *   largest_rise           the marker interval with the largest rise of live bytes before the failure (EVENTS)
 *   largest_allocation     without markers: the largest single allocation in the ring (EVENTS)
 *   framework_limit        a framework's own limit (PyTorch's per-process fraction) refused the request
 *   fragmentation          a framework's segments held enough free memory for the request, in pieces
 *   jax_preallocation      JAX reserved its pool at start; its limit, use and largest free block
 *   framework_cache        whole segments with no live tensor: freed by the program, kept by the framework
 *   framework_pool_cached  another framework's pool keeps memory the program freed (CuPy, XLA)
 *   graph_private_pool     CUDA graphs' private pools and what they hold */
#ifndef OT_READ_WHY_H
#define OT_READ_WHY_H

#include "analyze/analysis.h"

#define OT_WHY_MAX_ITEMS 16
#define OT_WHY_MAX_NUMBERS 16

enum ot_why_numkind { OT_WHY_U64, OT_WHY_I64, OT_WHY_F64 };

struct ot_why_number {
    const char *key; /* static string */
    enum ot_why_numkind kind;
    uint64_t u;
    int64_t i;
    double f;
};

struct ot_why_item {
    const char *kind; /* static string */
    char *text;       /* one sentence, safe to print (untrusted bytes escaped) */
    size_t nnum;
    struct ot_why_number num[OT_WHY_MAX_NUMBERS];
};

struct ot_why {
    size_t n;
    struct ot_why_item v[OT_WHY_MAX_ITEMS];
    int64_t device;  /* the device the statements are about (the failing one, else the leading peak's) */
    bool has_device;
};

/* Builds the statements for an analysis (called by ot_analyze, once the rest of it is built). Returns NULL only when out of memory. */
struct ot_why *ot_why_new(const struct ot_analysis *a);
void ot_why_free(struct ot_why *w);

/* Does a statement name the marker at this seq (why/cited.c)? The seq must be a marker's. */
bool ot_why_cites_marker(const struct ot_why *w, uint64_t seq);

/* "What to try" (why/remedies.c): the remedies whose numbers this snapshot supports, as statements of
 * the same shape (kinds listed there). Built after the statements. NULL only when out of memory. */
struct ot_why *ot_remedies_new(const struct ot_analysis *a);

#endif
