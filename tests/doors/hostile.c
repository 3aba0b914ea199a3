/* Hosts that try to break the tracer's promises (issue 15), for tests/e2e/test_hostile.c. Linked with
 * -lcuda (the stand-in driver, 1 GiB unless FAKECUDA_CAPACITY says otherwise). Each mode prints
 * "key value" lines and exits 0 when the host saw what it would see untraced. Every mode arms alarm(),
 * so a hang ends as a death by SIGALRM (exit status 142) instead of stalling the test run.
 *   hostile cancel ROUNDS       a worker loops on failing allocations and is cancelled, ROUNDS times
 *   hostile forkdlopen N [MS]   N children forked while the tracer's threads run; each dlopens and exits.
 *                               MS: every walk of the loaded objects (dl_iterate_phdr, which holds glibc's
 *                               loader lock) lingers MS ms inside that lock, so that forks meet it
 *   hostile forkalloc N [MS]    the same, the children allocate
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
 *   hostile dlclosed PLUGIN     dlopens PLUGIN (libplugin_alloc.so), whose plugin_warm keeps 512 MiB, dlcloses
 *                               it, then asks for 600 MiB (an OOM on the 1 GiB device)
 *   hostile sigpending PRE      SIGPIPE and SIGXFSZ blocked, and raised first when PRE is 1, then one OOM;
 *                               prints which of them are pending after it (walk 8, #26, #27: run with stderr a
 *                               pipe whose reader has gone, or under `ulimit -f`: the tracer's writes leave
 *                               pending what was pending before, nothing more)
 *   hostile writerace exit|exec a worker's allocation fails; once its snapshot's hidden file is in OOMTRACE_DIR
 *                               (being written), the main thread calls exit(0), or execs /bin/true (walk 8, #33;
 *                               libfault's FAULT_SLOW_MS keeps the write going)
 *   hostile ctorexec            with HOSTILE_CTOR_EXEC set, libctor_exec.so's constructor re-executes the
 *                               program before the tracer initialised itself; prints "ctorexec done" */
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

#define MiB (1024ull * 1024)

static void device_init(void)
{
    CUcontext ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        exit(2);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static double now_s(void)
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

/* ---- fork while the tracer's threads run ---- */

/* The program's own dl_iterate_phdr (exported: the build links with -rdynamic), which the tracer's calls
 * bind to. With slow_walk_ms set, a walk sleeps inside glibc's, at its first loaded object, while glibc
 * holds the lock that guards the list of loaded objects: the moment at which a fork copies that lock held
 * becomes milliseconds wide instead of microseconds. A child forked then hangs in dlopen, as the issue saw
 * it hang 4 times in 1,500 at its natural width. */
static volatile int slow_walk_ms;

struct slow_walk {
    int (*cb)(struct dl_phdr_info *, size_t, void *);
    void *data;
    int ms;
};

static void sleep_ms(long ms);

static int slow_walk_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct slow_walk *w = data;
    if (w->ms) {
        sleep_ms(w->ms);
        w->ms = 0;
    }
    return w->cb(info, size, w->data);
}

int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
    static int (*real)(int (*)(struct dl_phdr_info *, size_t, void *), void *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "dl_iterate_phdr");
    struct slow_walk w = {cb, data, slow_walk_ms};
    return real(slow_walk_cb, &w);
}

/* Reaps a batch of children, waiting up to two seconds in all; those that do not end are killed and
 * counted as hung. */
static long reap(pid_t *pids, int n)
{
    double until = now_s() + 2.0;
    long hung = 0;
    int left = n;
    while (left) {
        for (int i = 0; i < n; i++) {
            int st;
            if (pids[i] && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                hung += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
                pids[i] = 0;
                left--;
            }
        }
        if (left && now_s() > until) {
            for (int i = 0; i < n; i++)
                if (pids[i]) {
                    kill(pids[i], SIGKILL);
                    waitpid(pids[i], NULL, 0);
                    hung++;
                }
            break;
        }
        if (left)
            sleep_ms(1);
    }
    return hung;
}

/* A child's allocation runs on a stack of its own (a signal handler on sigaltstack): the tracer's own stack
 * walk stops there, so the backtrace is libunwind's, which walks the loaded objects (dl_iterate_phdr). */
static volatile sig_atomic_t child_rc;

static void child_alloc(int sig)
{
    (void)sig;
    CUdeviceptr p;
    child_rc = cuMemAlloc_v2(&p, 4096) != CUDA_SUCCESS;
}

