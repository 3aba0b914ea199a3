/* What makes a snapshot, in one place: an allocation that ran out of memory, the process's exit,
 * OOMTRACE_SIGNAL, the crash-surviving flush, and oomtrace_dump(). Each calls ot_snapshot_trigger, which
 * says whether this trigger writes now, numbers the snapshot, and runs gather, encode and file. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "capture/backtrace.h"
#include "common/log.h"
#include "common/options.h"
#include "common/self.h"
#include "snapshot/framework.h"
#include "snapshot/snapshot.h"
#include "snapshot/writer.h"

static unsigned snapshot_seq;
static int warned_max, exit_written, last_flush, exit_bounded;
static int oom_written, framework_oom_written; /* this process has its first (framework) out-of-memory snapshot */
static unsigned long long bytes_written; /* by the snapshots of this process, for OOMTRACE_MAX_BYTES */
/* Snapshots being written now (the flush aside), by the process writes_pid; those of this thread. */
static unsigned writing;
static int writes_pid;
static __thread unsigned writing_here __attribute__((tls_model("initial-exec")));

/* A loop of failing allocations must not fill the disk: a count and a byte budget per process, and one line
 * when either ends it. */
static void budget_reached(const char *what)
{
    if (!__atomic_exchange_n(&warned_max, 1, __ATOMIC_RELAXED))
        ot_log("snapshot budget of %s reached; no more snapshots from this process, except its first "
               "out-of-memory one and its exit one", what);
}

void ot_snapshot_last_flush(void)
{
    __atomic_store_n(&last_flush, 1, __ATOMIC_RELEASE);
}

void ot_snapshot_exit_bounded(void)
{
    __atomic_store_n(&exit_bounded, 1, __ATOMIC_RELEASE);
}

void ot_snapshot_forked(void)
{
    exit_written = 0;
    bytes_written = 0; /* the child is a process of its own, with a budget of its own */
    warned_max = 0;
    oom_written = framework_oom_written = 0;
    writing = writing_here = 0; /* the parent's writers are not in the child */
    writes_pid = 0;
    ot_nvml_forked();
    ot_framework_reset_child();
}

/* exit() or an exec while another thread writes its snapshot ended the write with the process, and lost the
 * file (walk 8, #33: a worker thread's out-of-memory while the main thread finishes, or a launcher script's
 * exec of its next stage; the process's first OOM snapshot was the one lost). The wait is bounded: the writer
 * may itself wait for this thread (a lock it holds, interrupted by the signal handler that called exit). A
 * vforked child, whose memory is its parent's, never waits for the parent's writers (the pid differs). */
void ot_snapshot_wait_writes(const char *when)
{
    if (__atomic_load_n(&writes_pid, __ATOMIC_ACQUIRE) != (int)getpid())
        return;
    struct timespec two_ms = {0, 2 * 1000 * 1000};
    for (int waited = 0;; waited += 2) {
        unsigned others = __atomic_load_n(&writing, __ATOMIC_ACQUIRE) - writing_here;
        if (!others || (int)others < 0)
            return;
        if (waited >= OT_WRITES_WAIT_MS) {
            ot_log("%s while %u snapshot%s still being written by other threads after %d s of waiting; "
                   "the process ends without %s",
                   when, others, others == 1 ? " was" : "s were", OT_WRITES_WAIT_MS / 1000,
                   others == 1 ? "it" : "them");
            return;
        }
        nanosleep(&two_ms, NULL);
    }
}

static int wanted(enum ot_trigger trigger)
{
    switch (trigger) {
    case OT_TRIGGER_OOM:
        return ot_opt.dump_oom;
    case OT_TRIGGER_EXIT: /* once, even when exit() is called again from an exit handler */
        return ot_opt.dump_exit && !__atomic_exchange_n(&exit_written, 1, __ATOMIC_ACQ_REL);
    default:
        return 1;
    }
}

/* The snapshots the tool exists for are kept outside the budget: the first out-of-memory one (driver-level, and
 * a framework's own) and the exit one. The budget stops a loop of failures from filling the disk; spent by the
 * program's own dumps (one per epoch) or a batch-size search's probes, it lost the failure that ended the run.
 * They still count in it, and at most three files pass it. */
static int outside_budget(enum ot_trigger trigger)
{
    switch (trigger) {
    case OT_TRIGGER_OOM:
        return !__atomic_load_n(&oom_written, __ATOMIC_ACQUIRE);
    case OT_TRIGGER_FRAMEWORK_OOM:
        return !__atomic_load_n(&framework_oom_written, __ATOMIC_ACQUIRE);
    case OT_TRIGGER_EXIT:
        return 1; /* once per process (wanted) */
    default:
        return 0;
    }
}

