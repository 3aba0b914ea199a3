/* libstepmix: the native side of bench/step_mix.py, a training step's allocation mix against the stand-in
 * driver (or a real one). Each allocation goes through a chain of 31 C frames shaped like PyTorch's between
 * the Python binding and the driver: 7 shared outer frames (binding, dispatcher), 16 frames of the op's own
 * (16 ops, each its own functions, as the kernels and the dispatcher's entries of linear, relu, the loss
 * and Adam's foreach ops are), and 8 shared inner frames (the caching allocator, cudart) ending at
 * cuMemAllocAsync. sm_backward hands a batch of allocations to a
 * thread kept for the process (autograd's device thread: registered with Python, no Python frame of its
 * own) and waits for it in a blocking call, so those allocations borrow the waiting thread's stack.
 * CPython's functions are looked up at run time: the library links no libpython. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../code_run.h"

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

/* middle: each op's own 16 frames (its kernel, its dispatcher entries: distinct code per op, as PyTorch's
 * templated dispatcher and kernels are) */
typedef int (*level_fn)(struct req *);
#define OPL(o, k, next)                                                                                 \
    static NOINL int op##o##_##k(struct req *r)                                                        \
    {                                                                                                  \
        int e = next(r);                                                                               \
        sm_sink += e + (o) * 32 + (k);                                                                 \
        return e;                                                                                      \
    }
#define OPCHAIN(o)                                                                                      \
    OPL(o, 15, in7) OPL(o, 14, op##o##_15) OPL(o, 13, op##o##_14) OPL(o, 12, op##o##_13)               \
    OPL(o, 11, op##o##_12) OPL(o, 10, op##o##_11) OPL(o, 9, op##o##_10) OPL(o, 8, op##o##_9)           \
    OPL(o, 7, op##o##_8) OPL(o, 6, op##o##_7) OPL(o, 5, op##o##_6) OPL(o, 4, op##o##_5)                 \
    OPL(o, 3, op##o##_4) OPL(o, 2, op##o##_3) OPL(o, 1, op##o##_2) OPL(o, 0, op##o##_1)
OPCHAIN(0) OPCHAIN(1) OPCHAIN(2) OPCHAIN(3) OPCHAIN(4) OPCHAIN(5) OPCHAIN(6) OPCHAIN(7)
OPCHAIN(8) OPCHAIN(9) OPCHAIN(10) OPCHAIN(11) OPCHAIN(12) OPCHAIN(13) OPCHAIN(14) OPCHAIN(15)
static const level_fn ops[16] = {op0_0, op1_0, op2_0, op3_0, op4_0, op5_0, op6_0, op7_0,
                                 op8_0, op9_0, op10_0, op11_0, op12_0, op13_0, op14_0, op15_0};

static NOINL int mid(struct req *r)
{
    int e = ops[r->op](r);
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

/* Writes a line every 64 bytes of an n-byte buffer (kept, grown as asked): the step's own work between two
 * allocations, which evicts the tracer's lines (bench/step_mix.py --evict). */
static volatile char *evict_buf;
static size_t evict_n;
void sm_evict(size_t n)
{
    if (n > evict_n) {
        free((void *)evict_buf);
        evict_buf = calloc(1, n);
        evict_n = evict_buf ? n : 0;
    }
    for (size_t k = 0; k < evict_n && k < n; k += 64)
        evict_buf[k]++;
}

/* ~40 KB of code run straight through (bench/code_run.h): the step's own code between two allocations,
 * which evicts the tracer's code from the instruction cache (bench/step_mix.py --code). */
volatile int sm_code_sink;
void sm_evict_code(void)
{
    OT_CODE_RUN(sm_code_sink, 1)
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
