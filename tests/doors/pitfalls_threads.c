/* pitfalls threads (pitfalls.c): concurrent allocation and frees through routed pointers. */
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pitfalls.h"

/* ---- threads: concurrent allocation through routed pointers ---- */

#define NTHREADS 16
#define HELD 8         /* allocations a thread holds at most while churning */
#define CHURN 20000    /* churn iterations per thread */
#define QUEUE_MAX 64   /* allocations waiting to be freed by another thread */
#define PHASE 8        /* allocations per thread in the measured phase */

typedef __typeof__(&cuMemAlloc_v2) alloc_fn;
typedef __typeof__(&cuMemFree_v2) free_fn;

static pthread_barrier_t barrier;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static CUdeviceptr queue[QUEUE_MAX];
static int queued;
static CUdeviceptr phase[NTHREADS][PHASE];
static alloc_fn t_alloc[2];
static free_fn t_free[2];
static unsigned long churn_allocs;

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Measured-phase sizes: distinct, and together far above anything the churn can hold (about 12 MiB at
 * most), so the peak is exactly their sum. */
static uint64_t phase_size(int t, int i)
{
    return (uint64_t)(t * PHASE + i + 1) * 64 * 1024 + (uint64_t)t * 512;
}

/* Another thread frees it, unless too many are waiting already. */
static int push(CUdeviceptr p)
{
    pthread_mutex_lock(&queue_lock);
    int ok = queued < QUEUE_MAX;
    if (ok)
        queue[queued++] = p;
    pthread_mutex_unlock(&queue_lock);
    return ok;
}

static CUdeviceptr pop(void)
{
    pthread_mutex_lock(&queue_lock);
    CUdeviceptr p = queued ? queue[--queued] : 0;
    pthread_mutex_unlock(&queue_lock);
    return p;
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    alloc_fn alloc = t_alloc[t & 1]; /* half through cuGetProcAddress, half through dlsym */
    free_fn mfree = t_free[t & 1];
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
    CUdeviceptr held[HELD];
    int n = 0;
    unsigned long allocs = 0;
    pthread_barrier_wait(&barrier); /* all start together, to overlap as much as they can */
    for (int it = 0; it < CHURN; it++) {
        uint64_t r = rng(&s);
        if (n < HELD && (r & 1 || n == 0)) {
            OK(alloc(&held[n++], 512 + (size_t)(r >> 16) % 65536));
            allocs++;
        } else {
            int k = (int)((r >> 8) % (uint64_t)n);
            CUdeviceptr p = held[k];
            held[k] = held[--n];
            if (!(r & 2) || !push(p))
                OK(mfree(p));
        }
        CUdeviceptr q;
        if (r & 4 && (q = pop()) != 0)
            OK(mfree(q));
    }
    while (n)
        OK(mfree(held[--n]));
    __atomic_add_fetch(&churn_allocs, allocs, __ATOMIC_RELAXED);
    pthread_barrier_wait(&barrier);
    for (CUdeviceptr q; (q = pop()) != 0;)
        OK(mfree(q));
    pthread_barrier_wait(&barrier); /* the churn left nothing... */
    pthread_barrier_wait(&barrier); /* ... which the main thread has checked */
    for (int i = 0; i < PHASE; i++)
        OK(alloc(&phase[t][i], phase_size(t, i)));
    pthread_barrier_wait(&barrier); /* everything allocated: the peak */
    pthread_barrier_wait(&barrier); /* the main thread has checked the driver */
    for (int i = 0; i < PHASE; i += 2)
        OK(mfree(phase[(t + 1) % NTHREADS][i])); /* a neighbour's memory */
    pthread_barrier_wait(&barrier);
    return NULL;
}

int cmd_threads(void)
{
    size_t (*used)(int) = (size_t(*)(int))drv_sym("fakecuda_used_bytes");
    int (*live)(int) = (int (*)(int))drv_sym("fakecuda_live_count");
    t_alloc[0] = (alloc_fn)drv_get("cuMemAlloc", 3020, 0);
    t_free[0] = (free_fn)drv_get("cuMemFree", 3020, 0);
    t_alloc[1] = (alloc_fn)dlsym(drv, "cuMemAlloc_v2");
    t_free[1] = (free_fn)dlsym(drv, "cuMemFree_v2");
    CHECK(t_alloc[1] && t_free[1]);

    uint64_t peak = 0, remaining = 0;
    for (int t = 0; t < NTHREADS; t++)
        for (int i = 0; i < PHASE; i++) {
            peak += phase_size(t, i);
            if (i % 2)
                remaining += phase_size(t, i);
        }
    CHECK(pthread_barrier_init(&barrier, NULL, NTHREADS + 1) == 0);
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    CHECK(used(0) == 0 && live(0) == 0);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    CHECK(used(0) == peak && live(0) == NTHREADS * PHASE);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    CHECK(used(0) == remaining);
    printf("expect.peak %llu\n", (unsigned long long)peak);
    printf("expect.live %llu\n", (unsigned long long)remaining);
    printf("expect.count %d\n", NTHREADS * PHASE / 2);
    printf("fake.used %llu\n", (unsigned long long)used(0));
    printf("fake.live %d\n", live(0));
    printf("churn.allocs %lu\n", churn_allocs);
    dump("threads");
    return 0;
}

/* ---- failures: a burst of out-of-memory failures, one a thread, at once ---- */

#define NFAIL 6

/* Distinct and far beyond the stand-in device's 1 GiB: each thread's failure is told apart by its size. */
static uint64_t fail_size(int t)
{
    return 2 * GiB + (uint64_t)(t + 1) * MiB;
}

static void *failer(void *arg)
{
    const int t = (int)(intptr_t)arg;
    CUdeviceptr p = 0;
    pthread_barrier_wait(&barrier);
    const CUresult r = t_alloc[1](&p, fail_size(t));
    printf("failed %ld %llu %d\n", (long)syscall(SYS_gettid), (unsigned long long)fail_size(t), (int)r);
    return NULL;
}

int cmd_failures(void)
{
    t_alloc[1] = (alloc_fn)dlsym(drv, "cuMemAlloc_v2");
    CHECK(t_alloc[1]);
    CHECK(pthread_barrier_init(&barrier, NULL, NFAIL) == 0);
    pthread_t th[NFAIL];
    for (int t = 0; t < NFAIL; t++)
        CHECK(pthread_create(&th[t], NULL, failer, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < NFAIL; t++)
        pthread_join(th[t], NULL);
    printf("failures %d\n", NFAIL);
    return 0;
}
