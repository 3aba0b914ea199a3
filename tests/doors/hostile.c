/* Hosts that try to break the tracer's promises (issue 15), for tests/e2e/test_hostile.c; the modes about a
 * process's life (fork, signals, exit, exec) are in hostile_proc.c. Linked with
 * -lcuda (the stand-in driver, 1 GiB unless FAKECUDA_CAPACITY says otherwise). Each mode prints
 * "key value" lines and exits 0 when the host saw what it would see untraced. Every mode arms alarm(),
 * so a hang ends as a death by SIGALRM (exit status 142) instead of stalling the test run.
 *   hostile cancel ROUNDS       a worker loops on failing allocations and is cancelled, ROUNDS times
 *   hostile forkdlopen N [MS]   N children forked while the tracer's threads run; each dlopens and exits.
 *                               MS: every walk of the loaded objects (dl_iterate_phdr, which holds glibc's
 *                               loader lock) lingers MS ms inside that lock, so that forks meet it
 *   hostile forkalloc N [MS]    the same, the children allocate
 *   hostile forkunload N PLUGIN [MS]  the same, after 300 loads and unloads of PLUGIN (libplugin_alloc.so); each
 *                               child loads and unloads it (the tracer's list of unloaded libraries, walk 7,
 *                               #27), each unload at a place of its own. MS: the tracer's flush thread lingers
 *                               MS ms in each realloc of 16 KiB or more, and each fork waits for it to linger,
 *                               so that forks meet the flush while it copies that list
 *   hostile sigign              SIGTERM inherited as ignored stays ignored (re-executes itself)
 *   hostile unshare             unshare(CLONE_NEWUSER), which needs a single-threaded process
 *   hostile stacks              threads with small stacks allocate, and one hits an OOM
 *   hostile stackuse            bytes of a thread's stack used (static TLS included) by a thread that does
 *                               nothing, one that allocates, one whose allocation fails (a snapshot)
 *   hostile fd2 PATH            stderr closed, fd 2 reopened as the program's data file PATH
 *   hostile segv                allocates, then dereferences NULL
 *   hostile exec                allocates, then execs a program that is not traced
 *   hostile oomloop N           holds 64 allocations, then N allocations that fail (one snapshot each)
 *   hostile oomthreads N        N threads whose allocations fail at the same moment (one snapshot each)
 *   hostile sigexit             a SIGALRM every 50 us while allocating and freeing; the 50th's handler calls
 *                               exit(3) (walk 7, #35)
 *   hostile sigexitwait         allocates, then a SIGALRM handler calls exit(3) while the program sleeps
 *   hostile smallfill N         N-byte allocations, never freed, until the device is full (1 GiB / N of them)
 *   hostile termchild           allocates 1 MiB, forks a child that allocates 100 MiB and waits; the parent
 *                               ends it with SIGTERM (as multiprocessing's Pool ends its workers): 0 when
 *                               the child died by SIGTERM and read SIGTERM's disposition as SIG_DFL
 *   hostile poolcap             a pool created with maxSize 256 MiB: 200 MiB from it, then 100 MiB (out of memory
 *                               while the device has room: walk 7, #31)
 *   hostile dlclosed PLUGIN [FIRST]  dlopens PLUGIN (libplugin_alloc.so), whose plugin_warm keeps 512 MiB,
 *                               dlcloses it, then asks for 600 MiB (an OOM on the 1 GiB device). FIRST: another
 *                               library, loaded before PLUGIN and unloaded just before it
 *   hostile sigpending PRE      SIGPIPE and SIGXFSZ blocked, and raised first when PRE is 1, then one OOM;
 *                               prints which of them are pending after it (walk 8, #26, #27: run with stderr a
 *                               pipe whose reader has gone, or under `ulimit -f`: the tracer's writes leave
 *                               pending what was pending before, nothing more)
 *   hostile writerace exit|exec a worker's allocation fails; once its snapshot's hidden file is in OOMTRACE_DIR
 *                               (being written), the main thread calls exit(0), or execs /bin/true (walk 8, #33;
 *                               libfault's FAULT_SLOW_MS keeps the write going)
 *   hostile nvmlkept WHO        two snapshots (oomtrace_dump), then the exit one; NVML (libnvidia-ml.so.1) is
 *                               opened by the tracer only (WHO=tracer), or by the program too, before the first
 *                               snapshot or between the two (WHO=before, after: dlopen, then dlsym of
 *                               nvmlInit_v2); prints "nvml_mapped 1" when NVML is mapped at the end
 *   hostile ctorexec            with HOSTILE_CTOR_EXEC set, libctor_exec.so's constructor re-executes the
 *                               program before the tracer initialised itself; prints "ctorexec done" */
