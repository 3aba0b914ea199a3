/* The native walk (lib/capture/backtrace.c, cfi.c) against libunwind: the same return addresses at every
 * depth, through frames of every shape compilers write (tests/unit/walk_hops.S), and none of libunwind's
 * slow path - which masks signals twice per frame - when one of those frames is on the stack. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>
#include <pthread.h>

#include "internal.h"

/* libunwind's slow path masks signals around its cache lock and its module lookups: counted here (the
 * program's definition interposes libc's for libunwind). */
static volatile long masks;
int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    masks++;
    return (int)syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

typedef void (*next_fn)(void *);
void walk_hop_expr(next_fn next, void *arg);
void walk_hop_drap(next_fn next, void *arg);
void walk_hop_nocfi(next_fn next, void *arg);

struct probe {
    int levels;              /* plain C frames still to add */
    void (*hop)(next_fn, void *); /* a frame of another shape, half-way down */
    int hop_at;
    int ours, theirs;
    uint64_t our[OT_MAX_FRAMES], their[OT_MAX_FRAMES];
    long masks_in_walk, masks_in_backtrace;
};

static volatile int sink;

__attribute__((noinline)) static void leaf(struct probe *p)
{
    p->theirs = unw_backtrace((void **)p->their, 80);
    long before = masks;
    p->ours = ot_native_walk(p->our, 80);
    p->masks_in_walk = masks - before;
    uint64_t frames[OT_MAX_FRAMES];
    before = masks;
    unsigned flags = 0;
    sink += ot_backtrace(frames, 64, &flags); /* the tracer's entry point */
    p->masks_in_backtrace = masks - before;
}

static void descend(void *arg);

__attribute__((noinline)) static void level(struct probe *p)
{
    if (p->levels-- <= 0)
        leaf(p);
    else if (p->hop && p->levels == p->hop_at)
        p->hop(descend, p);
    else
        level(p);
    sink++; /* not a tail call */
}

static void descend(void *arg)
{
    level(arg);
    sink++;
}

static void check_same(const struct probe *p)
{
    assert_true(p->ours > 3);
    assert_int_equal(p->ours, p->theirs);
    /* [0] is the return address into leaf() from each call: two call sites, one function */
    assert_true(p->our[0] != p->their[0]);
    for (int i = 1; i < p->ours; i++)
        assert_true(p->our[i] == p->their[i]);
}

static void test_walk_matches_libunwind(void **state)
{
    (void)state;
    for (int depth = 0; depth < 40; depth += 3) {
        struct probe p = {.levels = depth};
        level(&p);
        check_same(&p);
    }
}

static void test_walk_through_expression_frames(void **state)
{
    (void)state;
    void (*hops[])(next_fn, void *) = {walk_hop_expr, walk_hop_drap};
    for (unsigned h = 0; h < 2; h++) {
        for (int depth = 2; depth < 30; depth += 5) {
            struct probe p = {.levels = depth, .hop = hops[h], .hop_at = depth / 2};
            level(&p);
            check_same(&p);
            /* libunwind's fast trace gives up on these frames and walks the slow way; ours does not */
            assert_int_equal(p.masks_in_walk, 0);
            assert_int_equal(p.masks_in_backtrace, 0);
        }
    }
}

static void test_walk_declines_frames_without_unwind_info(void **state)
{
    (void)state;
    struct probe p = {.levels = 10, .hop = walk_hop_nocfi, .hop_at = 5};
    level(&p);
    assert_int_equal(p.ours, -1); /* ot_backtrace then asks libunwind, which follows the frame chain */
}

/* A destructor that runs after the walker's own at thread exit (a later key) and still takes a backtrace,
 * as a library freeing or allocating device memory at thread exit would. */
static pthread_key_t late_key;
static int late_frames = -1;

static void late_destructor(void *arg)
{
    (void)arg;
    uint64_t frames[OT_MAX_FRAMES];
    unsigned flags = 0;
    late_frames = ot_backtrace(frames, 16, &flags);
}

static void *exiting_thread(void *arg)
{
    (void)arg;
    uint64_t frames[OT_MAX_FRAMES];
    unsigned flags = 0;
    sink += ot_backtrace(frames, 16, &flags); /* the thread's walker exists */
    pthread_setspecific(late_key, (void *)1);
    return NULL;
}

static void test_backtrace_after_thread_exit_cleanup(void **state)
{
    (void)state;
    assert_int_equal(pthread_key_create(&late_key, late_destructor), 0); /* created after the walker's */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, exiting_thread, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(late_frames >= 0);
}

int main(void)
{
    ot_backtrace_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_matches_libunwind),
        cmocka_unit_test(test_walk_through_expression_frames),
        cmocka_unit_test(test_walk_declines_frames_without_unwind_info),
        cmocka_unit_test(test_backtrace_after_thread_exit_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
