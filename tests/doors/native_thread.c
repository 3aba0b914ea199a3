/* A library a Python test loads with ctypes: it allocates device memory on a thread of its own, the way
 * autograd's device threads allocate the gradients while the main thread waits in loss.backward(). The
 * thread never runs Python. ot_native_run waits for the thread (called through ctypes.CDLL, which releases
 * the GIL: the caller's Python stack is then the one to borrow); ot_native_start returns at once, so the
 * caller can keep the GIL while the thread allocates (ot_native_done through ctypes.PyDLL keeps it). */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef unsigned long long CUdeviceptr;
int cuMemAlloc_v2(CUdeviceptr *p, size_t bytes);
int cuMemFree_v2(CUdeviceptr p);

struct job {
    size_t bytes;
    int count;
    int failed; /* allocations that did not succeed */
};

static struct job started;
static pthread_t started_thread;
static volatile int started_done;

static void *allocate(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < j->count; i++) {
        CUdeviceptr p = 0;
        j->failed += cuMemAlloc_v2(&p, j->bytes) != 0;
    }
    __atomic_store_n(&started_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* count allocations of bytes on a new thread, waited for; returns how many failed. */
int ot_native_run(size_t bytes, int count)
{
    struct job j = {bytes, count, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, allocate, &j) != 0)
        return -1;
    pthread_join(t, NULL);
    return j.failed;
}

int ot_native_start(size_t bytes, int count)
{
    started = (struct job){bytes, count, 0};
    started_done = 0;
    return pthread_create(&started_thread, NULL, allocate, &started) == 0 ? 0 : -1;
}

int ot_native_done(void)
{
    return __atomic_load_n(&started_done, __ATOMIC_ACQUIRE);
}

int ot_native_join(void)
{
    pthread_join(started_thread, NULL);
    return started.failed;
}

struct timed {
    int calls;
    long long ns; /* per allocation and free, on the thread */
};

static void *alloc_free_timed(void *arg)
{
    struct timed *j = arg;
    struct timespec a, b;
    CUdeviceptr p[64];
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < j->calls; i += 64) {
        for (int k = 0; k < 64; k++)
            if (cuMemAlloc_v2(&p[k], (size_t)(1 + (k & 3)) << 16) != 0)
                p[k] = 0;
        for (int k = 63; k >= 0; k--)
            if (p[k])
                cuMemFree_v2(p[k]);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    j->ns = ((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec)) / (j->calls ? j->calls : 1);
    return NULL;
}

/* bench/py_borrow.py: calls allocations and frees (in batches of 64) on a new thread, waited for; the
 * nanoseconds per allocation and free, measured on that thread. */
long long ot_native_alloc_free_ns(int calls)
{
    struct timed j = {calls, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, alloc_free_timed, &j) != 0)
        return -1;
    pthread_join(t, NULL);
    return j.ns;
}
