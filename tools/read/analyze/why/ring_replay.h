/* Inside analyze/why/: the replay of the event ring up to the failure (or the peak) that ring.c's
 * statements are made from (ring_replay.c), and the state it leaves. Not for use outside analyze/why/. */
#ifndef OT_READ_WHY_RING_REPLAY_H
#define OT_READ_WHY_RING_REPLAY_H

#include "analyze/why/item.h"
#include "model/replay.h"

/* Bounds on the ring replay's memory: past these, per-site growth is not computed (the other
 * statements are unaffected). */
#define OT_WHY_MAX_LIVE (16u << 20)
#define OT_WHY_MAX_SITES (1u << 20)

#define NO_MARK SIZE_MAX

/* Without markers: the ring up to the target cut into this many windows. Eight leave room for the three
 * consecutive rises a growing site needs, with windows still long enough to hold a loop's iterations. */
#define WINDOWS 8

/* Kinds of markers: labels alike up to their first digit ("valid 3" and "valid 4", not "step 3"). The intervals
 * each kind begins are judged apart too: a leak made only in the validation pass every tenth step rises in
 * one interval of ten (walk 9, #13). Past this many kinds, a marker has none. */
#define WHY_KINDS 4
#define NO_KIND 0xff
#define WHY_KIND_BYTES 64

struct site_state {
    uint64_t stack_id;
    uint64_t cur_count, cur_bytes;   /* live now: allocations seen in the ring, and those seeded before it */
    uint64_t seed_count, seed_bytes; /* made before the ring's first kept event, live at the snapshot or the peak */
    uint64_t mark_count, mark_bytes; /* at the last marker it was sampled at (its level at the latest marker) */
    size_t mark_idx;                 /* that marker, or NO_MARK */
    /* Over the complete intervals between markers: how often its live bytes rose and fell, from the marker
     * before its first rise (and its level there), and the end of its latest rise. */
    size_t rises, falls, first_rise, last_rise;
    uint64_t first_count, first_bytes, rise_bytes; /* rise_bytes: the sum of its rises */
    /* The same by the kind of marker that began the interval: rises, the marker that began the first and
     * the latest rising interval, and its level at the first's start. */
    uint32_t krises[WHY_KINDS], kfirst[WHY_KINDS], klast[WHY_KINDS];
    uint64_t kfirst_count[WHY_KINDS], kfirst_bytes[WHY_KINDS];
    uint64_t snap_count, snap_bytes; /* in the live set at the snapshot */
    /* Freed by a context's end (cuCtxDestroy, a primary context's reset) since its latest sample: the program
     * never gave it back, so it counts as held (a cudaDeviceReset() at the end of main hid a leak, walk 9 #14). */
    uint64_t ctx_end_bytes;
    uint64_t allocs, frees;               /* in the ring: allocations made, and of those, freed (or replaced) */
    uint64_t first_time, last_alloc_seq; /* its first allocation's time (ns), its latest's seq */
    bool dirty;
};

