/* OOMTRACE_SIGNAL without changing what the signal does to the program (walk 7, #21). The handler used to
 * replace the program's: a SIGUSR1 handler set before the first allocation (Slurm's --signal=USR1@90,
 * Lightning's requeue) never ran again, and TERM or INT no longer stopped the process; a handler set after
 * it silently replaced the tracer's. Now the tracer keeps the program's disposition, shows it to the program
 * as the current one (the exported sigaction and signal), and goes on to it after the snapshot: the program's
 * handler is called as the kernel would have called it (its mask, its SA_SIGINFO arguments), a default action
 * that ends or stops the process is taken once the snapshot is written, an ignored signal stays ignored. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>
#include <stdint.h>
#include <ucontext.h>

#include "capture/backtrace.h"
#include "common/self.h"
#include "driver/real.h"
#include "runtime/sigchain.h"

static void *real_sigaction;
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
extern __sighandler_t bsd_signal(int sig, __sighandler_t handler);
static int chained_sig;          /* the signal taken, 0 when none */
static struct sigaction prog[2]; /* the program's disposition: prog[cur], the other one being written */
static int cur;
static int writer_lock;
static void (*wake_fn)(int);
static unsigned requested, done; /* tickets: snapshots asked for, and written */
static volatile sig_atomic_t end_with; /* a default action to take once the snapshot is written */

int ot_sig_real(int sig, const struct sigaction *act, struct sigaction *old)
{
    void *fn = ot_real_next(&real_sigaction, "sigaction");
    if (!fn) { /* the C library's own other name for it: a program's sigaction never fails for our sake */
        fn = (void *)__sigaction;
        __atomic_store_n(&real_sigaction, fn, __ATOMIC_RELEASE);
    }
    return ((int (*)(int, const struct sigaction *, struct sigaction *))fn)(sig, act, old);
}

/* What SIG_DFL does with a signal under the tracer: 1 ends the process, 2 stops it, 0 nothing. USR1 and USR2
 * have no meaning but the one a program gives them: one the program left at SIG_DFL is the tracer's to take
 * (`kill -USR1 PID` for a snapshot of a running job is what OOMTRACE_SIGNAL is for). Every other signal
 * keeps its default action: TERM, INT, HUP and QUIT are how schedulers and users stop a job. */
static int default_action(int sig)
{
    switch (sig) {
    case SIGCHLD: case SIGCONT: case SIGURG: case SIGWINCH: case SIGUSR1: case SIGUSR2:
        return 0;
    case SIGTSTP: case SIGTTIN: case SIGTTOU:
        return 2;
    default:
        return 1;
    }
}

/* The snapshot asked for by TICKET, waited for at most WAIT_MS: the process goes on to the program's
 * disposition as it would have at once, only after the file is written. Not when this thread was inside
 * the tracer: what the snapshot thread needs may be held by it until the handler returns. */
#define WAIT_MS 5000
static void wait_for(unsigned ticket)
{
    if (ot_self.busy)
        return;
    struct timespec ms = {0, 1000 * 1000};
    for (int i = 0; i < WAIT_MS && (int)(__atomic_load_n(&done, __ATOMIC_ACQUIRE) - ticket) < 0; i++)
        nanosleep(&ms, NULL);
}

