/* Start-up, exit, signals and fork. The tracer initialises itself on first use as well as from its
 * constructor, since another library's constructor may reach the driver before ours runs. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "capture/backtrace.h"
#include "capture/loader.h"
#include "capture/python.h"
#include "common/clock.h"
#include "common/defs.h"
#include "common/log.h"
#include "common/nosig.h"
#include "common/options.h"
#include "common/self.h"
#include "common/unmaps.h"
#include "driver/driver.h"
#include "driver/real.h"
#include "record/lock.h"
#include "record/record.h"
#include "runtime/init.h"
#include "runtime/sigchain.h"
#include "snapshot/snapshot.h"


enum { ST_NEW = 0, ST_READY = 1, ST_OFF = 2 };
static int state;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static sem_t dump_sem;
static volatile sig_atomic_t dump_pending;
static int threads_pid; /* the process whose helper threads run; a forked child starts its own */
static int helpers_on;  /* handlers installed and threads started (at the first device allocation) */
static int term_on;     /* SIGTERM or SIGINT taken for the exit snapshot (sigchain.c), so the snapshot thread runs */
static volatile sig_atomic_t term_pending;

/* Crash-surviving trace (OOMTRACE_DUMP=crash): a thread flushes the state to one file twice per
 * OOMTRACE_FLUSH_MS, so that a kill at any moment leaves a flush at most one interval old. */
static sem_t flush_sem;
static pthread_mutex_t flush_mu = PTHREAD_MUTEX_INITIALIZER;
static int flush_finished;
static volatile sig_atomic_t crash_sig, crash_flushed;
static struct sigaction crash_old[NSIG];
/* SIGTERM too: it is how launchers (torchrun, Slurm) stop the other ranks once one has failed. */
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM};
int ot_exit_registered;

/* The signal handler only posts a semaphore (async-signal-safe); the dumper thread does the work, and the
 * handler then goes on to the program's own disposition of the signal (sigchain.c). */
static void on_signal(int sig)
{
    dump_pending = sig;
    sem_post(&dump_sem);
}

static void *dumper(void *arg)
{
    (void)arg;
    ot_self.busy = 1; /* this thread's own driver calls are never recorded */
    for (;;) {
        while (sem_wait(&dump_sem) != 0 && errno == EINTR)
            ;
        int ended = term_pending;
        if (ended) { /* SIGTERM or SIGINT: the exit snapshot, then the process ends (sigchain.c) */
            term_pending = 0;
            ot_snapshot_exit_bounded();
            ot_snapshot_trigger(OT_TRIGGER_EXIT, ended == SIGINT ? "ended by SIGINT" : "ended by SIGTERM");
            ot_sigend_written(ended);
            continue;
        }
        int sig = dump_pending;
        dump_pending = 0;
        unsigned ticket = ot_sigchain_requested();
        ot_snapshot_trigger(OT_TRIGGER_SIGNAL, sig ? strsignal(sig) : "signal");
        ot_sigchain_done(ticket);
    }
    return NULL;
}

static void *flusher(void *arg)
{
    (void)arg;
    ot_self.busy = 1;
    uint64_t last_seq = ~0ull;
    struct timespec next;
    clock_gettime(CLOCK_REALTIME, &next);
    uint64_t half = (uint64_t)ot_opt.flush_ms * 500000ull; /* ns */
    for (;;) {
        next.tv_nsec += (long)(half % 1000000000ull);
        next.tv_sec += (time_t)(half / 1000000000ull) + next.tv_nsec / 1000000000L;
        next.tv_nsec %= 1000000000L;
        int woken = sem_timedwait(&flush_sem, &next) == 0;
        pthread_mutex_lock(&flush_mu);
        uint64_t seq = ot_record_last_seq();
        if (!flush_finished && (seq != last_seq || woken)) {
            if (woken && crash_sig)
                ot_snapshot_last_flush();
            ot_snapshot_trigger(OT_TRIGGER_FLUSH, woken && crash_sig ? strsignal(crash_sig) : "periodic");
            last_seq = seq;
        }
        pthread_mutex_unlock(&flush_mu);
        if (woken && crash_sig)
            crash_flushed = 1;
    }
    return NULL;
}

