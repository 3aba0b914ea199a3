/* The C side of issue 16's table: cuMemAllocAsync + cuMemFreeAsync pairs (4 KiB, one stream, a warm pool)
 * called directly through the driver API, as a C program that allocates per request does. Loops of 20,000
 * pairs; prints one JSON line with the minimum over the timed loops (ns per pair). Built and run by
 * tests/gpu/bench_alloc_pair.sh:  cc -O2 -I$CUDA_HOME/include alloc_pair.c -lcuda
 *
 *   alloc_pair [LOOPS] [split|inproc]
 * split: rdtsc around each call as well (x86-64), so that a traced process's calls can be set against a bare
 * one's and against the driver calls the stage build times inside the wrappers (tests/gpu/bench_pair_parts.sh).
 * The line then has "split": the allocation's call, the free's call and the rest of the loop, ns each per
 * pair, for the least loop ("least") and over every pair of the process, warm loop included ("all": the
 * stage build's counters cover the same pairs). The rdtsc reads add the same few ns to bare and traced.
 * inproc: under the stage or pass-through build, LOOPS (even) rounds of two loops, one traced and one passed through
 * (oomtrace_mark "stage: traced" / "stage: pass-through"), in the order ABBA; the line has each loop ("blocks"),
 * which tests/gpu/bench_inproc.py sets in rounds (the C row of issue 16's table within one process). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAIRS 20000

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "alloc_pair: %s failed (%d)\n", what, (int)r);
        exit(2);
    }
}

#if defined(__x86_64__)
static inline unsigned long long tsc(void)
{
    unsigned lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (unsigned long long)hi << 32 | lo;
}
#else
static inline unsigned long long tsc(void)
{
    return (unsigned long long)now_ns();
}
#endif

/* Ticks in the allocation's calls, the free's calls, and the whole loop. */
struct parts {
    unsigned long long alloc, free, loop;
};

static double loop_split(CUstream s, struct parts *p)
{
    CUdeviceptr d;
    struct parts q = {0, 0, 0};
    double t0 = now_ns();
    unsigned long long l0 = tsc();
    for (int i = 0; i < PAIRS; i++) {
        unsigned long long a = tsc();
        check(cuMemAllocAsync(&d, 4096, s), "cuMemAllocAsync");
        unsigned long long b = tsc();
        check(cuMemFreeAsync(d, s), "cuMemFreeAsync");
        unsigned long long c = tsc();
        q.alloc += b - a;
        q.free += c - b;
    }
    q.loop = tsc() - l0;
    double ns = (now_ns() - t0) / PAIRS;
    *p = q;
    return ns;
}

static double loop(CUstream s)
{
    CUdeviceptr p;
    double t0 = now_ns();
    for (int i = 0; i < PAIRS; i++) {
        check(cuMemAllocAsync(&p, 4096, s), "cuMemAllocAsync");
        check(cuMemFreeAsync(p, s), "cuMemFreeAsync");
    }
    return (now_ns() - t0) / PAIRS;
}

/* inproc: the bench builds' switch through oomtrace_mark, found in the process (the preloaded library). */
static int inproc(CUstream s, int rounds)
{
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "oomtrace_mark");
    if (!mark || rounds < 2 || rounds % 2) {
        fprintf(stderr, "alloc_pair: inproc needs the stage or pass-through build preloaded and an even number of "
                        "rounds\n");
        return 2;
    }
    double *ns = calloc((size_t)rounds * 2, sizeof *ns);
    int *traced = calloc((size_t)rounds * 2, sizeof *traced);
    if (!ns || !traced) {
        fprintf(stderr, "alloc_pair: out of memory\n");
        return 2;
    }
    loop(s); /* warm */
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) {
            int i = 2 * r + k;
            traced[i] = (r % 2 == 0) == (k == 0);
            if (mark(traced[i] ? "stage: traced" : "stage: pass-through") != 0) {
                fprintf(stderr, "alloc_pair: oomtrace_mark refused the switch\n");
                return 2;
            }
            ns[i] = loop(s);
        }
    mark("stage: traced");
    check(cuStreamSynchronize(s), "cuStreamSynchronize");
    printf("{\"case\": \"c_async\", \"inproc\": true, \"unit\": \"ns/pair\", \"n\": %d, \"blocks\": [", PAIRS);
    for (int i = 0; i < 2 * rounds; i++)
        printf("%s{\"traced\": %s, \"ns\": %.1f}", i ? ", " : "", traced[i] ? "true" : "false", ns[i]);
    printf("], \"traced\": true}\n");
    return 0;
}

int main(int argc, char **argv)
{
    int loops = argc > 1 ? atoi(argv[1]) : 8;
    int split = argc > 2 && !strcmp(argv[2], "split");
    struct parts all = {0, 0, 0}, least = {0, 0, 0}, p;
    unsigned long long tsc0 = tsc();
    double ns0 = now_ns();
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    if (argc > 2 && !strcmp(argv[2], "inproc"))
        return inproc(s, loops);
    if (split) {
        loop_split(s, &p); /* warm */
        all = p;
    } else {
        loop(s); /* warm */
    }
    double best = 1e30;
    printf("{\"case\": \"c_async\", \"unit\": \"ns/pair\", \"loops\": [");
    for (int i = 0; i < loops; i++) {
        double v = split ? loop_split(s, &p) : loop(s);
        if (split) {
            all.alloc += p.alloc;
            all.free += p.free;
            all.loop += p.loop;
            if (v < best)
                least = p;
        }
        best = v < best ? v : best;
        printf("%s%.1f", i ? ", " : "", v);
    }
    check(cuStreamSynchronize(s), "cuStreamSynchronize");
    printf("], \"min\": %.1f, \"traced\": %s", best, getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "liboomtrace") ? "true" : "false");
    if (split) {
        /* the TSC's rate over the whole process, against CLOCK_MONOTONIC */
        double npt = (now_ns() - ns0) / (double)(tsc() - tsc0);
        double n1 = PAIRS, na = (double)PAIRS * (loops + 1);
        printf(", \"split\": {\"ns_per_tick\": %.6f, \"pairs\": %.0f, "
               "\"least\": {\"alloc\": %.1f, \"free\": %.1f, \"rest\": %.1f}, "
               "\"all\": {\"alloc\": %.1f, \"free\": %.1f, \"rest\": %.1f}}",
               npt, na, least.alloc * npt / n1, least.free * npt / n1, (least.loop - least.alloc - least.free) * npt / n1,
               all.alloc * npt / na, all.free * npt / na, (all.loop - all.alloc - all.free) * npt / na);
    }
    printf("}\n");
    return 0;
}
