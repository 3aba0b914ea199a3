/* Inside analyze/why/: the detectors, one file each, and how each builds its statement (a sentence
 * written as it goes, and the numbers it rests on). Not for use outside analyze/why/. */
#ifndef OT_READ_WHY_ITEM_H
#define OT_READ_WHY_ITEM_H

#include <stdio.h>

#include "analyze/why.h"

struct why_item_b {
    struct ot_why *w;
    struct ot_why_item *it;
    FILE *f; /* the sentence */
    char *buf;
    size_t len;
};

/* false when the list is full or out of memory: the detector then says nothing. */
bool why_item_begin(struct why_item_b *b, struct ot_why *w, const char *kind);
void why_item_end(struct why_item_b *b);
/* why_item_begin, then the sentence's first words. */
bool why_item_say(struct why_item_b *b, struct ot_why *w, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void why_num_u(struct why_item_b *b, const char *key, uint64_t v);
void why_num_i(struct why_item_b *b, const char *key, int64_t v);
void why_num_f(struct why_item_b *b, const char *key, double v);

/* Several unsigned numbers in order: WHY_NUMS_U(&b, {"key", value}, ...). */
struct why_kv {
    const char *key;
    uint64_t v;
};
void why_nums_u(struct why_item_b *b, const struct why_kv *kv, size_t n);
#define WHY_NUMS_U(b, ...)                                                                                             \
    why_nums_u((b), (const struct why_kv[]){__VA_ARGS__},                                                              \
               sizeof((const struct why_kv[]){__VA_ARGS__}) / sizeof(struct why_kv))

/* The peak came well before an out-of-memory failure that found at most half of it live on the device (a
 * workspace freed long before): the live bytes at the failure in *live. Statements about the peak then say
 * so, rather than read as the failure's cause (walk 8, #32). */
bool why_peak_long_before(const struct ot_analysis *a, uint64_t *live);
/* A call site's live bytes on a device in the live set at the snapshot. */
uint64_t why_site_live(const struct ot_snapshot *s, int64_t dev, uint64_t stack_id);

/* A call site's one-line name and its stack id; a marker by its label (ot_marker_label: MARKERS's, else its
 * event's in the ring), or by its seq, said to have lost its label, when neither holds it. */
void why_put_headline(FILE *f, const struct ot_analysis *a, uint64_t stack_id);
void why_put_marker(FILE *f, const struct ot_analysis *a, uint64_t seq);
/* A label's kind: its bytes up to the first digit (all of them when it has none); "valid 3" and "valid 4" are
 * of one kind, "step 3" of another. */
size_t why_label_kind(struct ot_str label);
/* The kind of the marker at seq, quoted as its label up to the first digit and "N": "valid N"; false (and
 * nothing written) when its label is not known: such a marker stands for no kind. */
bool why_put_kind(FILE *f, const struct ot_analysis *a, uint64_t seq);
/* Markers of one kind: labels known and alike up to the first digit ("step 19" and "step 20"). */
bool why_same_kind(const struct ot_analysis *a, uint64_t x, uint64_t y);
/* "pid 629 (python3, a child of this process)": another process on the device as NVML listed it, with
 * its name and how it is related to this process where the snapshot says (others.c). */
void why_put_process(FILE *f, const struct ot_snapshot *s, const struct ot_process *p);
/* Is it this process's descendant (a DataLoader worker, a multiprocessing child that opened CUDA)? */
bool why_process_is_child(const struct ot_process *p);

static inline const char *why_bytes(char *buf, uint64_t v)
{
    return ot_fmt_bytes(buf, v);
}

/* A rate per second means something only over a span of a second or more: a burst of allocations over a
 * few milliseconds reads as "+142 GiB per second". A shorter span is stated as the growth in bytes, per
 * allocation, and the span itself. */
#define WHY_RATE_MIN_NS 1000000000ull
static inline bool why_rate_ok(uint64_t ns)
{
    return ns >= WHY_RATE_MIN_NS;
}
/* A span of time in the unit that reads best: "5.27 ms", "12.3 s". */
const char *why_span(char *buf, size_t n, uint64_t ns);

static inline double why_share(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

/* The frameworks' views of device dev, one at a time from *i on (start at 0); NULL after the last. */
const struct ot_fw_devview *why_fw_dev_next(const struct ot_analysis *a, int64_t dev, size_t *i);

/* The detectors, in the order their statements are listed. */
void why_request(struct ot_why *w, const struct ot_analysis *a);
void why_others(struct ot_why *w, const struct ot_analysis *a, int64_t dev);
/* Memory in use on the device before this process's first allocation, when NVML names no other process. */
void why_baseline(struct ot_why *w, const struct ot_analysis *a, int64_t dev);
void why_pools(struct ot_why *w, const struct ot_analysis *a, int64_t dev);
/* A request within the free memory refused by a pool the program created (pool_cap.c). */
void why_pool_cap(struct ot_why *w, const struct ot_analysis *a);
void why_peak_site(struct ot_why *w, const struct ot_analysis *a);
void why_peak_phase(struct ot_why *w, const struct ot_analysis *a);
void why_ring(struct ot_why *w, const struct ot_analysis *a, int64_t dev);
void why_step_inputs(struct ot_why *w, const struct ot_analysis *a);
/* One interval between markers as the ring's replay saw it: the marker it starts at, the live bytes there,
 * the highest in it and at its end (relative to the ring's start), and the frees in it. */
struct why_interval {
    uint64_t marker_seq;
    int64_t start_live, high_live, end_live;
    uint64_t frees;
    bool adjacent; /* the interval just before the failing one (else the last of the failing one's kind) */
};
/* Of markers mseq[0..nm) (nm >= 2), the one that began the interval to compare the failing one with: the one
 * before it, or, when that is of another kind (a step before a validation pass), the last of its own kind
 * (the previous validation pass): a phase is judged against its own kind when it had one. */
size_t why_step_demand_prev(const struct ot_analysis *a, const uint64_t *mseq, size_t nm);
void why_step_demand(struct ot_why *w, const struct ot_analysis *a, int64_t dev, const struct why_interval *prev,
                     const struct why_interval *last);
/* The frameworks' view (allocview.h). */
void why_fragmentation(struct ot_why *w, const struct ot_analysis *a);
void why_framework_cache(struct ot_why *w, const struct ot_analysis *a, int64_t dev);
void why_graph_pool(struct ot_why *w, const struct ot_analysis *a, int64_t dev);
void why_fw_pools(struct ot_why *w, const struct ot_analysis *a, int64_t dev);
void why_fw_limit(struct ot_why *w, const struct ot_analysis *a);
void why_jax_prealloc(struct ot_why *w, const struct ot_analysis *a, int64_t dev);

#endif
