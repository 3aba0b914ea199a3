/* bigsnap: big snapshots, for the dump and reader benchmarks.
 *
 *   bigsnap live DIR ROUNDS [EVENTS]
 *       Makes 100,000 distinct stacks (a 9-level chain through 4 noinline functions chosen by the
 *       base-4 digits of the stack's number, so every stack's return addresses differ) and 10 live
 *       allocations from each: 1,000,000 live allocations. Prints VmRSS. Then, when traced
 *       (OOMTRACE_DIR=DIR), times oomtrace_dump("bench") ROUNDS times after one untimed warm-up dump,
 *       each round preceded by its floor: the same snapshot's sections compressed again with zstd
 *       level 1 (as the writer does) and written to a file in DIR. With EVENTS, then makes alloc/free
 *       pairs until EVENTS events have been recorded in all, and writes the reader's input snapshot
 *       (1M live + EVENTS events; OOMTRACE_RING must be large enough to keep them all).
 *       Untraced, it stops after printing VmRSS (the footprint's baseline).
 *   bigsnap events DIR EVENTS
 *       Only alloc/free pairs from a few call sites, EVENTS events, then one snapshot: the reader's
 *       event-decoding input (almost nothing live, a small peak).
 *
 * Output: "result kind=..." lines, and "snapfile role=... path=..." for each snapshot kept. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>

#include "oomtrace.h"
#include "snapfile.h"

typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
static alloc_fn p_alloc;
static free_fn p_free;
static volatile int sink;
static const char *dir;
static unsigned dumps; /* snapshots this process asked for: the tracer's snapshot_seq */
static uint64_t events;

#define NSTACKS 100000
#define PER_STACK 10
#define LEVELS 9

static unsigned long long *live;
static size_t nlive;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static unsigned long long must_alloc(size_t n)
{
    unsigned long long p;
    int rc = p_alloc(&p, n);
    if (rc) {
        fprintf(stderr, "bigsnap: cuMemAlloc_v2(%zu) = %d\n", n, rc);
        exit(2);
    }
    events++;
    return p;
}

static void must_free(unsigned long long p)
{
    int rc = p_free(p);
    if (rc) {
        fprintf(stderr, "bigsnap: cuMemFree_v2 = %d\n", rc);
        exit(2);
    }
    events++;
}

/* ---- 100k distinct stacks ---- */

struct ctx {
    unsigned id;
};
typedef void (*lvl_fn)(struct ctx *, int);
static void next_level(struct ctx *c, int level);

__attribute__((noinline)) static void allocs_here(struct ctx *c)
{
    for (int k = 0; k < PER_STACK; k++)
        live[nlive++] = must_alloc(4096 * (size_t)(1 + (c->id + (unsigned)k) % 16));
    sink++;
}

__attribute__((noinline)) static void f0(struct ctx *c, int l) { next_level(c, l); sink++; }
__attribute__((noinline)) static void f1(struct ctx *c, int l) { next_level(c, l); sink += 2; }
__attribute__((noinline)) static void f2(struct ctx *c, int l) { next_level(c, l); sink += 3; }
__attribute__((noinline)) static void f3(struct ctx *c, int l) { next_level(c, l); sink += 4; }
static lvl_fn const fns[4] = {f0, f1, f2, f3};

__attribute__((noinline)) static void next_level(struct ctx *c, int level)
{
    if (level == LEVELS)
        allocs_here(c);
    else
        fns[(c->id >> (2 * level)) & 3](c, level + 1);
    sink++;
}

/* ---- a few call sites for the event loop ---- */

__attribute__((noinline)) static void pairs_site(int site, long n)
{
    unsigned long long p[8];
    for (long i = 0; i < n; i++) {
        for (int k = 0; k < 8; k++)
            p[k] = must_alloc((size_t)(1 + ((k + site) & 3)) << 9);
        for (int k = 7; k >= 0; k--)
            must_free(p[k]);
    }
    sink++;
}
__attribute__((noinline)) static void site_a(long n) { pairs_site(0, n); sink++; }
__attribute__((noinline)) static void site_b(long n) { pairs_site(1, n); sink++; }
__attribute__((noinline)) static void site_c(long n) { pairs_site(2, n); sink++; }

static void events_until(uint64_t target)
{
    /* 16 events per pairs_site iteration, 3 sites in turn, in blocks of 1000 iterations. */
    while (events + 16 <= target) {
        long left = (long)((target - events) / 16);
        long n = left < 1000 ? left : 1000;
        switch ((events / 16000) % 3) {
        case 0: site_a(n); break;
        case 1: site_b(n); break;
        default: site_c(n); break;
        }
    }
    while (events < target) /* the last few: one alloc+free, or one alloc */
        if (target - events >= 2)
            must_free(must_alloc(512));
        else
            live[nlive++] = must_alloc(512);
}

/* ---- snapshots ---- */

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

/* The file the tracer just wrote: oomtrace-HOST-PID-SEQ-dump.oomt in dir. */
static int find_snapshot(unsigned seq, char *out, size_t cap)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "-%d-%u-dump.oomt", (int)getpid(), seq);
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = -1;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name), s = strlen(suffix);
        if (n > s && !strcmp(e->d_name + n - s, suffix)) {
            snprintf(out, cap, "%s/%s", dir, e->d_name);
            found = 0;
        }
    }
    if (d)
        closedir(d);
    return found;
}