/* A fatal signal: wake the flusher for a last flush and wait for it (at most two seconds), then hand the
 * signal to whoever had it before. Only async-signal-safe calls here: no malloc, no stdio, no locks. */
static void on_crash(int sig, siginfo_t *info, void *uctx)
{
    int saved = errno;
    if (!crash_sig) {
        crash_sig = sig;
        sem_post(&flush_sem);
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        for (int i = 0; i < 200 && !crash_flushed; i++)
            nanosleep(&ten_ms, NULL);
    }
    struct sigaction *old = &crash_old[sig];
    ot_sig_real(sig, old, NULL);
    errno = saved;
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction)
            old->sa_sigaction(sig, info, uctx);
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    } else if (old->sa_handler == SIG_DFL && info && info->si_code <= 0) {
        raise(sig); /* sent by kill/raise/abort: deliver it again under the default action */
    }
    /* A fault (si_code > 0) under SIG_DFL re-executes the faulting instruction on return and dies. */
}

/* From on_term, in signal context: sem_post and getpid only. */
static int term_wake(int sig)
{
    if (__atomic_load_n(&threads_pid, __ATOMIC_ACQUIRE) != (int)getpid())
        return 0;
    term_pending = sig;
    sem_post(&dump_sem);
    return 1;
}

/* Named here, before the creator goes on: named by itself, the thread could be listed under the program's
 * name by a snapshot taken before it first ran (the golden run.json read so once under load). */
static void start_thread(void *(*fn)(void *), const char *name, const char *what)
{
    sigset_t all, old;
    sigfillset(&all);
    /* The thread must never run the program's signal handlers. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    if (pthread_create(&t, NULL, fn, NULL) == 0) {
        pthread_setname_np(t, name); /* so in a snapshot's thread names */
        pthread_detach(t);
    }
    else
        ot_log("cannot start the %s thread; %s is off", what, what);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void start_threads(void)
{
    __atomic_store_n(&threads_pid, (int)getpid(), __ATOMIC_RELEASE);
    if (ot_opt.signal || term_on)
        start_thread(dumper, "oomtrace-signal", ot_opt.signal ? "OOMTRACE_SIGNAL snapshot" : "SIGTERM and SIGINT exit snapshot");
    if (ot_opt.dump_crash)
        start_thread(flusher, "oomtrace-flush", "crash-surviving flush");
}

static void finish_flush(void);

/* Handlers and helper threads start at the first device allocation, not at load: most processes under
 * LD_PRELOAD never use the device, and a thread of ours breaks their single-thread-only system calls
 * (unshare, setns); Python reads every disposition when it starts, and must see the ones it inherited. */
static void install_handlers(void)
{
    if (ot_opt.signal) {
        if (ot_sigchain_install(ot_opt.signal, on_signal) != 0) {
            ot_log("cannot install a handler for OOMTRACE_SIGNAL=%d: %s", ot_opt.signal, strerror(errno));
            ot_opt.signal = 0;
        }
    }
    /* The crash mode's handlers take SIGTERM for a last flush; OOMTRACE_SIGNAL=TERM (or INT) writes a snapshot
     * of its own. */
    if (ot_opt.dump_exit && !ot_opt.dump_crash)
        term_on = ot_sigend_install(term_wake, ot_opt.signal);
    if (ot_opt.dump_crash) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_crash;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) {
            int sig = crash_signals[i];
            /* A signal the process inherited as ignored stays ignored: a handler would interrupt its
             * system calls (EINTR) where the kernel discarded the signal. */
            if (ot_sig_real(sig, NULL, &crash_old[sig]) != 0 || crash_old[sig].sa_handler == SIG_IGN)
                continue;
            ot_sig_real(sig, &sa, &crash_old[sig]);
        }
        atexit(finish_flush);
    }
    __atomic_store_n(&helpers_on, 1, __ATOMIC_RELEASE);
    start_threads();
}

