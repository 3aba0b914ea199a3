/* Unit tests of the recorder's lock (lib/record/lock.h): shared, it excludes and a bounded take gives up;
 * owned, a thread that takes it alone takes it with no exchange, others take the ownership back and still
 * exclude, a signal handler inside the owner's hold gives up at once, threads taking turns in short runs
 * stop owning it, and a forked child starts with no owner. */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/clock.h"
#include "common/self.h"
#include "common/tsan.h"
#include "record/lock.h"

static uint64_t counter;

static void add_one(void)
{
    ot_lock_take();
    uint64_t v = counter;
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* a read and a write apart, so that a second thread inside shows */
    counter = v + 1;
    ot_lock_give();
}

/* Eight threads adding under it lose no update, however they meet (spinning, asleep on the futex, woken
 * by a give): each holds it across a yield now and then, so that the others spin out and sleep. */
static void *adder(void *arg)
{
    int yield_every = (int)(intptr_t)arg;
    for (int i = 0; i < 50000; i++) {
        ot_lock_take();
        uint64_t v = counter;
        if (yield_every && i % yield_every == 0)
            sched_yield();
        counter = v + 1;
        ot_lock_give();
    }
    return NULL;
}

static void add_on_threads(int n, int yield_every)
{
    pthread_t th[8];
    counter = 0;
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&th[i], NULL, adder, (void *)(intptr_t)yield_every), 0);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(counter, (uint64_t)n * 50000);
}

struct lock_try {
    uint64_t within_ns;
    int got, errno_kept;
    uint64_t took_ns;
};

static void *try_briefly(void *arg)
{
    struct lock_try *t = arg;
    errno = 1234; /* the program's: the futex and membarrier calls must leave it */
    uint64_t t0 = ot_mono_ns();
    t->got = ot_lock_take_within(t->within_ns);
    t->took_ns = ot_mono_ns() - t0;
    t->errno_kept = errno == 1234;
    if (t->got == 0)
        ot_lock_give();
    return NULL;
}

static struct lock_try try_on_thread(uint64_t within_ns)
{
    struct lock_try tr = {within_ns, 1, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, try_briefly, &tr), 0);
    pthread_join(t, NULL);
    return tr;
}

static void test_shared_excludes_and_gives_up(void **state)
{
    (void)state;
    ot_lock_owner_init(0);
    add_on_threads(8, 1024);
    struct ot_lock_counts c;
    ot_lock_counts(&c);
    assert_int_equal(c.ownership, 0);
    assert_int_equal(c.owned, 0);
    assert_int_equal(ot_lock.owner, 0);
    /* No sleeper left; whether ThreadSanitizer is here (make tsan's build of this test). */
    assert_int_equal(ot_lock.sleepers, 0);
    assert_int_equal(ot_lock.tsan != 0, ot_tsan_present());

    ot_lock_take();
    struct lock_try tr = try_on_thread(20000000); /* 20 ms */
    assert_int_equal(tr.got, -1);
    assert_true(tr.errno_kept);
    ot_lock_give();
    tr = try_on_thread(20000000);
    assert_int_equal(tr.got, 0);
}

