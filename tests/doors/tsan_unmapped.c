/* What the tracer unmaps leaves nothing on ThreadSanitizer's record (tests/sh/tsan_host.sh, the "unmapped"
 * case). TSan clears its record of a range at munmap only for the whole pages of the length it is given;
 * code that the loader maps there afterwards (its mmap is not intercepted) then reads as racing with the
 * tracer's accesses. That is how the fresh-clone CI's tsan_host failed (2 rounds of 3 at d007611): NVML,
 * loaded at a snapshot where another thread's snapshot had just unmapped its scratch buffer (live_seq.c).
 *
 * Here deterministically: this program's munmap (exported, ahead of TSan's and the C library's) notes the
 * ranges liboomtrace.so unmaps, then passes the call on. Main writes a snapshot (oomtrace_dump) with a live
 * set of ALLOCS allocations; a thread that has no order with it (it only reads a relaxed flag) maps each
 * noted range again with a bare system call, as the loader would, and reads all of it. Prints "mapped again
 * N of M" and exits 0 when TSan saw no race; with TSAN_OPTIONS' exitcode=66 it exits 66 on one. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "oomtrace.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define ALLOCS 1000
#define MAXNOTED 64

static uintptr_t noted_at[MAXNOTED];
static size_t noted_len[MAXNOTED];
static unsigned noted; /* all three through relaxed atomics: they must not order main with the reader */
static int dumped;

int munmap(void *addr, size_t len)
{
    static int (*next)(void *, size_t);
    if (!next)
        next = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
    Dl_info in;
    if (dladdr(__builtin_return_address(0), &in) && in.dli_fname && strstr(in.dli_fname, "liboomtrace")) {
        unsigned i = __atomic_load_n(&noted, __ATOMIC_RELAXED);
        if (i < MAXNOTED) {
            __atomic_store_n(&noted_at[i], (uintptr_t)addr, __ATOMIC_RELAXED);
            __atomic_store_n(&noted_len[i], len, __ATOMIC_RELAXED);
            __atomic_store_n(&noted, i + 1, __ATOMIC_RELAXED);
        }
    }
    return next ? next(addr, len) : -1;
}

static void *again(void *arg)
{
    unsigned *mapped = arg;
    while (!__atomic_load_n(&dumped, __ATOMIC_RELAXED))
        sched_yield();
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned n = __atomic_load_n(&noted, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < n; i++) {
        uintptr_t at = __atomic_load_n(&noted_at[i], __ATOMIC_RELAXED);
        size_t len = (__atomic_load_n(&noted_len[i], __ATOMIC_RELAXED) + page - 1) / page * page;
        long p = syscall(SYS_mmap, at, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p != (long)at) {
            if (p != -1)
                syscall(SYS_munmap, p, len);
            continue; /* something else lives there now */
        }
        uint64_t sum = 0;
        for (size_t k = 0; k < len; k += 8)
            sum += *(volatile uint64_t *)(at + k);
        syscall(SYS_munmap, at, len);
        *mapped += sum == 0;
    }
    return NULL;
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
        return 2;
    static CUdeviceptr held[ALLOCS];
    for (int i = 0; i < ALLOCS; i++)
        if (cuMemAlloc_v2(&held[i], 4096) != CUDA_SUCCESS)
            return 3;
    unsigned mapped = 0;
    pthread_t t;
    pthread_create(&t, NULL, again, &mapped);
    __atomic_store_n(&noted, 0, __ATOMIC_RELAXED);
    if (oomtrace_dump_if_loaded("tsan_unmapped") != 0)
        return 4;
    __atomic_store_n(&dumped, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    printf("mapped again %u of %u\n", mapped, __atomic_load_n(&noted, __ATOMIC_RELAXED));
    for (int i = 0; i < ALLOCS; i++)
        cuMemFree_v2(held[i]);
    return 0;
}
