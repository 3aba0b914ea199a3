/* The stage build's counters and its one line at exit (stage.h); the pass-through build's switch. Empty in the
 * normal build. */
#include "common/stage.h"

#if defined(OT_STAGE_CYCLES) || defined(OT_STAGE_PASS_ONLY)
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ot_stage_pass;

/* The two labels that switch OT_STAGE_PASS (stage.h); 1 when label is one of them */
static int stage_switch(const char *label)
{
    int to = !label ? -1 : !strcmp(label, "stage: pass-through") ? 1 : !strcmp(label, "stage: traced") ? 0 : -1;
    if (to >= 0)
        __atomic_store_n(&ot_stage_pass, to, __ATOMIC_RELAXED);
    return to >= 0;
}
#endif

#ifdef OT_STAGE_PASS_ONLY
static unsigned switches; /* for the exit line (the stage build's marks say the same) */

void ot_stage_mark(const char *label)
{
    if (stage_switch(label))
        __atomic_fetch_add(&switches, 1, __ATOMIC_RELAXED);
}

/* What a bench reads to know that its marks reached this build's switch (the normal build takes the marks too,
 * and has none). A process that never switched says nothing: a launcher, the companion's children. */
__attribute__((destructor)) static void pass_report(void)
{
    const unsigned k = __atomic_load_n(&switches, __ATOMIC_RELAXED);
    char line[96];
    int n = k ? snprintf(line, sizeof line, "OOMTRACE_PASS {\"pid\": %d, \"switches\": %u}\n", (int)getpid(), k) : 0;
    if (n > 0 && (size_t)n < sizeof line) {
        ssize_t w = write(2, line, (size_t)n);
        (void)w;
    }
}
#elif defined(OT_STAGE_CYCLES)
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"

static const char *const stage_names[OT_ST_N] = {
    "hook", "driver_alloc", "driver_free", "pre_alloc", "after_alloc", "capture", "backtrace", "unwind",
    "python", "py_walk", "borrow", "lock", "record_alloc", "intern", "record_free", "ring", "clock",
    "hook_free", "record_free_cross", "borrow_read", "borrow_walk",
};
static const char *const cache_names[OT_C_N] = {"walk_replay", "walk_place", "walk_index", "walk_step", "py_same", "py_merged", "py_places", "stack_last", "stack_hint", "borrow_quick", "py_borrowed", "py_linked", "borrow_whole", "borrow_plain", "py_blinked", "py_predicted"};
static const char *const class_names[4] = {"main", "other", "main_switched", "other_switched"};
static const char *const gap_names[OT_STAGE_GAPS] = {"near", "mid", "far"};

__thread struct ot_stage_thread *ot_stage_me __attribute__((tls_model("initial-exec")));
int ot_stage_fine = 1;
int ot_stage_ring_drop;
uint32_t ot_stage_last_tid;
uint32_t ot_stage_pid;
static struct ot_stage_thread *threads;
static uint64_t probe, tsc_first, ns_first;

/* The counters summed at each oomtrace_mark() (ot_stage_mark; two labels also switch OT_STAGE_PASS, stage.h):
 * a bench that marks where its timed loops begin and end reads the tracer's time within them, apart from the
 * process's setup and first steps (the first allocation alone walks and parses for ~1 ms). Read racily from the
 * other threads' blocks: a bench marks while its other threads are idle. 1,024: tests/gpu/bench_inproc.py marks
 * each block of its rounds. */
#define MARKS 1024
struct mark {
    char label[32];
    uint64_t hooks, driver_alloc, nested, events;
};
static struct mark marks[MARKS];
static unsigned nmarks;

/* A thread's first probe: its block, pushed on the list the exit line sums. calloc, not the thread's
 * stack or TLS: the block outlives the thread. A thread with no memory for it counts into a shared
 * block (racy adds: a bench build under memory pressure reads approximately). */
