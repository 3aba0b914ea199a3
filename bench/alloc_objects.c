/* alloc_objects: the cost of an allocation/free pair (cuMemAllocAsync + cuMemFreeAsync, as PyTorch's
 * cudaMallocAsync backend makes per tensor) in a process that has N extra shared objects loaded, with the
 * stack passing through H of them - the shape of a PyTorch process (hundreds of objects, the stack crossing
 * libtorch, c10, cudart, python) against a small C program (five objects). In the same process and from the
 * same leaf, the floor: unw_backtrace at the same depth, into the buffer size the tracer asks for.
 *
 *   alloc_objects --objects N --kind std|nofde|expr|drap [--hops H] [--depth D] [--calls C] [--reps R]
 *
 * The objects are copies of one hop (HOPDIR/KIND/hopNNN.so, built by make bench-build from bench/hops/hop.c
 * and tests/unit/walk_hops.S); each
 * copy is a distinct object to the loader. The hops are spread over the load order (the first, the last,
 * and evenly between), since a lookup that walks the object list pays by position.
 *
 * Output: "result kind=unw|pair|alloc|free objects=N hopkind=K hops=H depth=D ns=X n=CALLS frames=F", each
 * the median of R passes. No timing is asserted anywhere. */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libgen.h>
#include <libunwind.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNW_WANT 80 /* what the tracer asks unw_backtrace for: OOMTRACE_DEPTH (64) + 16 */
#define MAX_OBJECTS 2000

typedef void (*hop_fn)(void (*)(void *), void *);
typedef int (*alloc_fn)(unsigned long long *, size_t, void *);
typedef int (*free_fn)(unsigned long long, void *);

static alloc_fn p_alloc;
static free_fn p_free;
static hop_fn hops[MAX_OBJECTS];
static int nobjects, nhops;
static volatile uintptr_t sink;

enum mode { M_UNW, M_PAIR };

struct job {
    enum mode mode;
    int left, hop_every, hops_left;
    long calls;
    double alloc_ns, free_ns;
    int frames;
};

static double clk(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "alloc_objects: %s failed (%d)\n", what, rc);
    exit(2);
}

__attribute__((noinline)) static void leaf(struct job *j, long n, int timed)
{
    void *raw[UNW_WANT];
    unsigned long long p[16];
    double a = 0, f = 0;
    if (j->mode == M_UNW) {
        double t0 = clk();
        for (long i = 0; i < n; i++)
            j->frames = unw_backtrace(raw, UNW_WANT);
        a = clk() - t0;
        sink += (uintptr_t)raw[0];
    } else {
        for (long i = 0; i < n; i += 16) {
            double t0 = clk();
            for (int k = 0; k < 16; k++) {
                int rc = p_alloc(&p[k], 4096 * (size_t)(1 + (k & 3)), NULL);
                if (rc)
                    die("cuMemAllocAsync", rc);
            }
            double t1 = clk();
            for (int k = 15; k >= 0; k--) {
                int rc = p_free(p[k], NULL);
                if (rc)
                    die("cuMemFreeAsync", rc);
            }
            a += t1 - t0;
            f += clk() - t1;
        }
    }
    if (timed) {
        j->alloc_ns = a / (double)n;
        j->free_ns = f / (double)n;
    }
}

static void recurse(struct job *j);

static void hop_next(void *arg)
{
    recurse(arg);
    sink++;
}

/* Each level is one frame; a level that hops is three (this one, the hop in its object, hop_next). */
__attribute__((noinline)) static void recurse(struct job *j)
{
    if (j->left <= 0) {
        leaf(j, j->calls / 8 + 16, 0); /* warm: first-sight interning, the unwinders' caches */
        leaf(j, j->calls, 1);
    } else if (j->hops_left > 0 && j->left >= 3 && j->left % j->hop_every == 0) {
        int h = --j->hops_left;
        j->left -= 3;
        /* hop h of nhops: objects spread over the load order, first and last included */
        int obj = nhops > 1 ? (int)((long)h * (nobjects - 1) / (nhops - 1)) : 0;
        hops[obj](hop_next, j);
    } else {
        j->left--;
        recurse(j);
    }
    sink++;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    const char *kind = "std";
    int depth = 40, reps = 5;
    long calls = 20000;
    char hopdir[PATH_MAX];
    snprintf(hopdir, sizeof hopdir, "%s/hops", dirname(strdup(argv[0])));
    nhops = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--objects") && i + 1 < argc)
            nobjects = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kind") && i + 1 < argc)
            kind = argv[++i];
        else if (!strcmp(argv[i], "--hops") && i + 1 < argc)
            nhops = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
            depth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hopdir") && i + 1 < argc)
            snprintf(hopdir, sizeof hopdir, "%s", argv[++i]);
        else {
            fprintf(stderr, "usage: alloc_objects [--objects N] [--kind std|nofde|expr|drap] [--hops H] [--depth D]"
                            " [--calls C] [--reps R] [--hopdir DIR]\n");
            return 2;
        }
    }
    if (nobjects < 0 || nobjects > MAX_OBJECTS || reps < 1 || reps > 64 || calls < 16)
        die("arguments", 0);
    if (nhops < 0)
        nhops = nobjects < 4 ? nobjects : 4;
    if (nhops > nobjects)
        nhops = nobjects;
    for (int i = 0; i < nobjects; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s/hop%03d.so", hopdir, kind, i);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "alloc_objects: %s (make bench-build)\n", dlerror());
            return 2;
        }
        const char *fn = !strcmp(kind, "expr") ? "walk_hop_expr" : !strcmp(kind, "drap") ? "walk_hop_drap" : "ot_bench_hop";
        hops[i] = (hop_fn)dlsym(h, fn);
        if (!hops[i])
            die(fn, 0);
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "alloc_objects: %s (put build/fake on LD_LIBRARY_PATH)\n", dlerror());
        return 2;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    p_alloc = (alloc_fn)dlsym(h, "cuMemAllocAsync");
    p_free = (free_fn)dlsym(h, "cuMemFreeAsync");
    if (!init || !p_alloc || !p_free || init(0))
        die("cuInit/dlsym", 0);

    double vu[64], vp[64], va[64], vf[64];
    int frames = 0;
    for (int r = 0; r < reps; r++) {
        /* hop_every spreads the hops over the recursion; levels below main are about depth - 8 */
        struct job u = {.mode = M_UNW, .left = depth, .calls = calls, .hops_left = nhops,
                        .hop_every = nhops ? (depth / (nhops + 1) > 3 ? depth / (nhops + 1) : 3) : 1};
        struct job p = u;
        p.mode = M_PAIR;
        recurse(&u);
        recurse(&p);
        vu[r] = u.alloc_ns;
        va[r] = p.alloc_ns;
        vf[r] = p.free_ns;
        vp[r] = p.alloc_ns + p.free_ns;
        frames = u.frames;
    }
    qsort(vu, (size_t)reps, sizeof *vu, cmp_d);
    qsort(vp, (size_t)reps, sizeof *vp, cmp_d);
    qsort(va, (size_t)reps, sizeof *va, cmp_d);
    qsort(vf, (size_t)reps, sizeof *vf, cmp_d);
    const char *names[] = {"unw", "pair", "alloc", "free"};
    double *vals[] = {vu, vp, va, vf};
    for (int k = 0; k < 4; k++)
        printf("result kind=%s objects=%d hopkind=%s hops=%d depth=%d ns=%.1f n=%ld frames=%d\n", names[k],
               nobjects, kind, nhops, depth, vals[k][reps / 2], calls * reps, frames);
    return 0;
}