/* Ownership needs membarrier's private expedited barrier, and no ThreadSanitizer (lock.h). */
static int ownership_expected(void)
{
    long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return !ot_tsan_present() && q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* Ownership on, its counts so far in *before; 0 where it cannot be (the case is then skipped). */
static int start_owned(struct ot_lock_counts *before)
{
    ot_lock_owner_init(1);
    ot_lock_counts(before);
    assert_int_equal(before->ownership, ownership_expected());
    if (!before->ownership) {
        print_message("no ownership here (%s): its cases are skipped\n",
                      ot_tsan_present() ? "ThreadSanitizer" : "no membarrier");
        return 0;
    }
    return 1;
}

/* This thread takes it alone until it owns it: then a hold leaves the shared word alone. */
static void own_it(void)
{
    for (int i = 0; i < 1000 && ot_lock.owner != ot_self.lock_slot; i++)
        add_one();
    assert_int_not_equal(ot_self.lock_slot, 0);
    assert_int_equal(ot_lock.owner, ot_self.lock_slot);
}

static void test_owner_takes_without_the_exchange(void **state)
{
    (void)state;
    struct ot_lock_counts before, after;
    if (!start_owned(&before))
        skip();
    own_it();
    ot_lock_take();
    assert_int_equal(ot_lock.held, 0); /* the exchange was not taken */
    assert_int_equal(ot_lock_slots[ot_self.lock_slot].busy, 1);
    ot_lock_give();
    assert_int_equal(ot_lock_slots[ot_self.lock_slot].busy, 0);
    for (int i = 0; i < 100; i++)
        add_one();
    ot_lock_counts(&after);
    assert_true(after.owned >= before.owned + 1);
    assert_true(after.owned_takes >= before.owned_takes + 101);
    /* Turned off: the owner is taken back at the next take by another thread, and none follows. */
    ot_lock_owner_init(0);
    add_on_threads(2, 0);
    assert_int_equal(ot_lock.owner, 0);
    for (int i = 0; i < 1000; i++)
        add_one();
    assert_int_equal(ot_lock.owner, 0);
}

/* The others take the ownership back, and every add counts, however the threads meet. */
static void test_owner_revoked_and_excludes(void **state)
{
    (void)state;
    struct ot_lock_counts before, after;
    if (!start_owned(&before))
        skip();
    add_on_threads(8, 4096);
    add_on_threads(3, 0);
    ot_lock_counts(&after);
    assert_true(after.owned > before.owned);
    assert_true(after.revoked > before.revoked);
    assert_int_equal(ot_lock.sleepers, 0);
}

/* While the owner holds it, another thread's bounded take gives up (keeping errno), and takes it once the
 * owner gave it back, taking the ownership with it. */
static void test_owner_holds_against_a_bounded_take(void **state)
{
    (void)state;
    struct ot_lock_counts before, after;
    if (!start_owned(&before))
        skip();
    own_it();
    ot_lock_counts(&before);
    ot_lock_take();
    struct lock_try tr = try_on_thread(20000000);
    assert_int_equal(tr.got, -1);
    assert_true(tr.errno_kept);
    assert_true(tr.took_ns >= 20000000);
    assert_int_equal(ot_lock.owner, 0); /* taken back, but the owner is still inside */
    assert_int_equal(ot_lock_slots[ot_self.lock_slot].busy, 1);
    ot_lock_give();
    tr = try_on_thread(20000000);
    assert_int_equal(tr.got, 0);
    assert_true(tr.errno_kept);
    ot_lock_counts(&after);
    assert_int_equal(after.revoked, before.revoked + 1);
    assert_int_equal(ot_lock.held, 0);
}

/* A signal handler on the owner's thread, inside the owner's hold: its bounded take gives up at once (the
 * hold cannot end while it waits); outside the hold, it takes the lock. */
static volatile int handler_got;
static volatile uint64_t handler_ns;

static void take_in_handler(int sig)
{
    (void)sig;
    uint64_t t0 = ot_mono_ns();
    handler_got = ot_lock_take_within(1000000000ull);
    handler_ns = ot_mono_ns() - t0;
    if (handler_got == 0)
        ot_lock_give();
}

static void test_owner_interrupted_by_a_handler(void **state)
{
    (void)state;
    struct ot_lock_counts before;
    if (!start_owned(&before))
        skip();
    struct sigaction sa = {0}, old;
    sa.sa_handler = take_in_handler;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    own_it();
    ot_lock_take();
    handler_got = 1;
    raise(SIGUSR1);
    assert_int_equal(handler_got, -1);
    assert_true(handler_ns < 100000000ull); /* at once, not at the deadline */
    assert_int_equal(ot_lock.owner, ot_self.lock_slot); /* still the owner, still inside */
    assert_int_equal(ot_lock_slots[ot_self.lock_slot].busy, 1);
    assert_int_equal(ot_lock.held, 0);
    ot_lock_give();
    handler_got = 1;
    raise(SIGUSR1);
    assert_int_equal(handler_got, 0);
    assert_int_equal(ot_lock.owner, ot_self.lock_slot);
    assert_int_equal(ot_lock_slots[ot_self.lock_slot].busy, 0);
    add_one();
    sigaction(SIGUSR1, &old, NULL);
}

/* A handler inside the owner's own take, after its flag went up and before its hold began (the window an
 * unbounded take there, a fork's prepare, waited in forever): the state the take leaves there is set by hand,
 * as no test can stop the take at that instruction. The handler's unbounded take goes on at once, and so does
 * a second handler's; the interrupted take then resumes and finds itself still the owner. */
static void hung(int sig)
{
    (void)sig;
    static const char m[] = "test_lock: a handler's take inside the owner's take waited for its flag\n";
    ssize_t w = write(2, m, sizeof m - 1);
    (void)w;
    _exit(1);
}

static void take_unbounded_in_handler(int sig)
{
    (void)sig;
    ot_lock_take();
    handler_got = 0;
    ot_lock_give();
}

/* SIGUSR1 takes the lock unbounded, SIGALRM ends a hung test; this thread owns the lock and stands where
 * ot_lock_take_owned stands after its first steps (the mode, then the flag). Returns its slot; skips the test
 * where no thread can own the lock. */
static unsigned enter_take_window(struct sigaction old[2])
{
    struct ot_lock_counts before;
    if (!start_owned(&before))
        skip();
    struct sigaction sa = {0};
    sa.sa_handler = take_unbounded_in_handler;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old[0]), 0);
    sa.sa_handler = hung;
    assert_int_equal(sigaction(SIGALRM, &sa, &old[1]), 0);
    own_it();
    const unsigned s = ot_self.lock_slot;
    ot_self.lock_mode = OT_LOCK_TAKING;
    __atomic_store_n(&ot_lock_slots[s].busy, 1, __ATOMIC_RELAXED);
    return s;
}