#include "hostile.h"
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void device_init(void)
{
    CUcontext ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        exit(2);
}

void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- cancel ---- */

static void *fail_forever(void *arg)
{
    (void)arg;
    for (;;) {
        CUdeviceptr p;
        cuMemAlloc_v2(&p, 4096 * MiB); /* fails: the device is smaller */
        pthread_testcancel();
    }
    return NULL;
}

static int mode_cancel(long rounds)
{
    device_init();
    for (long i = 0; i < rounds; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, fail_forever, NULL) != 0)
            return 3;
        struct timespec ts = {0, (long)(100000 + (i % 7) * 37000)};
        nanosleep(&ts, NULL);
        pthread_cancel(t);
        pthread_join(t, NULL);
        CUdeviceptr p;
        if (cuMemAlloc_v2(&p, MiB) != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS)
            return 4;
    }
    printf("rounds %ld\n", rounds);
    return 0;
}

/* ---- small thread stacks ---- */

static void *alloc_small(void *arg)
{
    size_t bytes = (size_t)(uintptr_t)arg;
    if (!bytes)
        return NULL;
    CUdeviceptr p;
    CUresult r = cuMemAlloc_v2(&p, bytes);
    if (r == CUDA_SUCCESS)
        cuMemFree_v2(p);
    return (void *)(uintptr_t)r;
}

static int run_on_stack(size_t stack, size_t bytes)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (pthread_attr_setstacksize(&a, stack) != 0)
        return -1;
    pthread_t t;
    int rc = pthread_create(&t, &a, alloc_small, (void *)(uintptr_t)bytes);
    pthread_attr_destroy(&a);
    if (rc != 0)
        return -rc;
    void *ret;
    pthread_join(t, &ret);
    return (int)(uintptr_t)ret;
}

static int mode_stacks(void)
{
    device_init();
    /* What each stack size returns: 0 (CUDA_SUCCESS) for the small allocation, 2 (out of memory) for the
     * one that cannot fit; a negative number is pthread_create's error. A crash ends the program. */
    const size_t sizes[] = {(size_t)PTHREAD_STACK_MIN, 20 * 1024, 24 * 1024, 32 * 1024, 44 * 1024};
    int bad = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int small = run_on_stack(sizes[i], MiB);
        int oom = run_on_stack(sizes[i], 4096 * MiB);
        printf("stack%zu %d %d\n", sizes[i] / 1024, small, oom);
        bad |= small != CUDA_SUCCESS || oom != CUDA_ERROR_OUT_OF_MEMORY;
    }
    return bad;
}

/* A thread on a painted stack of our own: the deepest byte it changed is how much it used, the static TLS
 * that glibc puts at the top of a thread's stack included. */
static size_t stack_used(size_t bytes)
{
    enum { SIZE = 1 << 20 };
    static unsigned char stack[SIZE] __attribute__((aligned(4096)));
    memset(stack, 0xa5, sizeof stack);
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (pthread_attr_setstack(&a, stack, sizeof stack) != 0)
        return 0;
    pthread_t t;
    int rc = pthread_create(&t, &a, alloc_small, (void *)(uintptr_t)bytes);
    pthread_attr_destroy(&a);
    if (rc != 0)
        return 0;
    pthread_join(t, NULL);
    size_t low = 0;
    while (low < sizeof stack && stack[low] == 0xa5)
        low++;
    return sizeof stack - low;
}

static int mode_stackuse(void)
{
    device_init();
    printf("stack_idle %zu\n", stack_used(0));
    printf("stack_alloc %zu\n", stack_used(MiB));
    printf("stack_oom %zu\n", stack_used(4096 * MiB));
    return 0;
}

