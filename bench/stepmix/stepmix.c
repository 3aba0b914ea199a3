/* libstepmix: the native side of bench/step_mix.py, a training step's allocation mix against the stand-in
 * driver (or a real one). Each allocation goes through a chain of 31 C frames shaped like PyTorch's between
 * the Python binding and the driver: 6 shared outer frames (binding, dispatcher), 16 frames that differ by
 * operator (two distinct functions at each level, picked by a bit of the op: 16 ops, 16 distinct middles,
 * as the kernels of linear, relu, the loss and Adam's foreach ops differ), and 8 shared inner frames (the
 * caching allocator, cudart) ending at cuMemAllocAsync. sm_backward hands a batch of allocations to a
 * thread kept for the process (autograd's device thread: registered with Python, no Python frame of its
 * own) and waits for it in a blocking call, so those allocations borrow the waiting thread's stack.
 * CPython's functions are looked up at run time: the library links no libpython. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
int cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s);
int cuMemFreeAsync(CUdeviceptr dptr, CUstream s);

#define NOINL __attribute__((noinline, used))

struct req {
    unsigned op;
    size_t bytes;
    CUdeviceptr *out;
    CUdeviceptr free_me; /* freed after the allocation (0: none) */
};

volatile int sm_sink; /* each frame writes it after its call: no frame is a tail call */

/* inner: the allocator's frames, shared by every op */
static NOINL int in0(struct req *r)
{
    int e = cuMemAllocAsync(r->out, r->bytes, 0);
    if (r->free_me)
        e |= cuMemFreeAsync(r->free_me, 0);
    sm_sink += e;
    return e;
}
#define CHAIN(name, next, tag)                                                                          \
    static NOINL int name(struct req *r)                                                               \
    {                                                                                                  \
        int e = next(r);                                                                               \
        sm_sink += e + (tag);                                                                          \
        return e;                                                                                      \
    }
CHAIN(in1, in0, 1)
CHAIN(in2, in1, 2)
CHAIN(in3, in2, 3)
CHAIN(in4, in3, 4)
CHAIN(in5, in4, 5)
CHAIN(in6, in5, 6)
CHAIN(in7, in6, 7)

/* middle: level k has variants a and b (distinct code: the tag keeps them apart under identical-code
 * folding); which one runs is bit (k & 3) of the op */
typedef int (*level_fn)(struct req *);
static const level_fn mid_table[17][2];
#define MID(k, v, tag)                                                                                  \
    static NOINL int mid_##k##_##v(struct req *r)                                                      \
    {                                                                                                  \
        int e = mid_table[(k) + 1][(r->op >> (((k) + 1) & 3)) & 1](r);                                  \
        sm_sink += e + (tag);                                                                          \
        return e;                                                                                      \
    }
#define MIDS(k) MID(k, a, 100 + 2 * (k)) MID(k, b, 101 + 2 * (k))
MIDS(0) MIDS(1) MIDS(2) MIDS(3) MIDS(4) MIDS(5) MIDS(6) MIDS(7)
MIDS(8) MIDS(9) MIDS(10) MIDS(11) MIDS(12) MIDS(13) MIDS(14) MIDS(15)
#define ROW(k) {mid_##k##_a, mid_##k##_b}
static const level_fn mid_table[17][2] = {
    ROW(0), ROW(1), ROW(2), ROW(3), ROW(4), ROW(5), ROW(6), ROW(7),
    ROW(8), ROW(9), ROW(10), ROW(11), ROW(12), ROW(13), ROW(14), ROW(15), {in7, in7},
};

static NOINL int mid(struct req *r)
{
    int e = mid_table[0][r->op & 1](r);
    sm_sink += e;
    return e;
}
/* outer: the binding and the dispatcher, shared */
CHAIN(out0, mid, 11)
CHAIN(out1, out0, 12)
CHAIN(out2, out1, 13)
CHAIN(out3, out2, 14)
CHAIN(out4, out3, 15)

/* One allocation of op (0-15) from the calling thread, freeing free_me after it; 0 or the driver's error. */
int sm_alloc(unsigned op, size_t bytes, CUdeviceptr *out, CUdeviceptr free_me)
{
    struct req r = {op & 15, bytes, out, free_me};
    int e = out4(&r);
    sm_sink += e;
    return e;
}

int sm_free(CUdeviceptr p)
{
    return p ? cuMemFreeAsync(p, 0) : 0;
}

/* ---- the backward thread ---- */
struct batch {
    int n;
    size_t bytes;
    CUdeviceptr *outs, *frees;
    int failed;
};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct batch *pending;
static int finished;
static pthread_t worker;
static int worker_up;

/* The worker's own outer frames (autograd's engine loop, then the op's backward). */
static NOINL int bw_op(struct batch *b, int i)
{
    struct req r = {(unsigned)(i * 7 + 3) & 15, b->bytes + (size_t)(i & 3) * 4096, &b->outs[i], b->frees[i]};
    int e = out4(&r);
    sm_sink += e;
    return e;
}

static NOINL void bw_run(struct batch *b)
{
    for (int i = 0; i < b->n; i++)
        b->failed += bw_op(b, i) != 0;
    sm_sink++;
}

static void *bw_loop(void *arg)
{
    (void)arg;
    /* A Python thread state for this thread, the GIL released for good (as autograd's threads) */
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void *(*save)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyEval_SaveThread");
    if (ensure && save) {
        ensure();
        save();
    }
    for (;;) {
        pthread_mutex_lock(&mu);
        while (!pending)
            pthread_cond_wait(&cv, &mu);
        struct batch *b = pending;
        pthread_mutex_unlock(&mu);
        bw_run(b);
        pthread_mutex_lock(&mu);
        pending = NULL;
        finished = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

/* n allocations on the backward thread (outs[i], freeing frees[i] after each), waited for. Called through
 * ctypes.CDLL, which releases the GIL: the caller waits here with its Python frames. */
int sm_backward(int n, size_t bytes, CUdeviceptr *outs, CUdeviceptr *frees)
{
    if (!worker_up) {
        if (pthread_create(&worker, NULL, bw_loop, NULL) != 0)
            return -1;
        pthread_detach(worker);
        worker_up = 1;
    }
    struct batch b = {n, bytes, outs, frees, 0};
    pthread_mutex_lock(&mu);
    finished = 0;
    pending = &b;
    pthread_cond_broadcast(&cv);
    while (!finished)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return b.failed;
}
