/* The tracer's clock: nanoseconds of CLOCK_MONOTONIC, as the snapshot's times are (docs/FORMAT.md).
 *
 * Every event reads it, and clock_gettime costs ~30 ns on the H200 host (70-87 ns on a kvm-clock VM),
 * about a tenth of what tracing an allocation and its free adds. Where the TSC is invariant (cpuid
 * 0x80000007 EDX bit 8: constant rate, never stops, the same on every core) it is read instead and
 * converted to CLOCK_MONOTONIC nanoseconds at once, so nothing downstream sees another time base:
 *
 *     ns = ns0 + ((tsc - tsc0) * mult) >> 32        while tsc - tsc0 < span
 *
 * The rate (mult) is measured against clock_gettime: first over CAL_NS after start-up (clock_gettime is
 * used until then), then again at each new anchor, over the whole time since the previous one. An anchor
 * lasts ANCHOR_NS; the first read past it takes a fresh clock_gettime and starts a new one, so the
 * converted time never drifts from CLOCK_MONOTONIC by more than the rate's error over one anchor (a few
 * microseconds at worst, NTP's slewing included). It never steps back: a new anchor starts where the old
 * one's line had got to when that is later than clock_gettime, and its rate is lowered to catch up over
 * the anchor. OOMTRACE_TSC=0 keeps clock_gettime for every read.
 *
 * The conversion is published under a sequence count (odd while it is written); a reader that sees it
 * change, or a writer busy, takes clock_gettime for that read. One thread at a time re-anchors (a trylock);
 * no read ever waits, so the clock is safe in a signal handler and under ot_lock. */
#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "common/clock.h"
#include "common/stage.h"
#include "common/defs.h"

#define CAL_NS 20000000ull      /* the first rate: measured over 20 ms */
#define ANCHOR_NS 1000000000ull /* an anchor lasts 1 s */

struct ot_clock_line ot_clock_line; /* the conversion (clock.h); span 0 while it must not be used */
#define L ot_clock_line

static struct {
    int state;                   /* CLK_* */
    int busy;                    /* a thread is writing (calibrating or re-anchoring) */
    uint64_t true_tsc, true_ns;  /* the clock_gettime reading the current anchor (or calibration) took */
    uint64_t cal_ns, anchor_ns;  /* CAL_NS and ANCHOR_NS; shorter in tests (ot_clock_tune) */
} K = {.cal_ns = CAL_NS, .anchor_ns = ANCHOR_NS};

enum { CLK_MONO, CLK_CALIBRATING, CLK_TSC };

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

uint64_t ot_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}


#if defined(__x86_64__)
static int tsc_invariant(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __cpuid(0x80000007u, a, b, c, d);
    return (d >> 8) & 1;
}
#else
static int tsc_invariant(void)
{
    return 0;
}
#endif

/* An anchor lasts as long as the time its rate was measured over, up to anchor_ns: the rate's error is
 * about a clock_gettime read's jitter over that time, so the drift over the anchor stays about that jitter
 * (under a microsecond), from the first short calibration on. */
static void publish(uint64_t tsc0, uint64_t ns0, uint64_t mult, uint64_t measured_ns)
{
    uint32_t s = LD(L.seq);
    __atomic_store_n(&L.seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    ST(L.tsc0, tsc0);
    ST(L.ns0, ns0);
    ST(L.mult, mult);
    uint64_t len = measured_ns < LD(K.anchor_ns) ? measured_ns : LD(K.anchor_ns);
    unsigned __int128 span = ((unsigned __int128)len << 32) / mult; /* ticks */
    ST(L.span, span > (1ull << 40) ? (1ull << 40) : (uint64_t)span);
    __atomic_store_n(&L.seq, s + 2, __ATOMIC_RELEASE);
}

/* The conversion stops being used (span 0: every read takes the slow path), before the state says why. */
static void retire(void)
{
    uint32_t s = LD(L.seq);
    __atomic_store_n(&L.seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    ST(L.span, 0);
    __atomic_store_n(&L.seq, s + 2, __ATOMIC_RELEASE);
}

/* A clock_gettime reading paired with the TSC around it: the tightest of three (a read that was
 * preempted or slowed would put the pair microseconds apart, and the rate measured from it off by as
 * much); 0 when even that one took more than 100,000 ticks (~30 µs or less). */
static int pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t t1 = ot_clock_tsc(), n = ot_mono_ns(), t2 = ot_clock_tsc();
        if (i == 0 || t2 - t1 < best) {
            best = t2 - t1;
            *tsc = t1 + (t2 - t1) / 2;
            *ns = n;
        }
    }
    return best < 100000;
}