struct ot_stage_thread *ot_stage_thread_new(void)
{
    static struct ot_stage_thread spare;
    struct ot_stage_thread *t = calloc(1, sizeof *t);
    if (!t)
        return ot_stage_me = &spare;
    t->next = __atomic_load_n(&threads, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&threads, &t->next, t, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
    return ot_stage_me = t;
}

/* Set by the stack table (capture sits above common): a cache that changed a stack would add some */
static uint32_t nstacks = 1;
void ot_stage_stacks(uint32_t n)
{
    __atomic_store_n(&nstacks, n, __ATOMIC_RELAXED);
}

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A forked child (a fork server's) counts its own work from zero, its main thread by its own pid. */
static void stage_forked(void)
{
    ot_stage_pid = (uint32_t)getpid();
    for (struct ot_stage_thread *t = threads; t; t = t->next)
        memset(t, 0, offsetof(struct ot_stage_thread, next));
    ot_stage_last_tid = 0;
}

/* What an empty stage costs the stage around it: the least of many begin/end pairs, with the add into
 * this thread's block (a stage that is not split: the split's adds cost a few cycles more). */
__attribute__((constructor)) static void stage_start(void)
{
    const char *p = getenv("OOMTRACE_STAGE_PROBES"), *r = getenv("OOMTRACE_STAGE_RING");
    ot_stage_fine = !(p && !strcmp(p, "outer"));
    ot_stage_ring_drop = r && !strcmp(r, "drop");
    ot_stage_pid = (uint32_t)getpid();
    uint64_t least = UINT64_MAX;
    for (int i = 0; i < 2000; i++) {
        uint64_t t0 = ot_stage_tsc();
        const uint64_t t = ot_stage_tsc();
        ot_stage_add(OT_ST_UNWIND, ot_stage_tsc() - t);
        uint64_t d = ot_stage_tsc() - t0;
        least = d < least ? d : least;
    }
    struct ot_stage_thread *me = ot_stage_self();
    me->calls[OT_ST_UNWIND] = me->cycles[OT_ST_UNWIND] = 0;
    probe = least;
    pthread_atfork(NULL, NULL, stage_forked);
    tsc_first = ot_stage_tsc();
    ns_first = mono();
}

struct out {
    char *p;
    size_t n, cap;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = o->n < o->cap ? vsnprintf(o->p + o->n, o->cap - o->n, fmt, ap) : 0;
    va_end(ap);
    o->n += k > 0 ? (size_t)k : 0;
}

static void sum_threads(struct ot_stage_thread *sum)
{
    memset(sum, 0, sizeof *sum);
    for (struct ot_stage_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        const uint64_t *a = (const uint64_t *)t;
        uint64_t *s = (uint64_t *)sum;
        for (size_t i = 0; i < offsetof(struct ot_stage_thread, hook_t0) / sizeof(uint64_t); i++)
            s[i] += __atomic_load_n(&a[i], __ATOMIC_RELAXED);
    }
}

/* probes inside hooks: every stage counted but the hooks themselves and the free's driver call (after its
 * hook left) */
static uint64_t nested_of(const struct ot_stage_thread *sum)
{
    uint64_t nested = 0;
    for (int s = 0; s < OT_ST_N; s++)
        if (s != OT_ST_HOOK && s != OT_ST_HOOK_FREE && s != OT_ST_DRIVER_FREE && s != OT_ST_FREE_CROSS)
            nested += sum->calls[s];
    return nested;
}

/* The tracer's own cycles: the hooks' less the allocation's driver calls inside them and the probes nested in
 * them (the free's driver call is outside the hook). probes_exceed: the nested probes, at the empty loop's
 * cost each, came to more than the hooks' own cycles, and the count reads 0. With every probe a C pair has
 * 14 nested probes around ~880 instructions, and the empty loop's cost overstates a nested probe's
 * (PERFORMANCE.md, issue 16's sixth pass): on the H200 (probe 122 cycles) a C process read 0.0.
 * OOMTRACE_STAGE_PROBES=outer subtracts one probe an allocation. */
static uint64_t own_cycles(uint64_t hooks, uint64_t driver_alloc, uint64_t nested, int *exceed)
{
    uint64_t own = hooks > driver_alloc ? hooks - driver_alloc : 0;
    *exceed = nested * probe >= own;
    return *exceed ? 0 : own - nested * probe;
}

void ot_stage_mark(const char *label)
{
    stage_switch(label);
    unsigned k = __atomic_fetch_add(&nmarks, 1, __ATOMIC_RELAXED);
    if (k >= MARKS)
        return;
    static struct ot_stage_thread sum; /* (a bench marks from one thread at a time) */
    sum_threads(&sum);
    struct mark *m = &marks[k];
    snprintf(m->label, sizeof m->label, "%s", label ? label : "");
    m->hooks = sum.cycles[OT_ST_HOOK] + sum.cycles[OT_ST_HOOK_FREE];
    m->driver_alloc = sum.cycles[OT_ST_DRIVER_ALLOC];
    m->nested = nested_of(&sum);
    m->events = sum.events[0] + sum.events[1];
}

__attribute__((destructor)) static void stage_report(void)
{
    static struct ot_stage_thread sum;
    sum_threads(&sum);
    /* a process that never reached a wrapper (a shell, a launcher): nothing to say */
    if (!sum.calls[OT_ST_HOOK] && !sum.calls[OT_ST_HOOK_FREE])
        return;
    /* ns per cycle: the clock's calibrated rate where it reads the TSC, else measured over the process */
    double npc;
    uint64_t mult = ot_clock_tsc_mult();
    const char *rate = "clock";
    if (mult) {
        npc = (double)mult / 4294967296.0;
    } else {
        uint64_t dt = ot_stage_tsc() - tsc_first, dn = mono() - ns_first;
        npc = dt ? (double)dn / (double)dt : 0;
        rate = "process";
    }
    static char line[262144];
    struct out o = {line, 0, sizeof line - 2};
    put(&o,
        "OOMTRACE_STAGES {\"pid\": %d, \"allocs\": %llu, \"frees\": %llu, \"ns_per_cycle\": %.6f, "
        "\"rate_from\": \"%s\", \"probe_cycles\": %llu, \"probes\": \"%s\", \"ring\": \"%s\", \"stacks\": %u, "
        "\"stages\": {",
        (int)getpid(), (unsigned long long)sum.events[1], (unsigned long long)sum.events[0], npc, rate,
        (unsigned long long)probe, ot_stage_fine ? "all" : "outer", ot_stage_ring_drop ? "drop" : "compressed",
        __atomic_load_n(&nstacks, __ATOMIC_RELAXED) - 1);
    for (int s = 0; s < OT_ST_N; s++)
        put(&o, "%s\"%s\": {\"calls\": %llu, \"cycles\": %llu, \"ns\": %.0f}", s ? ", " : "", stage_names[s],
            (unsigned long long)sum.calls[s], (unsigned long long)sum.cycles[s], (double)sum.cycles[s] * npc);
    const uint64_t nested = nested_of(&sum);
    put(&o, "}, \"caches\": {");
    for (int c = 0; c < OT_C_N; c++)
        put(&o, "%s\"%s\": {\"hit\": %llu, \"miss\": %llu}", c ? ", " : "", cache_names[c],
            (unsigned long long)sum.hits[c], (unsigned long long)sum.misses[c]);
    /* The split stages: [calls, cycles] by class and by the gap since the thread's previous hook */
    put(&o, "}, \"gap_cycles\": [%u, %u], \"split\": {", OT_STAGE_GAP1, OT_STAGE_GAP2);
    int first = 1;
    for (int s = 0; s < OT_ST_N; s++) {
        int k = ot_stage_split_of[s] - 1;
        if (k < 0)
            continue;
        put(&o, "%s\"%s\": {", first ? "" : ", ", stage_names[s]);
        first = 0;
        for (int c = 0; c < 4; c++)
            put(&o, "%s\"%s\": [%llu, %llu]", c ? ", " : "", class_names[c],
                (unsigned long long)sum.split_calls[k][c], (unsigned long long)sum.split_cycles[k][c]);
        for (int g = 0; g < OT_STAGE_GAPS; g++)
            put(&o, ", \"gap_%s\": [%llu, %llu]", gap_names[g], (unsigned long long)sum.gap_calls[k][g],
                (unsigned long long)sum.gap_cycles[k][g]);
        put(&o, "}");
    }
    /* The marks: the tracer's own cycles and the events up to each (its label as given, quotes and
     * backslashes left out) */
    put(&o, "}, \"marks\": [");
    for (unsigned k = 0; k < nmarks && k < MARKS; k++) {
        int ex;
        char lab[sizeof marks[k].label];
        size_t w = 0;
        for (const char *c = marks[k].label; *c; c++)
            if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
                lab[w++] = *c;
        lab[w] = 0;
        const uint64_t own = own_cycles(marks[k].hooks, marks[k].driver_alloc, marks[k].nested, &ex);
        put(&o, "%s{\"label\": \"%s\", \"tracer_cycles\": %llu, \"tracer_ns\": %.0f, \"events\": %llu}", k ? ", " : "",
            lab, (unsigned long long)own, (double)own * npc, (unsigned long long)marks[k].events);
    }
    int exceed;
    const uint64_t own = own_cycles(sum.cycles[OT_ST_HOOK] + sum.cycles[OT_ST_HOOK_FREE], sum.cycles[OT_ST_DRIVER_ALLOC],
                                    nested, &exceed);
    uint64_t ev = sum.events[0] + sum.events[1];
    put(&o, "], \"nested_probes\": %llu, \"probes_exceed\": %d, \"tracer_cycles\": %llu, \"tracer_ns\": %.0f, "
        "\"tracer_ns_per_event\": %.1f}",
        (unsigned long long)nested, exceed, (unsigned long long)own, (double)own * npc,
        ev ? (double)own * npc / (double)ev : 0.0);
    size_t n = o.n < o.cap ? o.n : o.cap;
    line[n++] = '\n';
    ssize_t w = write(2, line, n);
    (void)w;
}
#else
typedef int ot_stage_unused; /* ISO C: a translation unit is not empty */
#endif