static int alloc_on_own_stack(void)
{
    static char stack[256 * 1024];
    stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack};
    struct sigaction sa = {.sa_handler = child_alloc, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    child_rc = 1;
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR2, &sa, NULL) != 0)
        return 1;
    raise(SIGUSR2);
    return child_rc;
}

static int mode_fork(long n, int allocate, int walk_ms)
{
    device_init();
    CUdeviceptr keep;
    if (cuMemAlloc_v2(&keep, MiB) != CUDA_SUCCESS) /* the first allocation: the tracer's threads start */
        return 3;
    slow_walk_ms = walk_ms;
    long hung = 0, done = 0;
    double until = now_s() + 2.0;
    enum { BATCH = 16 };
    while (done < n && now_s() < until) {
        pid_t pids[BATCH];
        int k = 0;
        for (; k < BATCH && done < n; k++, done++) {
            /* The parent keeps allocating, so that every flush interval has something new to write. */
            CUdeviceptr q;
            if (cuMemAlloc_v2(&q, 4096) != CUDA_SUCCESS || cuMemFree_v2(q) != CUDA_SUCCESS)
                return 7;
            pid_t pid = fork();
            if (pid < 0)
                return 5;
            if (pid == 0) {
                slow_walk_ms = 0;
                if (allocate) {
                    if (alloc_on_own_stack() != 0)
                        _exit(6);
                } else {
                    void *h = dlopen("libm.so.6", RTLD_NOW);
                    if (h)
                        dlclose(h);
                }
                _exit(0);
            }
            pids[k] = pid;
        }
        hung += reap(pids, k);
    }
    printf("forks %ld\nhung %ld\n", done, hung);
    return hung != 0;
}

/* ---- signal dispositions ---- */

static int mode_sigign(int argc, char **argv)
{
    if (argc < 3) { /* set SIGTERM ignored, as nohup-like launchers do, and start again with it */
        signal(SIGTERM, SIG_IGN);
        execl("/proc/self/exe", argv[0], "sigign", "child", (char *)NULL);
        return 3;
    }
    device_init();
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, MiB) != CUDA_SUCCESS)
        return 4;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(50);
        kill(parent, SIGTERM);
        _exit(0);
    }
    struct timespec ts = {0, 400 * 1000 * 1000};
    int rc = nanosleep(&ts, NULL);
    int err = errno;
    waitpid(pid, NULL, 0);
    printf("nanosleep %d\n", rc == 0 ? 0 : err);
    return rc != 0;
}

/* ---- single-thread-only system calls ---- */

