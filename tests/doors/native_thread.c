/* A library a Python test loads with ctypes: it allocates device memory on a thread of its own, the way
 * autograd's device threads allocate the gradients while the main thread waits in loss.backward(). The
 * thread never runs Python; "registered", it has a Python thread state all the same, as autograd's threads
 * do (PyGILState_Ensure, then the GIL released for good). ot_native_run waits for the thread (called
 * through ctypes.CDLL, which releases the GIL: the caller's Python stack is then the one to borrow);
 * ot_native_start returns at once, so the caller can keep the GIL while the thread allocates
 * (ot_native_done through ctypes.PyDLL keeps it). CPython's functions are looked up at run time: the
 * library links no libpython. */
#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stddef.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

typedef unsigned long long CUdeviceptr;
int cuMemAlloc_v2(CUdeviceptr *p, size_t bytes);
int cuMemFree_v2(CUdeviceptr p);

struct job {
    size_t bytes;
    int count;
    int failed;     /* allocations that did not succeed */
    int registered; /* with a Python thread state (and no Python frame); 2: and the caller holds the GIL */
};

static volatile int done_calls; /* ot_native_done's calls: each one runs with the caller holding the GIL */

/* A Python thread state for this thread, the GIL released at once (autograd's threads); *saved, *gil for
 * unregister. 0 when this process runs no Python. */
static int registered(void **saved, int *gil)
{
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void *(*save)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyEval_SaveThread");
    if (!ensure || !save)
        return 0;
    *gil = ensure();
    *saved = save();
    return 1;
}

static void unregister(void *saved, int gil)
{
    void (*restore)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "PyEval_RestoreThread");
    void (*release)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    restore(saved);
    release(gil);
}

static struct job started;
static pthread_t started_thread;
static volatile int started_done;

