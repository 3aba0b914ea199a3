/* The unmaps' count (lib/common/unmaps.c) and the exported munmap (lib/intercept/munmap.c), linked into
 * this program as into the library: its munmap is the process's. What a reader relies on to read another
 * thread's memory with plain loads: an unmap moves the count, an unmap waits for a reader inside, a reader
 * that enters while an unmap is under way is told it cannot be sure; and the program's munmap keeps its
 * result and errno. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <dlfcn.h>

#include "common/unmaps.h"

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static char *map_page(void)
{
    char *p = mmap(NULL, page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    p[0] = 42;
    return p;
}

static uint64_t count_now(void)
{
    uint64_t c = ot_unmaps_enter();
    ot_unmaps_leave();
    return c;
}

static void munmap_result_kept(void **state)
{
    (void)state;
    char *p = map_page();
    assert_int_equal(munmap(p, page()), 0);
    errno = 0;
    assert_int_equal(munmap(p + 1, page()), -1); /* not aligned */
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(munmap(map_page(), 0), -1);
    assert_int_equal(errno, EINVAL);
    errno = 1234;
    assert_int_equal(munmap(p, page()), 0); /* unmapped already: not an error, errno untouched */
    assert_int_equal(errno, 1234);
}

static void unmap_moves_count(void **state)
{
    (void)state;
    const uint64_t before = count_now();
    assert_true(before != OT_UNMAPS_UNSURE);
    assert_int_equal(munmap(map_page(), page()), 0);
    const uint64_t after = count_now();
    assert_true(after != OT_UNMAPS_UNSURE);
    assert_true(after > before);
}

struct unmapper {
    char *p;
    int done;
};

static void *unmap_it(void *arg)
{
    struct unmapper *u = arg;
    munmap(u->p, page());
    __atomic_store_n(&u->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *enter_leave(void *arg)
{
    *(uint64_t *)arg = count_now();
    return NULL;
}

/* A reader inside: another thread's munmap does not return (nor unmap) until it leaves. */
static void unmap_waits_for_reader(void **state)
{
    (void)state;
    struct unmapper u = {map_page(), 0};
    const uint64_t c = ot_unmaps_enter();
    assert_true(c != OT_UNMAPS_UNSURE);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, unmap_it, &u), 0);
    struct timespec ms50 = {0, 50 * 1000 * 1000};
    nanosleep(&ms50, NULL);
    assert_int_equal(__atomic_load_n(&u.done, __ATOMIC_ACQUIRE), 0);
    assert_int_equal(*(volatile char *)u.p, 42); /* still mapped: a plain load */
    /* a second reader meanwhile: an unmap is under way */
    uint64_t other = 0;
    pthread_t r;
    assert_int_equal(pthread_create(&r, NULL, enter_leave, &other), 0);
    pthread_join(r, NULL);
    assert_true(other == OT_UNMAPS_UNSURE);
    ot_unmaps_leave();
    pthread_join(t, NULL);
    assert_int_equal(u.done, 1);
    assert_true(count_now() > c);
}

static void unmap_global(void *arg)
{
    int (*fn)(void *, size_t) = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "munmap");
    fn(arg, page());
}

static void unmap_raw(void *arg)
{
    syscall(SYS_munmap, arg, page());
}

/* The process's munmap reaches the count; an unmap that does not (a system call, as a library that binds
 * past the tracer's munmap would make) is told apart. */
static void munmap_reached(void **state)
{
    (void)state;
    assert_int_equal(ot_unmaps_reached(unmap_global, map_page()), 1);
    assert_int_equal(ot_unmaps_reached(unmap_raw, map_page()), 0);
}

/* In a child: its verdict as its exit status, a hang ended by alarm (SIGALRM: not 0). */
static int in_child(void (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static void on_usr1(int sig)
{
    (void)sig;
    munmap(map_page(), page());
}

/* A program's handler that unmaps while its thread reads: it does not wait for the read it interrupted, and
 * from then on no reader is sure (the read may see its memory go). */
static void handler_inside_read(void)
{
    signal(SIGUSR1, on_usr1);
    ot_unmaps_enter();
    raise(SIGUSR1);
    ot_unmaps_leave();
    if (count_now() != OT_UNMAPS_UNSURE)
        _exit(1);
}

static void unmap_from_handler(void **state)
{
    (void)state;
    assert_int_equal(in_child(handler_inside_read), 0);
}

static void *enter_only(void *arg)
{
    (void)arg;
    ot_unmaps_enter(); /* as a read a handler longjmp'd out of: never left */
    return NULL;
}

/* A reader that never leaves: an unmap waits for it a bounded time, then no reader is sure. */
static void lost_reader(void)
{
    pthread_t t;
    pthread_create(&t, NULL, enter_only, NULL);
    pthread_join(t, NULL);
    if (munmap(map_page(), page()) != 0 || count_now() != OT_UNMAPS_UNSURE)
        _exit(1);
    if (munmap(map_page(), page()) != 0) /* and no later unmap waits */
        _exit(2);
}

static void reader_lost(void **state)
{
    (void)state;
    assert_int_equal(in_child(lost_reader), 0);
}

static volatile int hold_go;
static void *enter_hold(void *arg)
{
    (void)arg;
    ot_unmaps_enter();
    while (!__atomic_load_n(&hold_go, __ATOMIC_ACQUIRE))
        sched_yield();
    ot_unmaps_leave();
    return NULL;
}

/* A fork inside a read (from a signal handler, say) while another thread reads too: the child's read ends
 * as the parent's would, its unmaps wait for no reader it does not have (the other thread's is not in the
 * child), and the count is sure again. With the library the child handler is registered at start-up
 * (lib/runtime/init.c), here in main. */
static void leave_then_unmap(void)
{
    ot_unmaps_leave();
    if (munmap(map_page(), page()) != 0)
        _exit(1);
    if (count_now() == OT_UNMAPS_UNSURE)
        _exit(2);
}

static void fork_inside_read(void **state)
{
    (void)state;
    pthread_t t;
    hold_go = 0;
    assert_int_equal(pthread_create(&t, NULL, enter_hold, NULL), 0);
    ot_unmaps_enter();
    int r = in_child(leave_then_unmap);
    ot_unmaps_leave();
    __atomic_store_n(&hold_go, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    assert_int_equal(r, 0);
}

int main(void)
{
    pthread_atfork(NULL, NULL, ot_unmaps_forked);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(munmap_result_kept),      cmocka_unit_test(unmap_moves_count),
        cmocka_unit_test(unmap_waits_for_reader),  cmocka_unit_test(munmap_reached), cmocka_unit_test(unmap_from_handler),
        cmocka_unit_test(reader_lost), cmocka_unit_test(fork_inside_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
