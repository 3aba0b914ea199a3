/* Fork and the loader's lock. dl_iterate_phdr holds glibc's lock on the list of loaded objects
 * (dl_load_write_lock), and fork does not reset that lock in the child (glibc 2.36 resets dl_load_lock
 * only). A fork while one of the tracer's walks is inside it gives the child a lock held by a thread that
 * does not exist there: the child hangs at its next dlopen, dlclose or libunwind backtrace, the last with
 * every signal blocked. So the tracer's walks are readers of one lock, and the fork handler takes it as
 * the writer: fork waits for the walks in progress (each a module list or one backtrace, short) and no
 * walk starts until the child exists. The program's own walks are its own; glibc has the same window
 * for them. */
#include <pthread.h>

#include "capture/loader.h"
#include "common/self.h"

/* Writer-preferring: a fork is not starved by threads that keep unwinding through libunwind. */
static pthread_rwlock_t loader_rw = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
/* The thread whose fork holds the lock as the writer: written only while held, by its holder. Two threads
 * may fork at once; the second waits in prepare, and one that skips the lock must not release the other's. */
static uint32_t fork_holder;

void ot_loader_enter(void)
{
    /* Not recursive: a walk inside a walk (a signal handler on this thread) stays inside the first. */
    if (ot_self.in_loader++ == 0)
        pthread_rwlock_rdlock(&loader_rw);
}

void ot_loader_leave(void)
{
    if (--ot_self.in_loader == 0)
        pthread_rwlock_unlock(&loader_rw);
}

void ot_loader_fork_prepare(void)
{
    /* A fork from a signal handler that interrupted this thread's own walk would wait for itself. */
    if (ot_self.in_loader == 0 && pthread_rwlock_wrlock(&loader_rw) == 0)
        __atomic_store_n(&fork_holder, ot_tid(), __ATOMIC_RELAXED);
}

void ot_loader_fork_parent(void)
{
    if (__atomic_load_n(&fork_holder, __ATOMIC_RELAXED) == ot_tid()) {
        __atomic_store_n(&fork_holder, 0, __ATOMIC_RELAXED);
        pthread_rwlock_unlock(&loader_rw);
    }
}

void ot_loader_fork_child(void)
{
    /* The child is one thread, and the forking thread's walk, if any, was interrupted on this thread. */
    pthread_rwlock_t fresh = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
    loader_rw = fresh;
    __atomic_store_n(&fork_holder, 0, __ATOMIC_RELAXED);
    if (ot_self.in_loader)
        pthread_rwlock_rdlock(&loader_rw);
}