/* ---- fd 2 reused for the program's data ---- */

static int mode_fd2(const char *path)
{
    device_init();
    close(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd != 2)
        return 3;
    static const char rec[] = "record 1\n";
    if (write(fd, rec, sizeof rec - 1) != (ssize_t)(sizeof rec - 1))
        return 4;
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, 4096 * MiB) == CUDA_SUCCESS) /* an OOM: a snapshot, and its line */
        return 5;
    static const char rec2[] = "record 2\n";
    if (write(fd, rec2, sizeof rec2 - 1) != (ssize_t)(sizeof rec2 - 1))
        return 6;
    close(fd);
    return 0;
}

/* ---- oomloop ---- */

static int mode_oomloop(long n)
{
    alarm(120);
    device_init();
    CUdeviceptr p;
    for (int i = 0; i < 64; i++)
        if (cuMemAlloc_v2(&p, (size_t)(i + 1) * 4096) != CUDA_SUCCESS)
            return 1;
    long failed = 0;
    for (long i = 0; i < n; i++)
        failed += cuMemAlloc_v2(&p, 4096 * MiB) == CUDA_ERROR_OUT_OF_MEMORY;
    printf("failed %ld\n", failed);
    return failed == n ? 0 : 1;
}

/* ---- oomthreads ---- */

/* oom_done: every thread stays until all allocations returned, so that each snapshot, which names the threads
 * alive when it is written (/proc/self/task), names the thread whose request failed in it (a thread that had
 * already returned and ended read as "thread 9095", unnamed, once in CI). */
static pthread_barrier_t oom_together, oom_done;
static CUcontext oom_ctx;
static int oom_failed[64];

static void *fail_together(void *arg)
{
    CUdeviceptr p;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", (int)((int *)arg - oom_failed));
    pthread_setname_np(pthread_self(), name);
    cuCtxSetCurrent(oom_ctx);
    pthread_barrier_wait(&oom_together);
    *(int *)arg = cuMemAlloc_v2(&p, 4096 * MiB) == CUDA_ERROR_OUT_OF_MEMORY;
    pthread_barrier_wait(&oom_done);
    return NULL;
}

static int mode_oomthreads(long n)
{
    device_init();
    cuCtxGetCurrent(&oom_ctx);
    pthread_t t[64];
    int *failed = oom_failed;
    if (n > 64 || pthread_barrier_init(&oom_together, NULL, (unsigned)n) != 0 ||
        pthread_barrier_init(&oom_done, NULL, (unsigned)n) != 0)
        return 3;
    for (long i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, fail_together, &failed[i]) != 0)
            return 3;
    long got = 0;
    for (long i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        got += failed[i];
    }
    printf("failed %ld\n", got);
    return got == n ? 0 : 1;
}

/* ---- smallfill ---- */

static int mode_smallfill(long n)
{
    alarm(120);
    device_init();
    CUdeviceptr p;
    long kept = 0;
    while (cuMemAlloc_v2(&p, (size_t)n) == CUDA_SUCCESS)
        kept++;
    printf("kept %ld\n", kept);
    return 0;
}

/* ---- dlclosed ---- */

/* FIRST (another library, loaded beside PLUGIN and unloaded before it): PLUGIN's is then not the first record of
 * an unloaded library. */
static int mode_dlclosed(const char *plugin, const char *first)
{
    device_init();
    void *h0 = first ? dlopen(first, RTLD_NOW) : NULL;
    if (first && !h0)
        return 6;
    void *h = dlopen(plugin, RTLD_NOW);
    void (*warm)(void) = h ? (void (*)(void))dlsym(h, "plugin_warm") : NULL;
    if (!warm)
        return 3;
    warm();
    if ((h0 && dlclose(h0) != 0) || dlclose(h) != 0)
        return 4;
    CUdeviceptr p;
    return cuMemAlloc_v2(&p, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 5;
}

/* ---- nvmlkept ---- */

static void *nvml_by_program(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    return h && dlsym(h, "nvmlInit_v2") ? h : NULL;
}

static int mapped_now(const char *lib)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int mapped = 0;
    while (f && fgets(line, sizeof line, f))
        mapped |= strstr(line, lib) != NULL;
    if (f)
        fclose(f);
    return mapped;
}