static void on_signal(int sig, siginfo_t *info, void *uctx)
{
    int saved = errno;
    unsigned ticket = __atomic_add_fetch(&requested, 1, __ATOMIC_ACQ_REL);
    struct sigaction p = prog[__atomic_load_n(&cur, __ATOMIC_ACQUIRE)];
    int action = p.sa_handler == SIG_DFL && !(p.sa_flags & SA_SIGINFO) ? default_action(sig) : 0;
    if (action)
        end_with = sig; /* the snapshot thread takes the default action once it has written */
    wake_fn(sig);
    wait_for(ticket);
    if (action) {
        errno = saved;
        return;
    }
    if (p.sa_flags & SA_RESETHAND) { /* the kernel would have reset it on the way in */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        prog[__atomic_load_n(&cur, __ATOMIC_ACQUIRE)] = dfl;
    }
    int handler = p.sa_flags & SA_SIGINFO ? p.sa_sigaction != NULL
                                          : p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN;
    if (handler) {
        sigset_t old;
        pthread_sigmask(SIG_BLOCK, &p.sa_mask, &old);
        errno = saved;
        if (p.sa_flags & SA_SIGINFO)
            p.sa_sigaction(sig, info, uctx);
        else
            p.sa_handler(sig);
        saved = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    errno = saved;
}

unsigned ot_sigchain_requested(void)
{
    return __atomic_load_n(&requested, __ATOMIC_ACQUIRE);
}

void ot_sigchain_done(unsigned ticket)
{
    __atomic_store_n(&done, ticket, __ATOMIC_RELEASE);
    int sig = end_with;
    if (!sig)
        return;
    if (default_action(sig) == 2) { /* stopped, as untraced; the tracer's handler stays for the next one */
        end_with = 0;
        kill(getpid(), SIGSTOP);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    __atomic_store_n(&chained_sig, 0, __ATOMIC_RELEASE);
    ot_sig_real(sig, &dfl, NULL);
    kill(getpid(), sig);
}

/* Ours, as the program's disposition asks: its SA_RESTART (Python relies on EINTR to run its handlers
 * promptly), its alternate stack and its mask. */
static int install_ours(int sig, const struct sigaction *p)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    int handler = p->sa_flags & SA_SIGINFO ? 1 : p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN;
    sa.sa_flags = SA_SIGINFO | (handler ? p->sa_flags & (SA_RESTART | SA_ONSTACK) : SA_RESTART);
    if (handler)
        sa.sa_mask = p->sa_mask;
    else
        sigemptyset(&sa.sa_mask);
    return ot_sig_real(sig, &sa, NULL);
}

int ot_sigchain_install(int sig, void (*wake)(int))
{
    struct sigaction p;
    if (ot_sig_real(sig, NULL, &p) != 0)
        return -1;
    wake_fn = wake;
    prog[0] = p;
    cur = 0;
    if (install_ours(sig, &p) != 0)
        return -1;
    __atomic_store_n(&chained_sig, sig, __ATOMIC_RELEASE);
    return 0;
}

/* ---- SIGTERM and SIGINT at their default: the exit snapshot first (walk 7, #33; walk 9, #9) ----
 * multiprocessing's Pool ends its workers with SIGTERM (terminate(), at the end of a `with` block), and
 * torchrun and Slurm stop the other ranks with it: such a process runs no exit handler, so it wrote no exit
 * snapshot and the launcher saw nothing of what it held. Ctrl-C of a Python job whose KeyboardInterrupt goes
 * uncaught is the same with SIGINT: Python finalizes, sets SIGINT back to its default and kills itself with it
 * (status 130), and no snapshot at all was written. With exit snapshots asked for, a signal of the two at its
 * default is taken: the tracer's handler has the snapshot thread write the exit snapshot (waiting at most
 * WAIT_MS), then the default action ends the process by the signal as it would have. The program reads its own
 * disposition (SIG_DFL); one it sets replaces the tracer's handler, which then never runs, until the program
 * sets the default again (Python's exit path above): then it is taken again. In sigchain.c, not a file of its
 * own: the exported sigaction reads term_state, and must not reach instrumented code while TSan's runtime
 * starts (tests/fuzz/fuzz.mk). */
enum { TERM_NONE, TERM_TAKEN, TERM_GONE }; /* GONE: the program's own disposition, its default watched for */
static const int term_sigs[2] = {SIGTERM, SIGINT};
static int term_state[2];
static struct sigaction term_prog[2]; /* the program's disposition while taken: SIG_DFL, with its flags and mask */
static int (*term_wake)(int);
static volatile sig_atomic_t term_written[2];
static pid_t term_pid; /* the process that installed: the only one that takes a signal again */

static int term_index(int sig)
{
    return sig == SIGTERM ? 0 : sig == SIGINT ? 1 : -1;
}

static void on_term(int sig, siginfo_t *info, void *uctx)
{
    (void)info;
    (void)uctx;
    int saved = errno;
    int t = term_index(sig);
    /* 0 from term_wake: no snapshot thread in this process (a forked child that never allocated) */
    if (t >= 0 && __atomic_load_n(&term_state[t], __ATOMIC_ACQUIRE) == TERM_TAKEN && term_wake(sig)) {
        struct timespec ms = {0, 1000 * 1000};
        for (int i = 0; i < WAIT_MS && !term_written[t]; i++)
            nanosleep(&ms, NULL);
    }
    /* The default action, unless the program set a disposition of its own meanwhile; never this handler again
     * (the signal raised below would come back to it). */
    struct sigaction now;
    if (ot_sig_real(sig, NULL, &now) != 0 || ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_term)) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        if (t >= 0)
            __atomic_store_n(&term_state[t], TERM_GONE, __ATOMIC_RELEASE);
        ot_sig_real(sig, &dfl, NULL);
    }
    /* Blocked until this handler returns: then the default action, or the program's disposition. */
    raise(sig);
    errno = saved;
}