static void leave_take_window(const struct sigaction old[2])
{
    sigaction(SIGUSR1, &old[0], NULL);
    sigaction(SIGALRM, &old[1], NULL);
}

static void test_handler_inside_the_owners_take(void **state)
{
    (void)state;
    struct sigaction old[2];
    const unsigned s = enter_take_window(old);
    for (int i = 0; i < 2; i++) { /* a second handler in the same window too (the mode says TAKING again) */
        handler_got = 1;
        alarm(10);
        raise(SIGUSR1);
        alarm(0);
        assert_int_equal(handler_got, 0);
        assert_int_equal(ot_self.lock_mode, OT_LOCK_TAKING);
        assert_int_equal(ot_lock_slots[s].busy, 1);
    }
    assert_int_equal(ot_lock.held, 0);
    assert_int_equal(ot_lock.owner, s); /* not taken back: the take resumes as the owner */
    /* ... and its last steps: still the owner, so it holds the lock, and gives it back */
    assert_int_equal(__atomic_load_n(&ot_lock.owner, __ATOMIC_ACQUIRE), s);
    ot_self.lock_mode = OT_LOCK_OWNED;
    ot_lock_give();
    assert_int_equal(ot_lock_slots[s].busy, 0);
    /* other threads take it as usual, and every add counts (add_on_threads checks) */
    add_on_threads(2, 0);
    add_one();
    assert_int_equal(counter, 2 * 50000 + 1);
    leave_take_window(old);
}

/* Two threads taking turns in runs a little longer than the first run that makes an owner: each ownership
 * earns too few takes to pay for its revocation, so the run needed grows and the revocations stop. */
static volatile int turn;

static void *turn_taker(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int t = 0; t < 400; t++) {
        while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) % 2 != me)
            sched_yield();
        for (int i = 0; i < 100; i++)
            add_one();
        __atomic_add_fetch(&turn, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void test_owner_stops_for_short_turns(void **state)
{
    (void)state;
    struct ot_lock_counts before, after;
    if (!start_owned(&before))
        skip();
    counter = 0;
    turn = 0;
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, turn_taker, (void *)(intptr_t)0), 0);
    assert_int_equal(pthread_create(&b, NULL, turn_taker, (void *)(intptr_t)1), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert_int_equal(counter, 800 * 100);
    ot_lock_counts(&after);
    assert_true(after.revoked - before.revoked >= 1);
    assert_true(after.revoked - before.revoked <= 4);
    assert_true(after.run > 100);
}

/* A fork by the owner: the recorder's fork handlers (runtime/init.c, registered when the library's
 * objects start) hold the lock across it, owned here; the child starts with no owner and a free lock
 * (ot_lock_forked, asked again here in case no handler ran), and its thread owns it again after a run. */
static void test_owner_forked(void **state)
{
    (void)state;
    struct ot_lock_counts before;
    if (!start_owned(&before))
        skip();
    own_it();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ot_lock_forked();
        int ok = ot_lock.owner == 0 && ot_lock.held == 0 && ot_self.lock_slot == 0;
        for (int i = 0; i < OT_LOCK_SLOTS; i++)
            ok = ok && ot_lock_slots[i].busy == 0;
        for (int i = 0; i < 1000; i++)
            add_one();
        ok = ok && ot_self.lock_slot == 1 && ot_lock.owner == 1 && ot_lock.held == 0; /* the first slot again */
        _exit(ok ? 0 : 1);
    }
    assert_int_equal(ot_lock.owner, ot_self.lock_slot);
    assert_int_equal(ot_lock_slots[ot_self.lock_slot].busy, 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    add_one();
}

int main(void)
{
    ot_lock_tsan_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_excludes_and_gives_up),
        cmocka_unit_test(test_owner_takes_without_the_exchange),
        cmocka_unit_test(test_owner_revoked_and_excludes),
        cmocka_unit_test(test_owner_holds_against_a_bounded_take),
        cmocka_unit_test(test_owner_interrupted_by_a_handler),
        cmocka_unit_test(test_handler_inside_the_owners_take),
        cmocka_unit_test(test_owner_stops_for_short_turns),
        cmocka_unit_test(test_owner_forked),
    };
    return cmocka_run_group_tests_name("lock", tests, NULL, NULL);
}
