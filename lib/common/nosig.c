/* A write of the tracer's own must not end the program. Writing to a pipe whose reader has gone raises
 * SIGPIPE, and writing past RLIMIT_FSIZE raises SIGXFSZ; both end the process by default, and the program
 * did not write (walk 8, #27: `python train.py 2>&1 | head` killed by the "snapshot written" line; #26: a
 * snapshot under `ulimit -f` killed a program that had caught its OOM). The program's dispositions are its
 * own and never changed: both signals are blocked in the writing thread around the writes, so that the
 * write fails with EPIPE / EFBIG instead, and the one a failed write left pending on the thread is taken
 * back with sigtimedwait before the mask is restored. One that was pending before (the program blocks it
 * and has not looked yet) is left pending, as untraced. Only system calls: safe in a signal handler. */
#include <errno.h>
#include <signal.h>
#include <time.h>

#include "common/nosig.h"

static const int sigs[2] = {SIGPIPE, SIGXFSZ};

void ot_nosig_begin(struct ot_nosig *q)
{
    sigset_t block, pending;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    sigaddset(&block, SIGXFSZ);
    int saved = errno;
    q->before = q->raised = 0;
    pthread_sigmask(SIG_BLOCK, &block, &q->old);
    if (sigpending(&pending) == 0)
        for (int i = 0; i < 2; i++)
            if (sigismember(&pending, sigs[i]))
                q->before |= 1 << i;
    errno = saved;
}

void ot_nosig_saw(struct ot_nosig *q, int err)
{
    if (err == EPIPE)
        q->raised |= 1;
    else if (err == EFBIG)
        q->raised |= 2;
}

void ot_nosig_end(struct ot_nosig *q)
{
    int saved = errno;
    for (int i = 0; i < 2; i++) {
        if (!(q->raised & 1 << i) || q->before & 1 << i)
            continue;
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sigs[i]);
        struct timespec now = {0, 0};
        while (sigtimedwait(&one, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &q->old, NULL);
    errno = saved;
}