struct replay {
    const struct ot_analysis *a;
    int64_t dev;
    uint64_t target;
    /* markers in the ring before the target */
    uint64_t *mseq;
    size_t nm, mcap;
    uint64_t *mtime;  /* each marker's time (ns) */
    int64_t *mlive;   /* live bytes at each marker (the ring's, plus the allocations seeded before it) */
    bool *mstep;      /* the companion's optimizer-step marker */
    uint64_t *mfrees; /* frees in the interval that ends at each marker */
    int64_t *mhigh;   /* the highest live bytes in the interval that ends at each marker */
    size_t *mbusy;    /* intervals up to each marker that held an allocation or free on the device */
    /* Sites are sampled at a marker that starts a step: one whose label numbers a step other than the
     * marker's before it ("step 3 micro-batch 0" after "step 2 micro-batch 3"), or any not numbering one.
     * A marker per micro-batch then makes intervals that are steps, and mbusy counts those. */
    bool *mbound;
    uint8_t *mkind;  /* each marker's kind (an index into kinds), or NO_KIND */
    /* The largest allocation the failed request's call site made in the step that ends at each marker (at one
     * that is not a step's start: so far in the step under way); req_cur: since the latest step's start. */
    uint64_t *mreq;
    uint64_t req_stack, req_cur;
    /* A framework's OOM (framework-oom) has no driver allocation of its own: its stack is where the framework
     * raised. The allocations whose stacks share its line of the program's own code (userline.h) stand for its
     * call site then: under a caching allocator they are the segments each step's larger tensors needed (runs
     * 43-44: a request 256 MiB larger each step, made at the line of loss.backward()). Keys: stack ids. */
    struct ot_u64map req_line;
    bool by_line;
    /* Each kind's label up to its first digit: its length, and a copy of its first WHY_KIND_BYTES (an event's
     * label lives only while its chunk is decoded). Kinds alike in these and in length are one. */
    char kinds[WHY_KINDS][WHY_KIND_BYTES];
    size_t kind_len[WHY_KINDS];
    size_t nkinds;
    size_t tcap, lcap, scap_, fcap, hcap, bcap, ocap, kcap, qcap;
    size_t last_bound; /* the latest marker that started a step (valid when nbound) */
    size_t nbound;
    bool group_busy;   /* the device saw an allocation or free since last_bound */
    bool have_step;    /* the latest marker's label numbers a step: cur_step */
    uint64_t cur_step;
    int64_t live;     /* live bytes now (as mlive) */
    int64_t high;     /* the highest live bytes since the last marker */
    uint64_t tail_frees; /* frees after the last marker */
    /* no markers in the ring: window boundaries (seq) stand for them */
    bool windows;
    uint64_t wb[WINDOWS];
    size_t next_w;
    /* sites */
    struct ot_u64map site_idx;
    struct ot_replay *rp; /* while replaying */
    struct site_state *sites;
    size_t nsites, scap;
    uint32_t *dirty;
    size_t ndirty, dcap;
    bool sites_off; /* a bound or out of memory: no growth statement */
    /* windows */
    int64_t delta;
    uint64_t w_allocs, w_frees;
    bool have_best;
    int64_t best_delta;
    size_t best_from, best_to; /* marker indexes; NO_MARK: ring start / the target */
    uint64_t best_allocs, best_frees;
    uint64_t ring_first_seq, last_seq, last_time;
    uint64_t seeded_count, seeded_bytes; /* allocations made before the ring, live at the snapshot or the peak */
    bool any_event;
    /* the largest allocation */
    uint64_t big_size, big_seq, big_stack;
    uint64_t frees_on_dev;
    uint64_t last_alloc_seq; /* the device's latest allocation in the ring */
    uint64_t ctx_end_seq;    /* the latest context end visited: the frees of that seq are its */
    bool any_ctx_end;
    /* Context ends on the device before the target whose frees the snapshot does not list (it keeps the
     * latest ends' lists): after them the replay's live bytes are too high, by what they freed. */
    uint64_t unlisted_ends, unlisted_bytes;
};

/* "step 12", "step 3 micro-batch 1", "step 7 seq_len=4096": the step a marker's label numbers. */
bool why_label_step(struct ot_str label, uint64_t *step);

/* Replays the ring into r (its a, dev, target and windows set): 0, or -1 when the ring could not be read. */
int why_ring_replay(struct replay *r);

/* The growing_site statement from a replay (growth.c). */
void why_growth(struct ot_why *w, struct replay *r);

/* A step's need that grows from one step to the next (request_growth.c): of the steps that markers of the
 * latest step's kind began, the run up to the latest in which the value rose in at least 4 of 5 and never fell
 * by more than an eighth, over at least 8 steps, at least doubling. The value is the largest allocation of the
 * failed request's call site in each step (the failed request in the step under way: by_site), or how far live
 * memory rose above the step's start (its height). */
struct step_growth {
    bool by_site;
    size_t n, rises, falls; /* steps in the run, and the rises and falls between them */
    size_t first, last;     /* the markers that began the run's first and last step */
    uint64_t from, to;      /* the value in the run's first and last step */
    uint64_t prev_to;       /* ... and in the step before the last, which marker prev_last began */
    size_t prev_last;
    uint64_t per_step;      /* (to - from) over the steps between them (by their labels' numbers when they have) */
    uint64_t steps;         /* those steps */
    bool numbered;          /* the markers' labels number steps */
    bool under_way;         /* the last step is the one under way at the failure or the snapshot */
};
bool why_step_growth(const struct replay *r, bool by_site, struct step_growth *g);
/* The growing_request statement (request_growth.c). */
void why_growing_request(struct ot_why *w, const struct replay *r);

#endif