static int mode_nvmlkept(const char *who)
{
    printf("libm_before %d\n", mapped_now("/libm.so.6")); /* a sanitizer's runtime loads it */
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "oomtrace_dump");
    device_init();
    CUdeviceptr p;
    if (!dump || cuMemAlloc_v2(&p, MiB) != CUDA_SUCCESS)
        return 3;
    if (strcmp(who, "before") == 0 && !nvml_by_program())
        return 4;
    if (dump("first") != 0)
        return 5;
    if (strcmp(who, "after") == 0 && !nvml_by_program())
        return 4;
    if (dump("second") != 0)
        return 5;
    printf("nvml_mapped %d\n", mapped_now("/libnvidia-ml.so.1"));
    return 0;
}

/* ---- poolcap ---- */

static int mode_poolcap(void)
{
    device_init();
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    pp.maxSize = 256 * MiB;
    CUmemoryPool pool;
    CUdeviceptr a, b;
    if (cuMemPoolCreate(&pool, &pp) != CUDA_SUCCESS || cuMemAllocFromPoolAsync(&a, 200 * MiB, pool, 0) != CUDA_SUCCESS)
        return 3;
    return cuMemAllocFromPoolAsync(&b, 100 * MiB, pool, 0) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 4;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    alarm(20);
    const char *mode = argc > 1 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0;
    if (strcmp(mode, "cancel") == 0)
        return mode_cancel(n ? n : 200);
    if (strcmp(mode, "forkdlopen") == 0)
        return mode_fork(n ? n : 1500, 0, argc > 3 ? atoi(argv[3]) : 0, NULL, 0);
    if (strcmp(mode, "forkalloc") == 0)
        return mode_fork(n ? n : 1500, 1, argc > 3 ? atoi(argv[3]) : 0, NULL, 0);
    if (strcmp(mode, "forkunload") == 0 && argc > 3)
        return mode_fork(n ? n : 1500, 0, 0, argv[3], argc > 4 ? atoi(argv[4]) : 0);
    if (strcmp(mode, "sigign") == 0)
        return mode_sigign(argc, argv);
    if (strcmp(mode, "unshare") == 0)
        return mode_unshare();
    if (strcmp(mode, "stacks") == 0)
        return mode_stacks();
    if (strcmp(mode, "stackuse") == 0)
        return mode_stackuse();
    if (strcmp(mode, "fd2") == 0 && argc > 2)
        return mode_fd2(argv[2]);
    if (strcmp(mode, "segv") == 0)
        return mode_segv();
    if (strcmp(mode, "oomloop") == 0)
        return mode_oomloop(n ? n : 100);
    if (strcmp(mode, "writerace") == 0 && argc > 2)
        return mode_writerace(argv[2]);
    if (strcmp(mode, "sigpending") == 0)
        return mode_sigpending(n);
    if (strcmp(mode, "oomthreads") == 0)
        return mode_oomthreads(n ? n : 16);
    if (strcmp(mode, "sigexit") == 0 || strcmp(mode, "sigexitwait") == 0)
        return mode_sigexit(strcmp(mode, "sigexitwait") == 0);
    if (strcmp(mode, "smallfill") == 0)
        return mode_smallfill(n ? n : 2048);
    if (strcmp(mode, "poolcap") == 0)
        return mode_poolcap();
    if (strcmp(mode, "termchild") == 0)
        return mode_termchild();
    if (strcmp(mode, "dlclosed") == 0 && argc > 2)
        return mode_dlclosed(argv[2], argc > 3 ? argv[3] : NULL);
    if (strcmp(mode, "exec") == 0)
        return mode_exec();
    if (strcmp(mode, "nvmlkept") == 0 && argc > 2)
        return mode_nvmlkept(argv[2]);
    if (strcmp(mode, "ctorexec") == 0) {
        printf("ctorexec %s\n", argc > 2 ? argv[2] : "not re-executed");
        return argc > 2 ? 0 : 1;
    }
    fprintf(stderr, "usage: hostile MODE [N]\n");
    return 64;
}