static int term_take(int t, const struct sigaction *prog_now)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_term;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    term_prog[t] = *prog_now;
    term_written[t] = 0;
    __atomic_store_n(&term_state[t], TERM_TAKEN, __ATOMIC_RELEASE);
    if (ot_sig_real(term_sigs[t], &sa, NULL) != 0) {
        __atomic_store_n(&term_state[t], TERM_GONE, __ATOMIC_RELEASE);
        return -1;
    }
    return 0;
}

static int at_default(const struct sigaction *p)
{
    return !(p->sa_flags & SA_SIGINFO) && p->sa_handler == SIG_DFL;
}

int ot_sigend_install(int (*wake)(int), int except)
{
    int on = 0;
    term_wake = wake;
    term_pid = getpid();
    for (int t = 0; t < 2; t++) {
        struct sigaction p;
        if (term_sigs[t] == except || ot_sig_real(term_sigs[t], NULL, &p) != 0)
            continue;
        if (!at_default(&p) || term_take(t, &p) != 0)
            __atomic_store_n(&term_state[t], TERM_GONE, __ATOMIC_RELEASE);
        on = 1;
    }
    return on;
}

void ot_sigend_written(int sig)
{
    int t = term_index(sig);
    if (t >= 0)
        term_written[t] = 1;
}

/* The program's sigaction(SIGTERM or SIGINT) once the tracer watches it. While taken: SIG_DFL set again keeps
 * it (the program asks for what the handler does); anything else is the program's from then on. While the
 * program's: SIG_DFL takes it again, read back as the program set it. */
static int term_sigaction(int t, const struct sigaction *act, struct sigaction *old)
{
    int sig = term_sigs[t];
    if (__atomic_load_n(&term_state[t], __ATOMIC_ACQUIRE) != TERM_TAKEN) {
        /* Not in another process: a vfork child shares this memory (Python's subprocess resets every handler
         * to SIG_DFL there before its exec), and taking the signal there marked it taken in the parent, whose
         * own disposition stayed its handler: Python's exit then raised SIGINT into it after finalizing, and
         * crashed (SIGSEGV in _PyEval_SignalReceived). */
        if (!act || !at_default(act) || getpid() != term_pid)
            return ot_sig_real(sig, act, old);
        struct sigaction was;
        if (ot_sig_real(sig, NULL, &was) != 0)
            return -1;
        if (term_take(t, act) != 0)
            return ot_sig_real(sig, act, old);
        if (old)
            *old = was;
        return 0;
    }
    struct sigaction was = term_prog[t];
    if (act && !at_default(act)) {
        int rc = ot_sig_real(sig, act, NULL);
        if (rc != 0)
            return rc;
        __atomic_store_n(&term_state[t], TERM_GONE, __ATOMIC_RELEASE);
    } else if (act) {
        term_prog[t] = *act;
    }
    if (old)
        *old = was;
    return 0;
}

static int term_watched(int sig)
{
    int t = term_index(sig);
    return t >= 0 && __atomic_load_n(&term_state[t], __ATOMIC_ACQUIRE) != TERM_NONE ? t : -1;
}

