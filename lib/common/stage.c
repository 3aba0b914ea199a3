/* The stage build's counters and its one line at exit (stage.h). Empty in the normal build. */
#include "common/stage.h"

#ifdef OT_STAGE_CYCLES
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

static const char *const stage_names[OT_ST_N] = {
    "hook", "driver_alloc", "driver_free", "pre_alloc", "after_alloc", "capture", "backtrace", "unwind",
    "python", "py_walk", "borrow", "lock", "record_alloc", "intern", "record_free", "ring", "clock",
};
static const char *const cache_names[OT_C_N] = {"walk_replay", "walk_index", "walk_step", "py_same", "py_merged", "py_places", "stack_last", "stack_hint", "borrow_quick", "py_borrowed"};

static uint64_t calls[OT_ST_N], cycles[OT_ST_N], hits[OT_C_N], misses[OT_C_N], events[2];
__thread uint64_t ot_stage_hook_t0;
static uint64_t probe, tsc_first, ns_first;

void ot_stage_add(enum ot_stage s, uint64_t c)
{
    __atomic_add_fetch(&calls[s], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&cycles[s], c, __ATOMIC_RELAXED);
}

void ot_stage_cache(enum ot_cache c, int hit)
{
    __atomic_add_fetch(hit ? &hits[c] : &misses[c], 1, __ATOMIC_RELAXED);
}

void ot_stage_events(int alloc)
{
    __atomic_add_fetch(&events[alloc != 0], 1, __ATOMIC_RELAXED);
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

/* What an empty stage costs the stage around it: the least of many begin/end pairs, with the add. */
__attribute__((constructor)) static void stage_start(void)
{
    static uint64_t scratch[2];
    uint64_t least = UINT64_MAX;
    for (int i = 0; i < 2000; i++) {
        uint64_t t0 = ot_stage_tsc();
        OT_STAGE_BEGIN(t);
        __atomic_add_fetch(&scratch[0], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&scratch[1], ot_stage_tsc() - t, __ATOMIC_RELAXED);
        uint64_t d = ot_stage_tsc() - t0;
        least = d < least ? d : least;
    }
    probe = least;
    tsc_first = ot_stage_tsc();
    ns_first = mono();
}

__attribute__((destructor)) static void stage_report(void)
{
    /* ns per cycle: the clock's calibrated rate where it reads the TSC, else measured over the process */
    if (!calls[OT_ST_HOOK]) /* a process that never reached a wrapper (a shell, a launcher): nothing to say */
        return;
    double ns_per_cycle;
    uint64_t mult = ot_clock_tsc_mult();
    const char *rate = "clock";
    if (mult) {
        ns_per_cycle = (double)mult / 4294967296.0;
    } else {
        uint64_t dt = ot_stage_tsc() - tsc_first, dn = mono() - ns_first;
        ns_per_cycle = dt ? (double)dn / (double)dt : 0;
        rate = "process";
    }
    char line[4096];
    int n = snprintf(line, sizeof line,
                     "OOMTRACE_STAGES {\"pid\": %d, \"allocs\": %llu, \"frees\": %llu, \"ns_per_cycle\": %.6f, "
                     "\"rate_from\": \"%s\", \"probe_cycles\": %llu, \"stacks\": %u, \"stages\": {",
                     (int)getpid(), (unsigned long long)events[1], (unsigned long long)events[0], ns_per_cycle,
                     rate, (unsigned long long)probe, __atomic_load_n(&nstacks, __ATOMIC_RELAXED) - 1);
    uint64_t nested = 0; /* probes inside hooks: every stage but the hook and the free's driver call */
    for (int s = 0; s < OT_ST_N && n < (int)sizeof line; s++) {
        n += snprintf(line + n, sizeof line - (size_t)n, "%s\"%s\": {\"calls\": %llu, \"cycles\": %llu, \"ns\": %.0f}",
                      s ? ", " : "", stage_names[s], (unsigned long long)calls[s], (unsigned long long)cycles[s],
                      (double)cycles[s] * ns_per_cycle);
        if (s != OT_ST_HOOK && s != OT_ST_DRIVER_FREE)
            nested += calls[s];
    }
    if (n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "}, \"caches\": {");
    for (int c = 0; c < OT_C_N && n < (int)sizeof line; c++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s\"%s\": {\"hit\": %llu, \"miss\": %llu}", c ? ", " : "",
                      cache_names[c], (unsigned long long)hits[c], (unsigned long long)misses[c]);
    /* The tracer's own: the hooks' cycles less the allocation's driver calls inside them and the probes
     * nested in them (the free's driver call is outside the hook). */
    uint64_t own = cycles[OT_ST_HOOK] - cycles[OT_ST_DRIVER_ALLOC];
    uint64_t less = nested * probe < own ? nested * probe : own;
    uint64_t ev = events[0] + events[1];
    if (n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n,
                      "}, \"tracer_cycles\": %llu, \"tracer_ns\": %.0f, \"tracer_ns_per_event\": %.1f}\n",
                      (unsigned long long)(own - less), (double)(own - less) * ns_per_cycle,
                      ev ? (double)(own - less) * ns_per_cycle / (double)ev : 0.0);
    if (n > (int)sizeof line)
        n = (int)sizeof line;
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}
#else
typedef int ot_stage_unused; /* ISO C: a translation unit is not empty */
#endif