/* Rates from 0.05 to 10 ns a tick (TSCs from 100 MHz to 20 GHz): anything else is not a TSC to trust. */
static int plausible(unsigned __int128 mult)
{
    return mult >= (1ull << 32) / 20 && mult <= (10ull << 32);
}

/* Every read the line could not answer: before calibration, at the end of an anchor, without a TSC. */
uint64_t ot_clock_slow(void)
{
    int st = LD(K.state);
    if (st == CLK_MONO)
        return ot_mono_ns();
    uint64_t t, ns;
    int tight = pair(&t, &ns);
    int expect = 0;
    if (!tight || !__atomic_compare_exchange_n(&K.busy, &expect, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return ns;
    uint64_t out = ns;
    st = LD(K.state);
    if (st == CLK_CALIBRATING) {
        if (ns - LD(K.true_ns) >= LD(K.cal_ns) && t > LD(K.true_tsc)) {
            unsigned __int128 m = ((unsigned __int128)(ns - LD(K.true_ns)) << 32) / (t - LD(K.true_tsc));
            if (plausible(m)) {
                publish(t, ns, (uint64_t)m, ns - LD(K.true_ns));
                ST(K.true_tsc, t);
                ST(K.true_ns, ns);
                __atomic_store_n(&K.state, CLK_TSC, __ATOMIC_RELEASE);
            } else {
                retire();
                ST(K.state, CLK_MONO);
            }
        }
    } else if (st == CLK_TSC && t - LD(L.tsc0) >= LD(L.span) && t > LD(K.true_tsc) && ns > LD(K.true_ns)) {
        /* A new anchor: the rate measured since the last one, and no step back from the old line. */
        uint64_t old = LD(L.ns0) + (uint64_t)(((unsigned __int128)(t - LD(L.tsc0)) * LD(L.mult)) >> 32);
        unsigned __int128 m = ((unsigned __int128)(ns - LD(K.true_ns)) << 32) / (t - LD(K.true_tsc));
        uint64_t ns0 = ns;
        if (old > ns) {
            ns0 = old;
            /* ahead by old - ns: run slower over the next anchor to give it back */
            unsigned __int128 give = ((unsigned __int128)(old - ns) << 32) / (LD(L.span) ? LD(L.span) : 1);
            m = give < m / 2 ? m - give : m / 2;
        }
        if (plausible(m)) {
            publish(t, ns0, (uint64_t)m, ns - LD(K.true_ns));
            ST(K.true_tsc, t);
            ST(K.true_ns, ns);
            out = ns0;
        } else {
            retire();
            ST(K.state, CLK_MONO);
        }
    }
    __atomic_store_n(&K.busy, 0, __ATOMIC_RELEASE);
    return out;
}

void ot_clock_start(int use_tsc)
{
    uint64_t t, ns;
    retire(); /* the fast path runs again only once this start's calibration publishes a rate */
    if (!use_tsc || !tsc_invariant() || !pair(&t, &ns)) {
        ST(K.state, CLK_MONO);
        return;
    }
    ST(K.true_tsc, t);
    ST(K.true_ns, ns);
    ST(K.state, CLK_CALIBRATING);
}

/* The TSC's rate, ns = ticks * mult >> 32; 0 while the clock does not read the TSC (stage.c). */
uint64_t ot_clock_tsc_mult(void)
{
    return LD(K.state) == CLK_TSC ? LD(L.mult) : 0;
}

int ot_clock_uses_tsc(void)
{
    return LD(K.state) == CLK_TSC;
}

void ot_clock_tune(uint64_t cal_ns, uint64_t anchor_ns)
{
    ST(K.cal_ns, cal_ns);
    ST(K.anchor_ns, anchor_ns);
}

/* In a forked child, the only thread: a writer that was busy in the parent is gone, and a conversion it
 * was writing is not to be trusted (the child keeps clock_gettime then). */
void ot_clock_forked(void)
{
    if (LD(L.seq) & 1) {
        ST(K.state, CLK_MONO);
        ST(L.span, 0);
        ST(L.seq, LD(L.seq) + 1);
    }
    ST(K.busy, 0);
}
