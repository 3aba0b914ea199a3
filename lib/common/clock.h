/* The tracer's clock: CLOCK_MONOTONIC nanoseconds, read from the TSC where it is invariant (clock.c). */
#ifndef OOMTRACE_COMMON_CLOCK_H
#define OOMTRACE_COMMON_CLOCK_H
#include <stdint.h>

#include "common/defs.h"
#include "common/stage.h"

uint64_t ot_mono_ns(void); /* clock_gettime(CLOCK_MONOTONIC) itself */
void ot_clock_start(int use_tsc); /* after the options: calibrate the TSC against CLOCK_MONOTONIC */
void ot_clock_forked(void);
int ot_clock_uses_tsc(void);
uint64_t ot_clock_tsc_mult(void); /* the TSC's rate (ns = ticks * mult >> 32); 0 without it */
void ot_clock_tune(uint64_t cal_ns, uint64_t anchor_ns); /* tests: shorter calibration and anchors */

/* The TSC to CLOCK_MONOTONIC line that every read uses (clock.c writes it): ns = ns0 + ((tsc - tsc0) *
 * mult >> 32) while tsc - tsc0 < span. span is 0 whenever the line must not be used (before calibration,
 * without a TSC, OOMTRACE_TSC=0), so one compare decides; seq is odd while the line is written. */
struct ot_clock_line {
    uint32_t seq;
    uint64_t tsc0, ns0, mult, span;
} __attribute__((aligned(64))); /* one line: unaligned, span fell on the next line, a second miss an event */
extern struct ot_clock_line ot_clock_line;
uint64_t ot_clock_slow(void); /* clock.c: a read the line could not answer */

#if defined(__x86_64__)
/* No lfence before it (the kernel's clock has one: 12-25 ns more here). rdtsc may then run a little ahead
 * of the instructions before it, taking ot_lock among them, so two events on different threads may get
 * times a few nanoseconds out of their order: their seqs order them (the reader never orders by time),
 * and the ring writes such a time as its predecessor's (ring.c). */
static inline uint64_t ot_clock_tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (uint64_t)hi << 32 | lo;
}
#else
static inline uint64_t ot_clock_tsc(void)
{
    return 0;
}
#endif

/* Inline: every event reads it, and the read is a few loads and a multiply around rdtsc. */
static inline uint64_t ot_clock_read(void)
{
    uint32_t s = __atomic_load_n(&ot_clock_line.seq, __ATOMIC_ACQUIRE);
    uint64_t t0 = __atomic_load_n(&ot_clock_line.tsc0, __ATOMIC_RELAXED);
    uint64_t n0 = __atomic_load_n(&ot_clock_line.ns0, __ATOMIC_RELAXED);
    uint64_t m = __atomic_load_n(&ot_clock_line.mult, __ATOMIC_RELAXED);
    uint64_t span = __atomic_load_n(&ot_clock_line.span, __ATOMIC_RELAXED);
    uint64_t t = ot_clock_tsc();
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (OT_LIKELY(t - t0 < span && !(s & 1) && __atomic_load_n(&ot_clock_line.seq, __ATOMIC_RELAXED) == s))
        return n0 + (uint64_t)(((unsigned __int128)(t - t0) * m) >> 32);
    return ot_clock_slow();
}

/* The tracer's clock: every time it records (within microseconds of the next). */
static inline uint64_t ot_now_ns(void)
{
    return OT_STAGE_CALL(OT_ST_CLOCK, ot_clock_read());
}
#endif