static void *allocate(void *arg)
{
    struct job *j = arg;
    void *saved = NULL;
    int gil = 0, reg = j->registered && registered(&saved, &gil);
    if (reg && j->registered == 2) {
        /* The caller takes the GIL back before the allocations: it calls ot_native_done holding it. */
        int seen = __atomic_load_n(&done_calls, __ATOMIC_ACQUIRE);
        while (__atomic_load_n(&done_calls, __ATOMIC_ACQUIRE) < seen + 2)
            sched_yield();
    }
    for (int i = 0; i < j->count; i++) {
        CUdeviceptr p = 0;
        j->failed += cuMemAlloc_v2(&p, j->bytes) != 0;
    }
    if (reg)
        unregister(saved, gil);
    __atomic_store_n(&started_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* count allocations of bytes on a new thread, waited for; returns how many failed. */
int ot_native_run(size_t bytes, int count, int registered_thread)
{
    struct job j = {bytes, count, 0, registered_thread ? 1 : 0};
    pthread_t t;
    if (pthread_create(&t, NULL, allocate, &j) != 0)
        return -1;
    pthread_join(t, NULL);
    return j.failed;
}

int ot_native_start(size_t bytes, int count, int registered_thread)
{
    started = (struct job){bytes, count, 0, registered_thread ? 2 : 0};
    started_done = 0;
    return pthread_create(&started_thread, NULL, allocate, &started) == 0 ? 0 : -1;
}

int ot_native_done(void)
{
    __atomic_add_fetch(&done_calls, 1, __ATOMIC_RELEASE);
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

/* A thread that waits in C until ot_native_release: through ctypes.CDLL from a Python thread (a Python
 * stack waiting with the GIL released), or on a registered thread of its own (a thread state with no
 * Python frame, as autograd's idle threads). */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int held, released;

int ot_native_block(void)
{
    pthread_mutex_lock(&hold_mu);
    held++;
    pthread_cond_broadcast(&hold_cv);
    while (!released)
        pthread_cond_wait(&hold_cv, &hold_mu);
    pthread_mutex_unlock(&hold_mu);
    return 0;
}

int ot_native_blocked(void)
{
    pthread_mutex_lock(&hold_mu);
    int n = held;
    pthread_mutex_unlock(&hold_mu);
    return n;
}

void ot_native_release(void)
{
    pthread_mutex_lock(&hold_mu);
    released = 1;
    pthread_cond_broadcast(&hold_cv);
    pthread_mutex_unlock(&hold_mu);
}

static pthread_t frameless_thread;

static void *frameless(void *arg)
{
    (void)arg;
    void *saved = NULL;
    int gil = 0;
    if (registered(&saved, &gil)) {
        ot_native_block();
        unregister(saved, gil);
    }
    return NULL;
}

int ot_native_frameless_start(void)
{
    return pthread_create(&frameless_thread, NULL, frameless, NULL) == 0 ? 0 : -1;
}

void ot_native_frameless_join(void)
{
    pthread_join(frameless_thread, NULL);
}

/* tests/py/stack_cache.py: one allocation on the calling thread, through one of two native paths, so that
 * two allocations from one Python call instruction have different native frames. Not static: the names
 * are found without the library's debug information. */
int via_left(size_t bytes);
int via_right(size_t bytes);
__attribute__((noinline)) int via_left(size_t bytes)
{
    CUdeviceptr p = 0;
    int rc = cuMemAlloc_v2(&p, bytes);
    __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays on the stack */
    return rc;
}

__attribute__((noinline)) int via_right(size_t bytes)
{
    CUdeviceptr p = 0;
    __asm__ volatile("nop"); /* not folded into via_left */
    int rc = cuMemAlloc_v2(&p, bytes);
    __asm__ volatile("" ::: "memory");
    return rc;
}

int ot_native_alloc_via(int right, size_t bytes)
{
    return right ? via_right(bytes) : via_left(bytes);
}

/* tests/py/borrow_again.py: one thread kept for the process, as autograd keeps its device threads, that
 * allocates count times bytes on each request while the caller waits (called through ctypes.CDLL, which
 * releases the GIL: the caller's Python stack is the one to borrow). Returns how many failed. */
static pthread_mutex_t worker_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t worker_cond = PTHREAD_COND_INITIALIZER;
static struct job worker_job;
static int worker_pending, worker_started, worker_quit;
static pthread_t worker_thread;
static int worker_via; /* the request's allocations go through via_left (bytes) and via_right (bytes + 1 MiB) in turn */

/* arg non-NULL: the thread has a Python thread state and no frame, as autograd's threads do */
static void *worker(void *arg)
{
    void *saved = NULL;
    int gil = 0, reg = arg && registered(&saved, &gil);
    pthread_mutex_lock(&worker_lock);
    for (;;) {
        while (!worker_pending && !worker_quit)
            pthread_cond_wait(&worker_cond, &worker_lock);
        if (worker_quit)
            break;
        struct job j = worker_job;
        const int via = worker_via;
        pthread_mutex_unlock(&worker_lock);
        for (int i = 0; i < j.count; i++) {
            CUdeviceptr p = 0;
            if (via)
                j.failed += (i & 1 ? via_right(j.bytes + (1u << 20)) : via_left(j.bytes)) != 0;
            else
                j.failed += cuMemAlloc_v2(&p, j.bytes) != 0;
        }
        pthread_mutex_lock(&worker_lock);
        worker_job.failed = j.failed;
        worker_pending = 0;
        pthread_cond_broadcast(&worker_cond);
    }
    pthread_mutex_unlock(&worker_lock);
    if (reg)
        unregister(saved, gil);
    return NULL;
}

static int worker_registered;

/* The kept thread registered with Python (tests/py/borrow_registered.py): call before the first request. */
void ot_native_worker_register(void)
{
    worker_registered = 1;
}

static int worker_request(size_t bytes, int count, int via)
{
    pthread_mutex_lock(&worker_lock);
    worker_via = via;
    if (!worker_started) {
        if (pthread_create(&worker_thread, NULL, worker, worker_registered ? &worker_registered : NULL) != 0) {
            pthread_mutex_unlock(&worker_lock);
            return -1;
        }
        worker_started = 1;
    }
    worker_job = (struct job){bytes, count, 0, 0};
    worker_pending = 1;
    pthread_cond_broadcast(&worker_cond);
    while (worker_pending)
        pthread_cond_wait(&worker_cond, &worker_lock);
    int failed = worker_job.failed;
    pthread_mutex_unlock(&worker_lock);
    return failed;
}

int ot_native_worker_alloc(size_t bytes, int count)
{
    return worker_request(bytes, count, 0);
}

/* The same, the allocations alternating between two native call sites (via_left: bytes, via_right: bytes +
 * 1 MiB) under one waiting Python line: borrowed stacks that differ only in their native frames. */
int ot_native_worker_alloc_via(size_t bytes, int count)
{
    return worker_request(bytes, count, 1);
}

/* Ends the kept thread (at the end of the workload, so that no thread is left running at exit). */
void ot_native_worker_stop(void)
{
    pthread_mutex_lock(&worker_lock);
    int was_started = worker_started;
    worker_quit = 1;
    pthread_cond_broadcast(&worker_cond);
    pthread_mutex_unlock(&worker_lock);
    if (was_started)
        pthread_join(worker_thread, NULL);
}

/* tests/py/borrow_unmap.py: a thread that allocates and frees until told to stop, borrowing the stack of
 * whichever Python thread waits meanwhile. */
static pthread_t churn_thread;
static volatile int churn_stop;
static long churn_pairs;

static void *churn(void *arg)
{
    size_t bytes = (size_t)arg;
    while (!__atomic_load_n(&churn_stop, __ATOMIC_ACQUIRE)) {
        CUdeviceptr p = 0;
        if (cuMemAlloc_v2(&p, bytes) == 0) {
            cuMemFree_v2(p);
            churn_pairs++;
        }
    }
    return NULL;
}

int ot_native_churn_start(size_t bytes)
{
    churn_stop = 0;
    churn_pairs = 0;
    return pthread_create(&churn_thread, NULL, churn, (void *)bytes) == 0 ? 0 : -1;
}

/* Stops the thread; the pairs it made. */
long ot_native_churn_stop(void)
{
    __atomic_store_n(&churn_stop, 1, __ATOMIC_RELEASE);
    pthread_join(churn_thread, NULL);
    return churn_pairs;
}

/* tests/py/arena_custom.py: an arena allocator a program sets (PyObject_SetArenaAllocator), here the same
 * mmap and munmap as CPython's own, from another object. */
void *ot_arena_alloc(void *ctx, size_t n)
{
    (void)ctx;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ot_arena_free(void *ctx, void *p, size_t n)
{
    (void)ctx;
    munmap(p, n);
}