static int dump(const char *reason, char *path, size_t cap, double *ns)
{
    double t0 = now_ns();
    int rc = oomtrace_dump_if_loaded(reason);
    *ns = now_ns() - t0;
    dumps++;
    if (rc != 0 || find_snapshot(dumps, path, cap) != 0) {
        fprintf(stderr, "bigsnap: oomtrace_dump(%s) wrote nothing\n", reason);
        exit(2);
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The floor of a dump: the snapshot's own sections, compressed as the writer compresses them (zstd
 * level 1; EVENTS as is), written to a new file and closed. No serialization, no lock, no symbols. */
static double dump_floor(const struct sf_file *f, ZSTD_CCtx *cctx, size_t *bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/floor-%d.bin", dir, (int)getpid());
    double t0 = now_ns();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(path);
        exit(2);
    }
    size_t total = 32;
    write_all(fd, f->img, 32);
    for (int i = 0; i < f->nsec; i++) {
        const struct sf_section *s = &f->sec[i];
        const void *payload = s->raw;
        size_t len = s->raw_len;
        void *z = NULL;
        if (s->flags & 1) {
            size_t bound = ZSTD_compressBound(s->raw_len);
            z = malloc(bound);
            len = ZSTD_compressCCtx(cctx, z, bound, s->raw, s->raw_len, 1);
            payload = z;
        }
        write_all(fd, s->stored - 24, 24); /* its header as written (lengths may differ by a few bytes) */
        write_all(fd, payload, len);
        total += 24 + len;
        free(z);
    }
    close(fd);
    double ns = now_ns() - t0;
    unlink(path);
    *bytes = total;
    return ns;
}

static void setup(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bigsnap: %s\n", dlerror());
        exit(2);
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    p_alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    p_free = (free_fn)dlsym(h, "cuMemFree_v2");
    if (!init || !p_alloc || !p_free || init(0)) {
        fprintf(stderr, "bigsnap: no driver\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "live") && strcmp(argv[1], "events"))) {
        fprintf(stderr, "usage: bigsnap live DIR ROUNDS [EVENTS] | bigsnap events DIR EVENTS\n");
        return 2;
    }
    dir = argv[2];
    setup();
    int traced = dlsym(RTLD_DEFAULT, "oomtrace_dump") != NULL;
    char path[1024];
    double ns;

    if (!strcmp(argv[1], "events")) {
        uint64_t target = strtoull(argv[3], NULL, 10);
        live = calloc(4, sizeof *live);
        double t0 = now_ns();
        events_until(target);
        printf("result kind=gen events=%llu ns=%.0f\n", (unsigned long long)events, now_ns() - t0);
        if (traced) {
            dump("reader-events", path, sizeof path, &ns);
            printf("snapfile role=events path=%s\n", path);
        }
        return 0;
    }

    int rounds = atoi(argv[3]);
    uint64_t target = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
    live = calloc((size_t)NSTACKS * PER_STACK + 16, sizeof *live);
    double t0 = now_ns();
    for (unsigned id = 0; id < NSTACKS; id++) {
        struct ctx c = {id};
        next_level(&c, 0);
    }
    printf("result kind=gen events=%llu ns=%.0f\n", (unsigned long long)events, now_ns() - t0);
    printf("result kind=liverss traced=%d vmrss_kb=%ld live=%zu\n", traced, vmrss_kb(), nlive);
    fflush(stdout);
    if (!traced)
        return 0;

    dump("bench-warmup", path, sizeof path, &ns);
    printf("result kind=dumpfirst ns=%.0f\n", ns);
    printf("snapfile role=dump path=%s\n", path);
    struct sf_file f;
    if (sf_load(&f, path, 2) < 0) {
        fprintf(stderr, "bigsnap: cannot parse %s\n", path);
        return 2;
    }
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    double *dn = calloc((size_t)rounds, sizeof *dn), *fn = calloc((size_t)rounds, sizeof *fn);
    for (int r = 0; r < rounds; r++) {
        size_t fbytes;
        fn[r] = dump_floor(&f, cctx, &fbytes);
        char p2[1024];
        dump("bench", p2, sizeof p2, &dn[r]);
        struct stat st;
        stat(p2, &st);
        printf("result kind=dump round=%d ns=%.0f bytes=%lld floor_ns=%.0f floor_bytes=%zu\n", r, dn[r],
               (long long)st.st_size, fn[r], fbytes);
        unlink(p2);
    }
    ZSTD_freeCCtx(cctx);
    sf_free(&f);
    free(dn);
    free(fn);
    fflush(stdout);

    if (target) {
        t0 = now_ns();
        events_until(target);
        printf("result kind=gen2 events=%llu ns=%.0f live=%zu\n", (unsigned long long)events, now_ns() - t0, nlive);
        dump("reader-live", path, sizeof path, &ns);
        printf("snapfile role=live path=%s\n", path);
    }
    return 0;
}
