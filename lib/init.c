/* Start-up, exit, signals and fork. The tracer initialises itself on first use as well as from its
 * constructor, since another library's constructor may reach the driver before ours runs. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "record.h"
#include "snapshot.h"

__thread struct ot_thread ot_self __attribute__((tls_model("initial-exec")));
uint64_t ot_start_ns;

enum { ST_NEW = 0, ST_READY = 1, ST_OFF = 2 };
static int state;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static sem_t dump_sem;
static volatile sig_atomic_t dump_pending;
static int dumper_pid; /* the process whose dumper thread runs; a forked child starts its own */
static int exit_registered, exit_written;

uint32_t ot_tid(void)
{
    if (OT_UNLIKELY(!ot_self.tid))
        ot_self.tid = (uint32_t)syscall(SYS_gettid);
    return ot_self.tid;
}

uint64_t ot_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The signal handler only posts a semaphore (async-signal-safe); the dumper thread does the work. */
static void on_signal(int sig)
{
    int saved = errno;
    dump_pending = sig;
    sem_post(&dump_sem);
    errno = saved;
}

static void *dumper(void *arg)
{
    (void)arg;
    ot_self.busy = 1; /* this thread's own driver calls are never recorded */
    for (;;) {
        while (sem_wait(&dump_sem) != 0 && errno == EINTR)
            ;
        int sig = dump_pending;
        dump_pending = 0;
        ot_snapshot_write(OT_TRIGGER_SIGNAL, sig ? strsignal(sig) : "signal");
    }
    return NULL;
}

static void start_dumper(void)
{
    sigset_t all, old;
    sigfillset(&all);
    /* The thread must never run the program's signal handlers. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    if (pthread_create(&t, NULL, dumper, NULL) == 0) {
        pthread_detach(t);
        dumper_pid = (int)getpid();
    } else {
        ot_log("cannot start the snapshot thread; OOMTRACE_SIGNAL snapshots are off");
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void exit_dump(void)
{
    if (state != ST_READY || !ot_opt.dump_exit || __atomic_exchange_n(&exit_written, 1, __ATOMIC_ACQ_REL))
        return;
    ot_self.busy = 1;
    ot_snapshot_write(OT_TRIGGER_EXIT, "exit");
    ot_self.busy = 0;
}

/* Registered at the first allocation rather than at start-up, so that it runs before the exit handlers
 * the CUDA runtime registered when it started (they free memory we want to see live). */
void ot_after_first_alloc(void)
{
    if (OT_LIKELY(exit_registered) || __atomic_exchange_n(&exit_registered, 1, __ATOMIC_ACQ_REL))
        return;
    if (ot_opt.dump_exit)
        atexit(exit_dump);
    /* Said once, by a process that uses the device: most processes under LD_PRELOAD (shells, compilers)
     * never do, and need not hear about the directory. */
    struct stat st;
    if (stat(ot_opt.dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(ot_opt.dir, W_OK | X_OK) != 0)
        ot_log("OOMTRACE_DIR=%s is not a writable directory; snapshots will fail (tracing continues)",
               ot_opt.dir);
}

static void atfork_prepare(void)
{
    pthread_mutex_lock(&ot_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&ot_lock);
}

static void atfork_child(void)
{
    ot_self.tid = 0;
    ot_record_reset_after_fork();
    exit_written = 0;
}

static void init_once(void)
{
    int was_busy = ot_self.busy;
    ot_self.busy = 1;
    ot_start_ns = ot_now_ns();
    ot_options_load();
    if (ot_opt.disabled) {
        state = ST_OFF;
        ot_self.busy = was_busy;
        return;
    }
    ot_backtrace_init();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    if (ot_opt.signal) {
        sem_init(&dump_sem, 0, 0);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(ot_opt.signal, &sa, NULL) == 0)
            start_dumper();
        else
            ot_log("cannot install a handler for OOMTRACE_SIGNAL=%d: %s", ot_opt.signal, strerror(errno));
    }
    __atomic_store_n(&state, ST_READY, __ATOMIC_RELEASE);
    ot_self.busy = was_busy;
}

int ot_ready(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (OT_UNLIKELY(s == ST_NEW)) {
        pthread_once(&once, init_once);
        s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    }
    if (OT_UNLIKELY(s == ST_READY && ot_opt.signal && dumper_pid != (int)getpid()))
        start_dumper(); /* a forked child: threads do not survive fork */
    return s == ST_READY;
}

__attribute__((constructor)) static void ot_constructor(void)
{
    ot_ready();
}

/* A program that never allocated still gets its exit snapshot when it asked for one. */
__attribute__((destructor)) static void ot_destructor(void)
{
    exit_dump();
}
