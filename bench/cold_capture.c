/* cold_capture: the cost of a traced allocation when the step's own work ran between it and the thread's
 * previous one (issue 16: on the H200, 41% of the CPU-bound step's allocations come after > ~24 us of the
 * step's work, and their capture costs 3.5x one after a short gap). The allocations go through
 * build/bench/libstepmix.so's PyTorch-shaped chains (31 C frames, 16 ops, bench/stepmix/stepmix.c), from
 * PLACES ops in turn (a step's mix) or from one (--pair); between two allocations the program can evict
 * what the tracer had in cache: EVICT_KB of data written (a line each 64 bytes) and, with --code, ~200 KB of
 * straight-line code run (the dispatcher's and the kernels' code that runs between a step's allocations).
 * Each allocation (sm_alloc: the chain, the driver's allocation and the free of one made earlier) is timed
 * with rdtsc; prints the median, the lower quartile and the least, in TSC ticks and ns, so that bare and
 * traced processes (LD_PRELOAD=build/liboomtrace.so) compare by their medians, which a preempted call does
 * not move as it moves a sum.
 *
 *   build/bench/cold_capture [--places N] [--evict KB] [--code] [--calls N]
 *   e.g. LD_LIBRARY_PATH=build/fake FAKECUDA_CAPACITY=1T LD_PRELOAD=build/liboomtrace.so \
 *        build/bench/cold_capture --places 16 --evict 4096 --code
 * Prints one line: result places=.. evict_kb=.. code=.. calls=.. median_ns=.. q1_ns=.. least_ns=.. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "code_run.h"

typedef unsigned long long CUdeviceptr;
int sm_alloc(unsigned op, size_t bytes, CUdeviceptr *out, CUdeviceptr free_me);
int sm_free(CUdeviceptr p);
int cuInit(unsigned flags);

static inline uint64_t tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (uint64_t)hi << 32 | lo;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ~200 KB of code run straight through: evicts the tracer's code from L1i and much of L2, as the step's
 * own code between two allocations does. */
volatile int cc_sink;
__attribute__((noinline)) static void code_run(void)
{
    OT_CODE_RUN(cc_sink, 1) OT_CODE_RUN(cc_sink, 4097) OT_CODE_RUN(cc_sink, 8193) OT_CODE_RUN(cc_sink, 12289)
    OT_CODE_RUN(cc_sink, 16385)
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int places = 16, code = 0, calls = 4000;
    long evict_kb = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--places") && i + 1 < argc)
            places = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pair"))
            places = 1;
        else if (!strcmp(argv[i], "--evict") && i + 1 < argc)
            evict_kb = atol(argv[++i]);
        else if (!strcmp(argv[i], "--code"))
            code = 1;
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: cold_capture [--places N|--pair] [--evict KB] [--code] [--calls N]\n");
            return 2;
        }
    }
    if (places < 1 || places > 16 || calls < 16)
        return 2;
    if (cuInit(0) != 0) {
        fprintf(stderr, "cold_capture: cuInit failed\n");
        return 2;
    }
    size_t ebytes = (size_t)evict_kb * 1024;
    volatile char *ev = ebytes ? calloc(1, ebytes) : NULL;
    uint64_t *t = calloc((size_t)calls, sizeof *t);
    CUdeviceptr ring[8] = {0};
    const int warm = 200;
    double n0 = 0;
    uint64_t t0 = 0;
    for (int i = -warm; i < calls; i++) {
        if (i == 0) {
            n0 = now_ns();
            t0 = tsc();
        }
        for (size_t k = 0; k < ebytes; k += 64)
            ev[k]++;
        if (code)
            code_run();
        CUdeviceptr p = 0, old = ring[(unsigned)i & 7];
        unsigned op = (unsigned)((i + warm) % places) * 5 % 16; /* ops in an order that is not the code's */
        uint64_t a = tsc();
        if (sm_alloc(op, 65536, &p, old) != 0) {
            fprintf(stderr, "cold_capture: sm_alloc failed\n");
            return 2;
        }
        uint64_t b = tsc();
        ring[(unsigned)i & 7] = p;
        if (i >= 0)
            t[i] = b - a;
    }
    double ns_per_tick = (now_ns() - n0) / (double)(tsc() - t0);
    for (int k = 0; k < 8; k++)
        sm_free(ring[k]);
    qsort(t, (size_t)calls, sizeof *t, cmp);
    printf("result places=%d evict_kb=%ld code=%d calls=%d median_ns=%.1f q1_ns=%.1f least_ns=%.1f "
           "median_ticks=%llu\n",
           places, evict_kb, code, calls, t[calls / 2] * ns_per_tick, t[calls / 4] * ns_per_tick,
           t[0] * ns_per_tick, (unsigned long long)t[calls / 2]);
    return 0;
}