static int mode_unshare(void)
{
    int rc = unshare(CLONE_NEWUSER);
    printf("unshare %d\n", rc == 0 ? 0 : errno);
    return rc != 0;
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

/* ---- a real fault ---- */

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

/* ---- sigpending ---- */

static int mode_sigpending(long pre)
{
    sigset_t both, pending;
    sigemptyset(&both);
    sigaddset(&both, SIGPIPE);
    sigaddset(&both, SIGXFSZ);
    sigprocmask(SIG_BLOCK, &both, NULL);
    if (pre) {
        raise(SIGPIPE);
        raise(SIGXFSZ);
    }
    device_init();
    CUdeviceptr p;
    int failed = cuMemAlloc_v2(&p, 4096 * MiB) == CUDA_ERROR_OUT_OF_MEMORY;
    sigpending(&pending);
    printf("failed %d sigpipe_pending %d sigxfsz_pending %d\n", failed, sigismember(&pending, SIGPIPE),
           sigismember(&pending, SIGXFSZ));
    return failed ? 0 : 1;
}

/* ---- writerace ---- */

static CUcontext race_ctx;

static void *fail_once(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    cuCtxSetCurrent(race_ctx);
    cuMemAlloc_v2(&p, 4096 * MiB);
    return NULL;
}

static int writing_now(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, ".oomt.tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

static int mode_writerace(const char *how)
{
    const char *dir = getenv("OOMTRACE_DIR");
    if (!dir)
        return 64;
    device_init();
    cuCtxGetCurrent(&race_ctx);
    CUdeviceptr p;
    for (int i = 0; i < 16; i++)
        cuMemAlloc_v2(&p, MiB);
    pthread_t t;
    pthread_create(&t, NULL, fail_once, NULL);
    for (int i = 0; i < 5000 && !writing_now(dir); i++)
        sleep_ms(2);
    printf("writing %d\n", writing_now(dir));
    if (strcmp(how, "exec") == 0) {
        execl("/bin/true", "true", (char *)NULL);
        return 3;
    }
    exit(0);
}

/* ---- oomthreads ---- */

static pthread_barrier_t oom_together;
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
    return NULL;
}

static int mode_oomthreads(long n)
{
    device_init();
    cuCtxGetCurrent(&oom_ctx);
    pthread_t t[64];
    int *failed = oom_failed;
    if (n > 64 || pthread_barrier_init(&oom_together, NULL, (unsigned)n) != 0)
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

/* ---- exit() from a signal handler ---- */

static volatile sig_atomic_t alarms;

static void exit_at_50th(int sig)
{
    (void)sig;
    if (++alarms == 50)
        exit(3);
}

static int mode_sigexit(int wait)
{
    device_init();
    CUdeviceptr keep[64], p;
    for (int i = 0; i < 64; i++)
        if (cuMemAlloc_v2(&keep[i], MiB) != CUDA_SUCCESS)
            return 4;
    signal(SIGALRM, exit_at_50th);
    struct itimerval it = {{0, wait ? 1000 : 50}, {0, wait ? 1000 : 50}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (;;) {
        if (wait)
            pause();
        else if (cuMemAlloc_v2(&p, MiB) == CUDA_SUCCESS)
            cuMemFree_v2(p);
    }
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

static int mode_dlclosed(const char *plugin)
{
    device_init();
    void *h = dlopen(plugin, RTLD_NOW);
    void (*warm)(void) = h ? (void (*)(void))dlsym(h, "plugin_warm") : NULL;
    if (!warm)
        return 3;
    warm();
    if (dlclose(h) != 0)
        return 4;
    CUdeviceptr p;
    return cuMemAlloc_v2(&p, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 5;
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

/* ---- termchild ---- */

static int mode_termchild(void)
{
    device_init();
    CUdeviceptr p;
    int fds[2];
    if (cuMemAlloc_v2(&p, MiB) != CUDA_SUCCESS || pipe(fds) != 0)
        return 3;
    pid_t child = fork();
    if (child < 0)
        return 4;
    if (child == 0) {
        struct sigaction old;
        char r = 'y';
        if (cuMemAlloc_v2(&p, 100 * MiB) != CUDA_SUCCESS)
            r = 'a';
        else if (sigaction(SIGTERM, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
            r = 'd';
        if (write(fds[1], &r, 1) != 1)
            _exit(5);
        for (;;)
            pause();
    }
    char r = 0;
    if (read(fds[0], &r, 1) != 1 || kill(child, SIGTERM) != 0)
        return 6;
    int st = 0;
    if (waitpid(child, &st, 0) != child)
        return 7;
    if (r != 'y') {
        fprintf(stderr, "termchild: the child's %s\n", r == 'a' ? "allocation failed" : "SIGTERM was not SIG_DFL");
        return 8;
    }
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM) {
        fprintf(stderr, "termchild: the child ended with status %#x, not by SIGTERM\n", st);
        return 9;
    }
    return 0;
}

static int mode_segv(void)
{
    device_init();
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, MiB) != CUDA_SUCCESS)
        return 3;
    volatile int *null = NULL;
    return *null;
}

/* ---- exec ---- */

/* Flush files in OOMTRACE_DIR now. */
static int count_flush_files(void)
{
    const char *dir = getenv("OOMTRACE_DIR");
    DIR *d = dir ? opendir(dir) : NULL;
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        n += e->d_name[0] != '.' && len > 11 && strcmp(e->d_name + len - 11, "-flush.oomt") == 0;
    }
    closedir(d);
    return n;
}

static int mode_exec(void)
{
    device_init();
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, MiB) != CUDA_SUCCESS)
        return 3;
    sleep_ms(300); /* a flush or two (the test sets OOMTRACE_FLUSH_MS=20) */
    /* An exec that fails leaves the process running: its crash-surviving file must be there again. */
    execl("/nonexistent/program", "program", (char *)NULL);
    if (errno != ENOENT)
        return 5;
    sleep_ms(100);
    printf("flush_after_failed_exec %d\n", count_flush_files());
    execl("/usr/bin/env", "env", "-u", "LD_PRELOAD", "/bin/true", (char *)NULL);
    return 4;
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
        return mode_fork(n ? n : 1500, 0, argc > 3 ? atoi(argv[3]) : 0);
    if (strcmp(mode, "forkalloc") == 0)
        return mode_fork(n ? n : 1500, 1, argc > 3 ? atoi(argv[3]) : 0);
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
        return mode_dlclosed(argv[2]);
    if (strcmp(mode, "exec") == 0)
        return mode_exec();
    if (strcmp(mode, "ctorexec") == 0) {
        printf("ctorexec %s\n", argc > 2 ? argv[2] : "not re-executed");
        return argc > 2 ? 0 : 1;
    }
    fprintf(stderr, "usage: hostile MODE [N]\n");
    return 64;
}