static int write_snapshot(enum ot_trigger trigger, const char *reason, const struct trace_failure *mine)
{
    int flush = trigger == OT_TRIGGER_FLUSH;
    unsigned seq = flush ? 0 : __atomic_add_fetch(&snapshot_seq, 1, __ATOMIC_RELAXED);
    int budgeted = !flush && !outside_budget(trigger);
    char what[64];
    if (budgeted && ot_opt.max_snapshots && seq > (unsigned)ot_opt.max_snapshots) {
        snprintf(what, sizeof what, "%d snapshots (OOMTRACE_MAX_SNAPSHOTS)", ot_opt.max_snapshots);
        budget_reached(what);
        return -1;
    }
    unsigned long long used = __atomic_load_n(&bytes_written, __ATOMIC_RELAXED), room = 0;
    if (budgeted && ot_opt.max_bytes) {
        snprintf(what, sizeof what, "%zu bytes (OOMTRACE_MAX_BYTES)", ot_opt.max_bytes);
        if (used >= ot_opt.max_bytes) {
            budget_reached(what);
            return -1;
        }
        room = ot_opt.max_bytes - used;
    }
    /* The last flush after a fatal signal must not wait forever on a lock the crashing thread may hold. */
    int bounded = flush ? __atomic_load_n(&last_flush, __ATOMIC_ACQUIRE)
                        : trigger == OT_TRIGGER_EXIT && __atomic_load_n(&exit_bounded, __ATOMIC_ACQUIRE);
    struct trace_facts *f = malloc(sizeof *f);
    struct trace_sections *secs = malloc(sizeof *secs);
    int rc = -1;
    if (f && secs && ot_gather(f, flush, bounded) == 0) {
        struct trace_failure failed;
        char path[OT_PATH_MAX];
        if (ot_encode(secs, f, trigger, reason, seq, bounded, mine, &failed) == 0) {
            unsigned long long written;
            rc = ot_file_write(secs, trigger, seq, &f->rk, path, room, &written);
            __atomic_add_fetch(&bytes_written, written, __ATOMIC_RELAXED);
            if (rc == OT_FILE_NO_ROOM) {
                budget_reached(what);
                rc = -1;
            }
            if (rc == 0 && trigger == OT_TRIGGER_OOM)
                __atomic_store_n(&oom_written, 1, __ATOMIC_RELEASE);
            if (rc == 0 && trigger == OT_TRIGGER_FRAMEWORK_OOM)
                __atomic_store_n(&framework_oom_written, 1, __ATOMIC_RELEASE);
            /* The framework OOM that may follow lists it as one of its probes. */
            if (rc == 0 && trigger == OT_TRIGGER_OOM && failed.valid)
                ot_probe_note(path, failed.seq, failed.req.size, failed.req.device);
            ot_sections_free(secs);
        }
        ot_gather_free(f);
    }
    free(secs);
    free(f);
    return rc;
}

/* A snapshot asked for on a thread whose stack is too small for the writer is written by a thread of its
 * own, with the default stack, while the asking thread waits: the program's thread sees the same call
 * return, only later. */
struct handoff {
    enum ot_trigger trigger;
    const char *reason;
    const struct trace_failure *mine; /* the asking thread's (it waits) */
    int rc;
};

static void *write_handed(void *arg)
{
    struct handoff *h = arg;
    ot_self.busy = 1; /* this thread's own driver calls (NVML, the framework's) are never recorded */
    h->rc = write_snapshot(h->trigger, h->reason, h->mine);
    return NULL;
}

static int write_on_own_stack(enum ot_trigger trigger, const char *reason, const struct trace_failure *mine)
{
    struct handoff h = {trigger, reason, mine, -1};
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread never runs the program's signal handlers */
    pthread_t t;
    int rc = pthread_create(&t, NULL, write_handed, &h);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        ot_log("this thread's stack is too small to write a snapshot, and no thread could be started for it");
        return -1;
    }
    pthread_join(t, NULL);
    return h.rc;
}

int ot_snapshot_trigger(enum ot_trigger trigger, const char *reason)
{
    return ot_snapshot_trigger_failure(trigger, reason, NULL);
}

int ot_snapshot_trigger_failure(enum ot_trigger trigger, const char *reason, const struct trace_failure *mine)
{
    int saved_errno = errno;
    int was_busy = ot_self.busy;
    ot_self.busy = 1;
    /* The writer opens, reads and writes files (cancellation points), some with the recorder held: a
     * thread cancelled there would leave the lock owned by a thread that no longer exists, and a file half
     * made. A cancel requested meanwhile acts at the program's next cancellation point. */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    int rc = -1;
    int counted = trigger != OT_TRIGGER_FLUSH; /* the flush is waited for by its own lock */
    if (counted) {
        __atomic_store_n(&writes_pid, (int)getpid(), __ATOMIC_RELEASE);
        __atomic_add_fetch(&writing, 1, __ATOMIC_ACQ_REL);
        writing_here++;
    }
    if (wanted(trigger))
        rc = ot_stack_room() < OT_WRITER_STACK ? write_on_own_stack(trigger, reason, mine)
                                                : write_snapshot(trigger, reason, mine);
    if (counted) {
        writing_here--;
        __atomic_sub_fetch(&writing, 1, __ATOMIC_ACQ_REL);
    }
    pthread_setcancelstate(cancel_state, NULL);
    ot_self.busy = was_busy;
    errno = saved_errno;
    return rc;
}
