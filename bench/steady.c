/* steady: a training-loop-shaped allocation pattern, for the trace size per event and the tracer's
 * memory footprint.
 *
 * Each "step" allocates activations from a few call sites (forward), a few temporaries (backward) and
 * frees them in roughly reverse order, with the same handful of sizes every step; a few long-lived
 * "weights" are allocated once. The stack of every call site is ~24 native frames deep.
 *
 *   steady STEPS     runs STEPS steps (16 allocations + 16 frees each), then prints
 *                    "result kind=steady events=N vmrss_kb=R maxrss_kb=M" and, when traced, writes a
 *                    snapshot with oomtrace_dump("steady") into OOMTRACE_DIR (after reading VmRSS).
 * Run traced and untraced by bench/run.sh; the difference in VmRSS is the tracer's footprint. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "oomtrace.h"

typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
static alloc_fn p_alloc;
static free_fn p_free;
static volatile int sink;

#define MiB (1ull << 20)

static unsigned long long must_alloc(size_t n)
{
    unsigned long long p;
    int rc = p_alloc(&p, n);
    if (rc) {
        fprintf(stderr, "steady: cuMemAlloc_v2(%zu) = %d\n", n, rc);
        exit(2);
    }
    return p;
}

/* Four call sites, each its own function (distinct return addresses). */
__attribute__((noinline)) static unsigned long long site_linear(size_t n) { unsigned long long p = must_alloc(n); sink++; return p; }
__attribute__((noinline)) static unsigned long long site_attn(size_t n) { unsigned long long p = must_alloc(n); sink++; return p; }
__attribute__((noinline)) static unsigned long long site_grad(size_t n) { unsigned long long p = must_alloc(n); sink++; return p; }
__attribute__((noinline)) static unsigned long long site_tmp(size_t n) { unsigned long long p = must_alloc(n); sink++; return p; }

__attribute__((noinline)) static void step(void)
{
    unsigned long long act[8], tmp[8];
    for (int l = 0; l < 4; l++) { /* forward: 4 layers x (linear out, attention scores) */
        act[2 * l] = site_linear(8 * MiB);
        act[2 * l + 1] = site_attn(32 * MiB);
    }
    for (int l = 3; l >= 0; l--) { /* backward: a gradient and a temporary per layer */
        tmp[2 * l] = site_grad(8 * MiB);
        tmp[2 * l + 1] = site_tmp(2 * MiB);
        p_free(tmp[2 * l + 1]);
        p_free(act[2 * l + 1]);
        p_free(act[2 * l]);
    }
    for (int l = 0; l < 4; l++)
        p_free(tmp[2 * l]);
}

/* Enough depth that the stacks look like a framework's (~24 frames). */
__attribute__((noinline)) static void deep(int left, long steps)
{
    if (left > 0) {
        deep(left - 1, steps);
    } else {
        for (long s = 0; s < steps; s++)
            step();
    }
    sink++;
}

static long vmrss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 20000;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "steady: %s\n", dlerror());
        return 2;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    p_alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    p_free = (free_fn)dlsym(h, "cuMemFree_v2");
    if (!init || !p_alloc || !p_free || init(0))
        return 2;
    unsigned long long weights[4];
    for (int i = 0; i < 4; i++)
        weights[i] = must_alloc(256 * MiB);
    deep(16, steps);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long rss = vmrss_kb();
    printf("result kind=steady events=%ld vmrss_kb=%ld maxrss_kb=%ld\n", 4 + steps * 32, rss, ru.ru_maxrss);
    fflush(stdout);
    oomtrace_dump_if_loaded("steady");
    for (int i = 0; i < 4; i++)
        p_free(weights[i]);
    return 0;
}