int ot_sigchain_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int t = term_watched(sig);
    if (t >= 0)
        return term_sigaction(t, act, old);
    if (sig <= 0 || sig != __atomic_load_n(&chained_sig, __ATOMIC_ACQUIRE))
        return ot_sig_real(sig, act, old);
    /* Signals blocked and one writer at a time: sigaction may be called from a handler. */
    sigset_t all, mask;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &mask);
    while (__atomic_exchange_n(&writer_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    int c = __atomic_load_n(&cur, __ATOMIC_ACQUIRE), rc = 0;
    struct sigaction was = prog[c];
    if (act) {
        prog[!c] = *act;
        __atomic_store_n(&cur, !c, __ATOMIC_RELEASE);
        rc = install_ours(sig, act);
    }
    __atomic_store_n(&writer_lock, 0, __ATOMIC_RELEASE);
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    if (rc == 0 && old)
        *old = was;
    return rc;
}

/* glibc's signal(): BSD semantics, the signal blocked in its handler, calls restarted. */
__sighandler_t ot_sigchain_signal(int sig, __sighandler_t handler)
{
    if (sig <= 0 || (sig != __atomic_load_n(&chained_sig, __ATOMIC_ACQUIRE) && term_watched(sig) < 0)) {
        static void *real;
        void *fn = ot_real_next(&real, "signal");
        if (!fn) {
            fn = (void *)bsd_signal; /* glibc's signal() under its other name */
            __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
        }
        return ((__sighandler_t(*)(int, __sighandler_t))fn)(sig, handler);
    }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sig > 0 && sig < NSIG)
        sigaddset(&sa.sa_mask, sig);
    if (ot_sigchain_sigaction(sig, &sa, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

/* exit() from a signal handler (walk 7, #35: a SIGALRM handler calling exit(3) while the program allocated hung
 * or aborted in malloc about half the time under the exit snapshot). The handler's frame is found on this
 * thread's stack by the return address the kernel put there, the C library's sigreturn trampoline (x86-64:
 * the sa_restorer of any installed handler); the frame's saved context gives the interrupted address. */
#if defined(__x86_64__)
static uintptr_t sigreturn_trampoline(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig == SIGKILL || sig == SIGSTOP || ot_sig_real(sig, NULL, &sa) != 0)
            continue;
        if (sa.sa_restorer &&
            ((sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN)))
            return (uintptr_t)sa.sa_restorer;
    }
    return 0;
}

/* The address the innermost signal handler on this stack interrupted; 0 when none is found. */
static uintptr_t interrupted_at(void)
{
    uintptr_t tramp = sigreturn_trampoline();
    uint64_t top = ot_stack_top();
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (!tramp || !top || here >= top)
        return 0;
    for (const uintptr_t *w = (const uintptr_t *)here; (uintptr_t)(w + 1) + sizeof(ucontext_t) <= top; w++) {
        if (*w != tramp)
            continue;
        const ucontext_t *uc = (const ucontext_t *)(w + 1);
        uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP], pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        if (sp > (uintptr_t)w && sp < top && pc) /* the interrupted code's stack lies above its frame */
            return pc;
    }
    return 0;
}

static int same_module(uintptr_t pc, const void *known)
{
    Dl_info a, b;
    return dladdr((void *)pc, &a) && dladdr(known, &b) && a.dli_fbase == b.dli_fbase;
}
#endif

int ot_exit_here_safe(const char **why)
{
    if (ot_self.busy) {
        *why = "exit() was called while this thread was inside the tracer (from a signal handler)";
        return 0;
    }
#if defined(__x86_64__)
    uintptr_t pc = interrupted_at();
    if (!pc)
        return 1;
    /* Stopped at a system call (a wait, a sleep, a read), the interrupted code holds no lock of ours or of
     * malloc's; the program's own code holds none either. */
    const unsigned char *insn = (const unsigned char *)pc;
    if (insn[-2] == 0x0f && insn[-1] == 0x05)
        return 1;
    /* The driver's own function: dlsym(RTLD_DEFAULT) would give the tracer's wrapper, preloaded first, and an
     * interrupted driver call (its lock held) then passed as safe: the exit snapshot's cuMemGetInfo hung. */
    void *driver = ot_real.cuMemAlloc_v2;
    if (same_module(pc, (const void *)ot_exit_here_safe) || same_module(pc, (const void *)malloc) ||
        same_module(pc, (const void *)dladdr) || (driver && same_module(pc, driver))) {
        *why = "exit() was called from a signal handler that interrupted the C library, the loader, the driver "
               "or the tracer, whose locks the interrupted code may hold";
        return 0;
    }
#endif
    return 1;
}