/* The process finished: its crash-surviving file would only mislead. */
static void finish_flush(void)
{
    if (!ot_opt.dump_crash || __atomic_load_n(&threads_pid, __ATOMIC_ACQUIRE) != (int)getpid())
        return;
    pthread_mutex_lock(&flush_mu);
    flush_finished = 1;
    ot_flush_file_remove();
    pthread_mutex_unlock(&flush_mu);
}

/* flush_mu, waiting at most a second: an exec must not hang on a flusher stuck in a full disk's write. */
static int flush_lock_briefly(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    return pthread_mutex_timedlock(&flush_mu, &until) == 0;
}

/* An exec replaces this image: the trace of this run ends here as at exit, and its crash-surviving file
 * would say the process did not finish. Only in the process whose flusher wrote it: a forked or vforked
 * child that execs passes straight through (between fork and exec only getpid and a load run here). */
int ot_exec_begin(void)
{
    ot_snapshot_wait_writes("exec"); /* a snapshot another thread writes ends with this image */
    if (!ot_opt.dump_crash || __atomic_load_n(&threads_pid, __ATOMIC_ACQUIRE) != (int)getpid())
        return 0;
    if (!flush_lock_briefly())
        return 0;
    int was = flush_finished;
    flush_finished = 1;
    if (!was)
        ot_flush_file_remove();
    pthread_mutex_unlock(&flush_mu);
    return !was;
}

/* The exec failed and the process goes on: so does its crash-surviving file, rewritten at once. */
void ot_exec_failed(void)
{
    int saved = errno;
    if (flush_lock_briefly()) {
        flush_finished = 0;
        pthread_mutex_unlock(&flush_mu);
        sem_post(&flush_sem); /* a woken flusher writes even when nothing changed */
    }
    errno = saved;
}

/* At exit, the snapshots other threads are writing are waited for (bounded), before the exit snapshot (which
 * then follows them in number) and after it (a failure during it). */
static void exit_dump(void)
{
    const char *why;
    if (state != ST_READY)
        return;
    ot_snapshot_wait_writes("exit");
    if (!ot_opt.dump_exit)
        return;
    if (!ot_exit_here_safe(&why)) {
        ot_log("%s: no exit snapshot (it could hang the process)", why);
        return;
    }
    ot_snapshot_trigger(OT_TRIGGER_EXIT, "exit");
    ot_snapshot_wait_writes("exit");
}

/* Under oomtrace run (OOMTRACE_OUTER_RUN names its run's directory), a process that uses the device leaves a
 * note there of the directory its snapshots go to: a command that sets its own OOMTRACE_DIR (a job script's
 * export OOMTRACE_DIR=/scratch/$JOB) writes elsewhere, and the launcher finds them by it; and a run without any
 * note had no process that allocated with the library loaded (env -i, sudo and docker drop LD_PRELOAD). */
