/* alloc_cost: the time of cuMemAlloc_v2 / cuMemFree_v2 calls at a chosen native stack depth, and, in
 * the same process, the bare cost of unw_backtrace at that depth (the floor of a traced allocation).
 *
 * One binary, run twice by bench/run.sh: with LD_PRELOAD=build/liboomtrace.so (traced) and without
 * (untraced), alternating over several rounds; the script subtracts. The driver is the stand-in
 * build/fake/libcuda.so.1, reached the way a runtime reaches it: dlopen + dlsym, called through the
 * pointer (the tracer hands back its wrapper for dlsym on libcuda).
 *
 * "depth D" means the backtrace the tracer keeps for the allocation (the caller of cuMemAlloc_v2 down
 * to _start / clone) has D frames; the recursion is sized at run time from unw_backtrace's count at
 * the thread's entry, so main and thread workers both get exactly D.
 *
 * Timing: allocations and frees are timed in batches of BATCH calls (BATCH allocations, then their
 * frees, newest first). With 1 thread the clock is CLOCK_MONOTONIC; with several threads on this
 * machine's few cores each thread uses CLOCK_THREAD_CPUTIME_ID (CPU time per call: a preempted thread is
 * not charged for the time it waits), and the wall time of the whole parallel section is reported too,
 * as wall x min(threads, cores) / (alloc+free pairs), which does include lock contention.
 *
 * Each configuration runs in R passes (--reps) and each figure printed is the median pass.
 *
 * Output, one line per measurement:
 *   result kind=alloc|free|unw|lockclock|pairwall depth=D threads=T ns=X n=CALLS
 * No assertion on any timing is made here or anywhere. */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oomtrace.h"

typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);

#define BATCH 64
#define UNW_WANT 80 /* what the tracer asks unw_backtrace for: OOMTRACE_DEPTH (64) + 16 */

static alloc_fn p_alloc;
static free_fn p_free;
static volatile uintptr_t sink;
static pthread_mutex_t floor_lock = PTHREAD_MUTEX_INITIALIZER;

enum mode { M_ALLOC, M_UNW, M_LOCKCLOCK };

struct job {
    enum mode mode;
    int depth;        /* target frames */
    long calls;       /* allocations (or unw/lock calls) this thread makes, timed */
    int use_cpu_clock;
    pthread_barrier_t *bar;
    /* results */
    uint64_t alloc_ns, free_ns, calls_done;
    int frames_seen;
};

static uint64_t clk(int cpu)
{
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "alloc_cost: %s failed (%d)\n", what, rc);
    exit(2);
}

/* The leaf: the function whose frame calls the driver / unw_backtrace. */
__attribute__((noinline)) static void leaf(struct job *j, long n, int warm)
{
    unsigned long long ptr[BATCH];
    void *raw[UNW_WANT];
    int cpu = j->use_cpu_clock;
    if (j->mode == M_ALLOC) {
        for (long done = 0; done < n; done += BATCH) {
            uint64_t t0 = clk(cpu);
            for (int k = 0; k < BATCH; k++) {
                int rc = p_alloc(&ptr[k], (size_t)(1 + (k & 3)) << 16);
                if (rc)
                    die("cuMemAlloc_v2", rc);
            }
            uint64_t t1 = clk(cpu);
            for (int k = BATCH - 1; k >= 0; k--) {
                int rc = p_free(ptr[k]);
                if (rc)
                    die("cuMemFree_v2", rc);
            }
            uint64_t t2 = clk(cpu);
            if (!warm) {
                j->alloc_ns += t1 - t0;
                j->free_ns += t2 - t1;
                j->calls_done += BATCH;
            }
        }
    } else if (j->mode == M_UNW) {
        for (long done = 0; done < n; done += BATCH) {
            uint64_t t0 = clk(cpu);
            int got = 0;
            for (int k = 0; k < BATCH; k++)
                got = unw_backtrace(raw, UNW_WANT);
            uint64_t t1 = clk(cpu);
            j->frames_seen = got;
            sink += (uintptr_t)raw[got - 1];
            if (!warm) {
                j->alloc_ns += t1 - t0;
                j->calls_done += BATCH;
            }
        }
    } else { /* the free path's irreducible part: one uncontended lock pair and one clock read */
        for (long done = 0; done < n; done += BATCH) {
            uint64_t t0 = clk(cpu);
            for (int k = 0; k < BATCH; k++) {
                struct timespec ts;
                pthread_mutex_lock(&floor_lock);
                clock_gettime(CLOCK_MONOTONIC, &ts);
                sink += (uintptr_t)ts.tv_nsec;
                pthread_mutex_unlock(&floor_lock);
            }
            uint64_t t1 = clk(cpu);
            if (!warm) {
                j->alloc_ns += t1 - t0;
                j->calls_done += BATCH;
            }
        }
    }
}

__attribute__((noinline)) static void recurse(struct job *j, int left)
{
    if (left <= 0) {
        leaf(j, j->calls / 8 + BATCH, 1); /* warm: first-sight interning, libunwind's cache */
        if (j->bar)
            pthread_barrier_wait(j->bar);
        leaf(j, j->calls, 0);
    } else {
        recurse(j, left - 1);
    }
    sink++; /* not a tail call: every level keeps its frame */
}

/* Frames on the stack at the caller of this function, counted like the tracer counts them. */
__attribute__((noinline)) static int frames_here(void)
{
    void *raw[256];
    return unw_backtrace(raw, 256) - 1; /* minus this function's own frame */
}

