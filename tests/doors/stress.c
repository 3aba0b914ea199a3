/* Stress for the recorder (tests/e2e/test_stress.c): 16 threads share a table of slots and, at random,
 * allocate into an empty slot or free a full one - so most frees happen on another thread than the
 * allocation. Sizes are random. Halfway, with every thread parked at a barrier, thread 0 allocates one
 * big block larger than anything the churn can reach, so the process's peak - and the exact live set at
 * it - is known; the program prints that ground truth, then the final live set, and dumps. Thread 0 also
 * raises OOMTRACE_SIGNAL in the middle of the churn. Linked with -lcuda.
 *   stress [OPS_PER_THREAD]     (default 1000000) */
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../include/oomtrace.h"

#define THREADS 16
#define SLOTS 1024
#define MAXSZ (1u << 20)
#define BIG (4ull << 30) /* > SLOTS * MAXSZ: no churn can come near it */

struct slot {
    int busy; /* claimed by a thread */
    CUdeviceptr ptr;
    size_t size;
};
static struct slot slots[SLOTS];
static long ops;
static pthread_barrier_t bar;
static CUcontext ctx;

static void claim(struct slot *s)
{
    while (__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
        ;
}

static void release(struct slot *s)
{
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

static void print_slots(const char *tag)
{
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].ptr)
            printf("%s %llu %zu\n", tag, (unsigned long long)slots[i].ptr, slots[i].size);
}

static void churn(unsigned *seed, long n)
{
    for (long k = 0; k < n; k++) {
        struct slot *s = &slots[rand_r(seed) % SLOTS];
        claim(s);
        if (s->ptr) {
            if (cuMemFree_v2(s->ptr) != CUDA_SUCCESS)
                abort();
            s->ptr = 0;
        } else {
            size_t size = 512 + (size_t)(rand_r(seed) % MAXSZ);
            if (cuMemAlloc_v2(&s->ptr, size) != CUDA_SUCCESS)
                abort();
            s->size = size;
        }
        release(s);
    }
}

static void *worker(void *arg)
{
    long id = (long)arg;
    unsigned seed = (unsigned)(id * 7919 + 1);
    cuCtxSetCurrent(ctx);
    churn(&seed, ops / 2);
    pthread_barrier_wait(&bar); /* everyone parked: the live set is exactly the slots */
    if (id == 0) {
        CUdeviceptr big;
        if (cuMemAlloc_v2(&big, BIG) != CUDA_SUCCESS)
            abort();
        print_slots("peak");
        printf("peak %llu %llu\n", (unsigned long long)big, BIG);
        if (cuMemFree_v2(big) != CUDA_SUCCESS)
            abort();
    }
    pthread_barrier_wait(&bar);
    churn(&seed, ops / 4);
    if (id == 0)
        raise(SIGUSR1); /* a snapshot from the signal thread while 15 others churn */
    churn(&seed, ops - ops / 2 - ops / 4);
    return NULL;
}

int main(int argc, char **argv)
{
    ops = argc > 1 ? atol(argv[1]) : 1000000;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 2;
    pthread_barrier_init(&bar, NULL, THREADS);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    print_slots("live");
    fflush(stdout);
    return oomtrace_dump_if_loaded("end") == 0 ? 0 : 3;
}