static void note_for_launcher(void)
{
    const char *run = getenv("OOMTRACE_OUTER_RUN");
    char path[sizeof ot_opt.dir + 64];
    if (!run || run[0] != '/' ||
        (size_t)snprintf(path, sizeof path, "%s/.oomtrace-used-%d", run, (int)getpid()) >= sizeof path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    size_t n = strlen(ot_opt.dir);
    struct ot_nosig q; /* under `ulimit -f 0` the write would raise SIGXFSZ (walk 8, #26) */
    ot_nosig_begin(&q);
    ssize_t w = write(fd, ot_opt.dir, n);
    if (w < 0)
        ot_nosig_saw(&q, errno);
    ot_nosig_end(&q);
    (void)w; /* a note cut short only costs the launcher a line; the program is never told */
    close(fd);
}

/* Registered at the first allocation rather than at start-up, so that it runs before the exit handlers
 * the CUDA runtime registered when it started (they free memory we want to see live). */
void ot_after_first_alloc(void)
{
    if (OT_LIKELY(__atomic_load_n(&ot_exit_registered, __ATOMIC_RELAXED)) ||
        __atomic_exchange_n(&ot_exit_registered, 1, __ATOMIC_ACQ_REL))
        return;
    atexit(exit_dump);
    if (ot_opt.signal || ot_opt.dump_crash || ot_opt.dump_exit)
        install_handlers();
    /* Said once, by a process that uses the device: most processes under LD_PRELOAD (shells, compilers)
     * never do, and need not hear about the directory. */
    struct stat st;
    if (stat(ot_opt.dir, &st) != 0 && errno == ENOENT)
        ot_dir_make(ot_opt.dir);
    if (stat(ot_opt.dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(ot_opt.dir, W_OK | X_OK) != 0) {
        /* Unset (or refused at start), the directory is the one the process started in: name that, not a
         * variable the user never set to it. */
        if (ot_opt.dir_given)
            ot_log("OOMTRACE_DIR=%s is not a writable directory; snapshots will fail (tracing continues)",
                   ot_opt.dir);
        else
            ot_log("the current directory, %s, where snapshots go without a usable OOMTRACE_DIR, is not writable; "
                   "snapshots will fail (tracing continues; set OOMTRACE_DIR)", ot_opt.dir);
        ot_dir_warned = 1;
    }
    note_for_launcher();
}


static void atfork_child(void)
{
    ot_self.tid = 0;
    ot_clock_forked();
    ot_drv_forked();
    __atomic_store_n(&ot_ready_now, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&threads_pid, 0, __ATOMIC_RELEASE); /* restarted on the child's next tracer call */
    pthread_mutex_init(&flush_mu, NULL);
    ot_record_reset(1);
    ot_snapshot_forked();
    ot_pyframes_forked();
    ot_unmaps_forked();
}

static void init_once(void)
{
    int was_busy = ot_self.busy;
    ot_self.busy = 1;
    ot_start_ns = ot_now_ns();
    ot_exec_resolve();
    ot_log_init();
    ot_options_load();
    if (ot_opt.disabled) {
        state = ST_OFF;
        ot_self.busy = was_busy;
        return;
    }
    ot_clock_start(ot_opt.tsc);
    ot_lock_tsan_init();
    ot_lock_owner_init(ot_opt.lock_owner);
    ot_backtrace_init();
    pthread_atfork(ot_record_fork_prepare, ot_record_fork_parent, atfork_child);
    /* Registered after the state lock's, so its prepare runs first: fork waits for the walks of the loaded
     * objects, which never hold the state lock. */
    pthread_atfork(ot_loader_fork_prepare, ot_loader_fork_parent, ot_loader_fork_child);
    /* Ready before any handler exists: a signal that arrives before the first allocation finds them. */
    sem_init(&dump_sem, 0, 0);
    sem_init(&flush_sem, 0, 0);
    __atomic_store_n(&state, ST_READY, __ATOMIC_RELEASE);
    ot_self.busy = was_busy;
}

int ot_ready_now;

int ot_ready(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (OT_UNLIKELY(s == ST_NEW)) {
        pthread_once(&once, init_once);
        s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    }
    if (OT_UNLIKELY(s == ST_READY && __atomic_load_n(&threads_pid, __ATOMIC_ACQUIRE) == 0 && __atomic_load_n(&helpers_on, __ATOMIC_ACQUIRE)))
        start_threads(); /* a forked child: threads do not survive fork */
    /* From here on the only work left is the forked child's start_threads, and atfork_child clears the
     * flag for it (the first allocation starts the threads itself, in install_handlers). */
    if (s == ST_READY)
        __atomic_store_n(&ot_ready_now, 1, __ATOMIC_RELEASE);
    return s == ST_READY;
}

__attribute__((constructor)) static void ot_constructor(void)
{
    ot_ready();
}

/* No exit snapshot here: it is registered at the first allocation, so that processes that never use the
 * device (launchers, shells, compilers under the same LD_PRELOAD) leave no empty files behind. */
__attribute__((destructor)) static void ot_destructor(void)
{
    finish_flush();
}
