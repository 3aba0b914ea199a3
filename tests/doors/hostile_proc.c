/* hostile's modes about a process's life (tests/doors/hostile.c lists them all): fork storms while the tracer's
 * threads run, inherited signal dispositions, single-thread-only system calls, pending signals, exit() and exec
 * while a snapshot is being written or from a signal handler, a child ended by SIGTERM, a real fault, exec. */
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* The program's own realloc (exported: -rdynamic; glibc's is __libc_realloc), which the tracer's growing buffers
 * bind to. With slow_flush_realloc_ms set, each realloc of 16 KiB or more by the tracer's flush thread
 * ("oomtrace-flush") sleeps first, and mode_fork forks while it sleeps: the flush copies the list of 256
 * unloaded libraries (about 25 KiB) into a growing buffer, so a fork meets that copy in progress. */
extern void *__libc_realloc(void *p, size_t n);
static volatile int slow_flush_realloc_ms;

static volatile int flush_lingers; /* the flush thread is in realloc's sleep now: a fork meets it there */

void *realloc(void *p, size_t n)
{
    char name[16] = "";
    if (slow_flush_realloc_ms && n >= 16384 && prctl(PR_GET_NAME, name) == 0 && strcmp(name, "oomtrace-flush") == 0) {
        flush_lingers = 1;
        sleep_ms(slow_flush_realloc_ms);
        flush_lingers = 0;
    }
    /* The next realloc after the program, not glibc's by name: under the sanitizers' runs an ASan runtime
     * comes first among the preloads, and its free refuses what glibc's realloc returned. */
    static void *(*next)(void *, size_t);
    void *(*fn)(void *, size_t) = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
        if (!fn)
            fn = __libc_realloc;
        __atomic_store_n(&next, fn, __ATOMIC_RELEASE);
    }
    return fn(p, n);
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

/* PLUGIN non-NULL (forkunload): the parent first loads and unloads it 300 times, so that the tracer keeps a
 * full list of unloaded libraries (walk 7, #27), which every flush copies; each child then loads and unloads
 * it too, and the tracer records that unload in the same list. REALLOC_MS: see realloc above. */
int mode_fork(long n, int allocate, int walk_ms, const char *plugin, int realloc_ms)
{
    device_init();
    CUdeviceptr keep;
    if (cuMemAlloc_v2(&keep, MiB) != CUDA_SUCCESS) /* the first allocation: the tracer's threads start */
        return 3;
    /* Each unload at a place of its own (a page kept mapped where the plugin was): records that differ, all
     * of them copied by every flush. */
    for (int i = 0; plugin && i < 300; i++) {
        struct link_map *lm = NULL;
        void *h = dlopen(plugin, RTLD_NOW);
        if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
            return 8;
        void *at = (void *)lm->l_addr;
        if (dlclose(h) != 0)
            return 8;
        mmap(at, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    }
    slow_walk_ms = walk_ms;
    slow_flush_realloc_ms = realloc_ms;
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
            for (int w = 0; slow_flush_realloc_ms && !flush_lingers && w < 100; w++)
                sleep_ms(1);
            pid_t pid = fork();
            if (pid < 0)
                return 5;
            if (pid == 0) {
                slow_walk_ms = 0;
                slow_flush_realloc_ms = 0;
                if (plugin) {
                    void *h = dlopen(plugin, RTLD_NOW);
                    if (!h || dlclose(h) != 0)
                        _exit(8);
                } else if (allocate) {
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

int mode_sigign(int argc, char **argv)
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

int mode_unshare(void)
{
    int rc = unshare(CLONE_NEWUSER);
    printf("unshare %d\n", rc == 0 ? 0 : errno);
    return rc != 0;
}

/* ---- sigpending ---- */

int mode_sigpending(long pre)
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

int mode_writerace(const char *how)
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

/* ---- exit() from a signal handler ---- */

static volatile sig_atomic_t alarms;

static void exit_at_50th(int sig)
{
    (void)sig;
    if (++alarms == 50)
        exit(3);
}

int mode_sigexit(int wait)
{
    device_init();
    CUdeviceptr keep[64], p;
    for (int i = 0; i < 64; i++)
        if (cuMemAlloc_v2(&keep[i], MiB) != CUDA_SUCCESS)
            return 4;
    signal(SIGALRM, exit_at_50th);
    struct itimerval it = {{0, wait ? 1000 : 50}, {0, wait ? 1000 : 50}};
    /* With FAKECUDA_ALARM_IN_FREE=1 the stand-in sets off every SIGALRM inside its cuMemFree, its lock held */
    if (!getenv("FAKECUDA_ALARM_IN_FREE"))
        setitimer(ITIMER_REAL, &it, NULL);
    for (;;) {
        if (wait)
            pause();
        else if (cuMemAlloc_v2(&p, MiB) == CUDA_SUCCESS)
            cuMemFree_v2(p);
    }
}

/* ---- termchild ---- */

int mode_termchild(void)
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

/* ---- a real fault ---- */

int mode_segv(void)
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

int mode_exec(void)
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
    /* Up to 2 s for the next flush (every 10 ms here): a loaded machine delays the flush thread past a fixed
     * 100 ms wait (make test's full run read 0 so). */
    for (int i = 0; i < 200 && count_flush_files() < 1; i++)
        sleep_ms(10);
    printf("flush_after_failed_exec %d\n", count_flush_files());
    execl("/usr/bin/env", "env", "-u", "LD_PRELOAD", "/bin/true", (char *)NULL);
    return 4;
}