__attribute__((noinline)) static void run_job(struct job *j)
{
    /* Frames below (and including) run_job: n0. recurse(left) adds left+1 frames, leaf adds 1. */
    int n0 = frames_here();
    int left = j->depth - n0 - 2;
    if (left < 0) {
        fprintf(stderr, "alloc_cost: depth %d is below the %d frames already on the stack\n", j->depth, n0 + 2);
        exit(2);
    }
    recurse(j, left);
}

static void *thread_main(void *arg)
{
    run_job(arg);
    return NULL;
}

static double now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

struct sample {
    double alloc, free_, pairwall, frames;
};

/* One pass: nthreads threads, each making calls_per_thread timed calls after its warm-up. */
static struct sample measure_once(enum mode mode, int depth, int nthreads, long calls_per_thread)
{
    struct job jobs[64];
    pthread_t th[64];
    pthread_barrier_t bar;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    memset(jobs, 0, sizeof jobs);
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        jobs[i] = (struct job){.mode = mode, .depth = depth, .calls = calls_per_thread,
                               .use_cpu_clock = nthreads > 1, .bar = &bar};
        if (pthread_create(&th[i], NULL, thread_main, &jobs[i]))
            die("pthread_create", 0);
    }
    pthread_barrier_wait(&bar);
    double w0 = now_wall();
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    double wall = now_wall() - w0;
    pthread_barrier_destroy(&bar);

    uint64_t a = 0, f = 0, n = 0;
    for (int i = 0; i < nthreads; i++) {
        a += jobs[i].alloc_ns;
        f += jobs[i].free_ns;
        n += jobs[i].calls_done;
    }
    long cores = ncpu < nthreads ? ncpu : nthreads;
    return (struct sample){(double)a / n, (double)f / n, wall * (double)cores / (double)n, jobs[0].frames_seen};
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* reps passes of calls/reps calls each; each figure printed is the median over the passes, so a burst
 * of other work on the machine moves one pass, not the figure. */
static void measure(enum mode mode, int depth, int nthreads, long calls_per_thread, int reps)
{
    double va[64], vf[64], vw[64];
    int frames = 0;
    long per = (calls_per_thread / reps + BATCH - 1) / BATCH * BATCH;
    for (int r = 0; r < reps; r++) {
        struct sample s = measure_once(mode, depth, nthreads, per);
        va[r] = s.alloc;
        vf[r] = s.free_;
        vw[r] = s.pairwall;
        frames = (int)s.frames;
    }
    unsigned long long n = (unsigned long long)per * (unsigned long long)nthreads * (unsigned long long)reps;
    if (mode == M_ALLOC) {
        printf("result kind=alloc depth=%d threads=%d ns=%.1f n=%llu\n", depth, nthreads, median(va, reps), n);
        printf("result kind=free depth=%d threads=%d ns=%.1f n=%llu\n", depth, nthreads, median(vf, reps), n);
        printf("result kind=pairwall depth=%d threads=%d ns=%.1f n=%llu\n", depth, nthreads, median(vw, reps), n);
    } else if (mode == M_UNW) {
        printf("result kind=unw depth=%d threads=%d ns=%.1f n=%llu frames=%d\n", depth, nthreads, median(va, reps), n,
               frames);
    } else {
        printf("result kind=lockclock depth=%d threads=%d ns=%.1f n=%llu\n", depth, nthreads, median(va, reps), n);
    }
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: alloc_cost [--calls N] [--reps R] [--depths 8,32,64] [--threads 1,8] [--check-dump] [--only-alloc]\n"
            "  --calls N    timed allocations per configuration (split over the threads; default 24576)\n"
            "  --reps R     passes per configuration (N/R calls each); each figure is the median pass (default 5)\n"
            "  --check-dump after the measurements, write a snapshot (when traced) to check the depths\n"
            "  --only-alloc skip the floors (unw_backtrace, lock+clock): for profiling the traced path\n");
    exit(2);
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        out[n++] = (int)strtol(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s)
            usage();
    }
    return n;
}

int main(int argc, char **argv)
{
    long calls = 24576;
    int reps = 5;
    int depths[8] = {8, 32, 64}, ndepths = 3;
    int threads[8] = {1, 8}, nthreads = 2;
    int check_dump = 0, only_alloc = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atol(argv[++i]);
        else if (!strcmp(argv[i], "--depths") && i + 1 < argc)
            ndepths = parse_list(argv[++i], depths, 8);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            nthreads = parse_list(argv[++i], threads, 8);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--check-dump"))
            check_dump = 1;
        else if (!strcmp(argv[i], "--only-alloc"))
            only_alloc = 1;
        else
            usage();
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "alloc_cost: %s (put build/fake on LD_LIBRARY_PATH)\n", dlerror());
        return 2;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    p_alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    p_free = (free_fn)dlsym(h, "cuMemFree_v2");
    if (!init || !p_alloc || !p_free || init(0))
        die("cuInit/dlsym", 0);
    if (reps < 1 || reps > 64)
        usage();
    printf("info traced=%d ncpu=%ld\n", dlsym(RTLD_DEFAULT, "oomtrace_dump") != NULL,
           sysconf(_SC_NPROCESSORS_ONLN));

    for (int di = 0; di < ndepths; di++) {
        for (int ti = 0; ti < nthreads; ti++) {
            int t = threads[ti];
            long per = calls / t;
            if (!only_alloc)
                measure(M_UNW, depths[di], t, per, reps);
            measure(M_ALLOC, depths[di], t, per, reps);
        }
    }
    if (!only_alloc)
        measure(M_LOCKCLOCK, 32, 1, calls, reps);
    if (check_dump && oomtrace_dump_if_loaded("alloc_cost depth check") != 0)
        fprintf(stderr, "alloc_cost: no snapshot written (untraced?)\n");
    return 0;
}
