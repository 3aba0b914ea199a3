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
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "capture/backtrace.h"
#include "capture/modules.h"
#include "capture/stacks.h"
#include "common/defs.h"

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
void walk_hop_scratch(next_fn next, void *arg);

struct probe {
    int levels;              /* plain C frames still to add */
    void (*hop)(next_fn, void *); /* a frame of another shape, half-way down */
    int hop_at;
    int ours, theirs;
    int walk_only;           /* the leaf walks with ot_native_walk alone (see test_walk_replays_whole_walks) */
    int want;                /* frames the leaf's walk asks for; 0: 80 */
    int intern;              /* the leaf interns ot_backtrace's frames: id with the walk's hint, fresh without */
    uint32_t id, fresh;
    int hinted;
    uint64_t our[OT_MAX_FRAMES], their[OT_MAX_FRAMES];
    long masks_in_walk, masks_in_backtrace;
};

static volatile int sink;

__attribute__((noinline)) static void leaf(struct probe *p)
{
    if (p->intern) { /* the tracer's entry point alone: the walks replay one another from the same start */
        uint64_t frames[OT_MAX_FRAMES];
        unsigned flags = 0;
        int n = ot_backtrace(frames, 64, &flags);
        p->hinted = ot_stack_hint != NULL; /* the walk replayed its memo */
        p->id = ot_stack_intern(frames, n, flags);
        ot_stack_hint = NULL;
        p->fresh = ot_stack_intern(frames, n, flags);
        return;
    }
    p->theirs = unw_backtrace((void **)p->their, 80);
    long before = masks;
    p->ours = ot_native_walk(p->our, p->want ? p->want : 80);
    p->masks_in_walk = masks - before;
    if (p->walk_only)
        return;
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

/* Replay (ot_native_walk reuses the steps of the thread's previous walk where they still hold): walks
 * that share some frames with the one before and differ in others, in every mix, each checked against
 * libunwind. via_a and via_b have the same frame size, so a stack through one reaches the leaf with the
 * same rsp as through the other: the frames inside are the same states, and only the return address
 * into via_a or via_b tells the two stacks apart. */
__attribute__((noinline)) static void via_a(struct probe *p)
{
    level(p);
    sink++;
}

__attribute__((noinline)) static void via_b(struct probe *p)
{
    level(p);
    sink += 2;
}

/* A frame found through rbp (alloca makes GCC keep a frame pointer) whose rbp moves with pad while the
 * frames below it stay where they were: 16 * pad bytes more above it, 16 * pad bytes less in it. A replay
 * that ignored rbp would take the previous walk's caller for this one's. */
__attribute__((noinline)) static void fp_frame(struct probe *p, int pad, void (*via)(struct probe *))
{
    volatile char *room = __builtin_alloca(16 * (size_t)(3 - pad) + 16);
    room[0] = 0;
    via(p);
    sink++;
}

/* Two callers of fp_frame with the same frames: a stack through one and a stack through the other differ
 * only in that return address, which a replay that ignored rbp would read from where the previous walk
 * found it (the alloca'd room still holds it). */
__attribute__((noinline)) static void padded_a(struct probe *p, int pad, void (*via)(struct probe *))
{
    volatile char *room = __builtin_alloca(16 * (size_t)pad + 16);
    room[0] = 0;
    fp_frame(p, pad, via);
    sink++;
}

__attribute__((noinline)) static void padded_b(struct probe *p, int pad, void (*via)(struct probe *))
{
    volatile char *room = __builtin_alloca(16 * (size_t)pad + 16);
    room[0] = 1;
    fp_frame(p, pad, via);
    sink += 2;
}

static void padded(struct probe *p, int pad, void (*via)(struct probe *), int which)
{
    (which ? padded_b : padded_a)(p, pad, via);
}

static void test_walk_replay_follows_changes(void **state)
{
    (void)state;
    void (*hops[])(next_fn, void *) = {NULL, walk_hop_expr, walk_hop_drap};
    unsigned x = 12345;
    for (int i = 0; i < 600; i++) {
        x = x * 1103515245u + 12345u;
        int depth = (int)(x >> 8) % 4 * 3, pad = (int)(x >> 12) % 3;
        struct probe p = {.levels = depth, .hop = hops[(x >> 16) % 3], .hop_at = depth / 2};
        padded(&p, pad, (x >> 20) & 1 ? via_a : via_b, (x >> 24) & 1);
        check_same(&p);
        /* the same stack again: all of it from the previous walk */
        struct probe q = {.levels = depth, .hop = p.hop, .hop_at = depth / 2};
        padded(&q, pad, (x >> 20) & 1 ? via_a : via_b, (x >> 24) & 1);
        check_same(&q);
    }
}

/* Walks from one place, one after another, as a loop that allocates makes them: the whole previous walk
 * is replayed when the stack below is the same (same depth, same callers), and must be given up where it
 * is not - another caller at the same depth (via_a, via_b), a frame found through an rbp that moved (pad),
 * a frame of another shape. Now and then the same stack with a want that cuts the walk short, then the
 * full one again: a walk that stopped at a smaller want must not end a larger one there. */
static void test_walk_replays_whole_walks(void **state)
{
    (void)state;
    void (*hops[])(next_fn, void *) = {NULL, walk_hop_expr, walk_hop_drap};
    unsigned x = 777;
    for (int i = 0; i < 2000; i++) {
        x = x * 1103515245u + 12345u;
        int depth = 6 + (int)(x >> 8) % 2 * 3, pad = (int)(x >> 12) % 2, cut = (x >> 28) % 4 == 0;
        for (int k = 0; k <= 2 * cut; k++) {
            struct probe p = {.levels = depth, .hop = hops[(x >> 16) % 3], .hop_at = depth / 2, .walk_only = 1,
                              .want = k == 1 ? 5 : 0};
            padded(&p, pad, (x >> 20) & 1 ? via_a : via_b, (x >> 24) & 1);
            if (k != 1) {
                check_same(&p);
                continue;
            }
            assert_int_equal(p.ours, 5);
            for (int f = 1; f < 5; f++)
                assert_true(p.our[f] == p.their[f]);
        }
    }
}

/* The previous walk replayed (backtrace.c: struct memo) only while the slots it read still hold what they
 * held: one place walked six times (its walks settle on the same look-ups, then one keeps its slots), then
 * another with the same rsp and rbp at the start (walk_hop_scratch leaves the same rbp in both) that
 * differs only in one return address (via_a, via_b: the same frame size) or in fp_frame's rbp and its
 * caller (pad, which). */
static void test_walk_replay_checks_its_slots(void **state)
{
    (void)state;
    for (int r = 0; r < 20; r++) {
        const int pad = r & 1, which = r >> 1 & 1, other = r >> 2 & 1;
        for (int k = 0; k < 6; k++) {
            struct probe p = {.levels = 6, .hop = walk_hop_scratch, .hop_at = 3, .walk_only = 1};
            padded(&p, pad, via_a, which);
            check_same(&p);
        }
        struct probe q = {.levels = 6, .hop = walk_hop_scratch, .hop_at = 3, .walk_only = 1};
        if (other)
            padded(&q, !pad, via_a, !which);
        else
            padded(&q, pad, via_b, which);
        check_same(&q);
    }
}

/* A walk that replays the previous one (its memo) names the stack interned from it last time to the
 * intern that follows (backtrace.c: struct walker's stack); runs of walks from one place, then another
 * whose frames differ in one return address or further out, each interned with the hint and without it:
 * the same id. The leaf is reached through walk_lib_a.so, so that ot_backtrace keeps the frames outside it
 * (it drops the leading ones of its own module, which here is the test's). Fails when the memo's stack id
 * outlives a change of the memo. */
static void lib_path(char *out, size_t cap, const char *name);

/* walk_lib_a.so loaded (*h) and its walk_lib_hop */
static void (*lib_hop(void **h))(next_fn, void *)
{
    char a[PATH_MAX];
    lib_path(a, sizeof a, "walk_lib_a.so");
    *h = dlopen(a, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(*h);
    void (*hop)(next_fn, void *) = (void (*)(next_fn, void *))dlsym(*h, "walk_lib_hop");
    assert_non_null(hop);
    return hop;
}

static void test_replayed_walk_names_its_stack(void **state)
{
    (void)state;
    void *h;
    void (*hop)(next_fn, void *) = lib_hop(&h);
    int hinted = 0, other = 0;
    uint32_t first = 0;
    for (int r = 0; r < 24; r++) {
        const int pad = r & 1, which = r >> 1 & 1, via = r >> 2 & 1;
        for (int k = 0; k < 5; k++) {
            struct probe p = {.levels = 6, .hop = hop, .hop_at = 0, .intern = 1};
            padded(&p, pad, via ? via_b : via_a, which);
            assert_int_not_equal(p.fresh, 0);
            assert_int_equal(p.id, p.fresh);
            hinted += p.hinted;
            if (!first)
                first = p.id;
            other += p.id != first; /* (pad moves an rbp, not a return address: the same stack) */
        }
    }
    assert_true(hinted >= 24); /* each run's later walks replayed */
    assert_true(other >= 24);  /* and the places' stacks differ */
    dlclose(h);
}

/* Places walked in turn, as a step allocates from a hundred (backtrace.c: struct place_memo): each place's
 * walk is kept and replayed the next time the thread starts a walk there, whatever ran in between, when
 * every slot it read holds what it held. Eight places start at the same rsp and rbp (walk_hop_scratch)
 * and differ in one return address (via_a, via_b), or in fp_frame's rbp and its caller (pad, which), so
 * they share the memos' key until the memos name a slot that tells some apart, and the rest is the
 * check's. In rotation, then at random; each walk against libunwind, and each place's stack interned with
 * the hint and without it: the same id. Fails when a place memo outlives a change of a slot it read, or
 * its stack id a change of the memo. */
static void test_place_memos_check_their_slots(void **state)
{
    (void)state;
    void *h;
    void (*hop)(next_fn, void *) = lib_hop(&h);
    enum { PLACES = 8 };
    uint32_t ids[PLACES] = {0};
    int hinted = 0;
    unsigned x = 2718;
    for (int i = 0; i < 600; i++) {
        const int place = i < 6 * PLACES ? i % PLACES : (int)((x = x * 1103515245u + 12345u) >> 10) % PLACES;
        const int pad = place & 1, which = place >> 1 & 1, via = place >> 2 & 1;
        struct probe p = {.levels = 6, .hop = walk_hop_scratch, .hop_at = 3, .walk_only = 1};
        padded(&p, pad, via ? via_b : via_a, which);
        check_same(&p);
        struct probe q = {.levels = 6, .hop = hop, .hop_at = 0, .intern = 1};
        padded(&q, pad, via ? via_b : via_a, which);
        assert_int_not_equal(q.fresh, 0);
        assert_int_equal(q.id, q.fresh);
        if (!ids[place])
            ids[place] = q.id;
        assert_int_equal(q.id, ids[place]); /* (pad moves an rbp, not a return address: the same stack) */
        hinted += q.hinted;
    }
    assert_true(hinted >= 500); /* the places' walks replayed their memos */
    int distinct = 0;
    for (int k = 0; k < PLACES; k++)
        for (int j = 0; j < k; j++)
            distinct += ids[k] != ids[j];
    assert_true(distinct > 0);
    dlclose(h);
}

/* Walks from many places in turn, as a training step allocates from a hundred (the forward's layers, the
 * backward, the optimizer): the previous walk is rarely this one's, and the walk looks the state where it
 * leaves it up among the thread's kept walks (backtrace.c, state_find), then replays that one. The state
 * found is only as good as the slots still holding what that walk read: places that share their inner
 * frames and differ further out (the depth, another caller at the same depth, a frame found through an
 * rbp that moved, a frame of another shape), in a fixed rotation and then at random, each checked
 * against libunwind. */
static void test_walk_many_places(void **state)
{
    (void)state;
    void (*hops[])(next_fn, void *) = {NULL, walk_hop_expr, walk_hop_drap};
    enum { PLACES = 48 };
    unsigned x = 4242;
    for (int i = 0; i < 3 * PLACES + 3000; i++) {
        int place = i < 3 * PLACES ? i % PLACES : (int)((x = x * 1103515245u + 12345u) >> 10) % PLACES;
        int depth = 4 + place % 4 * 2, pad = place / 4 % 3, which = place / 12 % 2, via = place / 24;
        struct probe p = {.levels = depth, .hop = hops[place % 3], .hop_at = depth / 2, .walk_only = i % 7 != 0};
        padded(&p, pad, via ? via_a : via_b, which);
        check_same(&p);
    }
}

/* A library unloaded, and another loaded at the same place: the rules kept for the first (by return
 * address) must not be used for the second. walk_lib_a.so and walk_lib_b.so put walk_lib_hop and its
 * return address at the same offsets, with frames of different sizes (tests/unit/walk_lib.S). */
__attribute__((noinline)) static void through_lib(void *handle, struct probe *p)
{
    void (*hop)(next_fn, void *) = (void (*)(next_fn, void *))dlsym(handle, "walk_lib_hop");
    assert_non_null(hop);
    hop(descend, p);
    sink++;
}

static void lib_path(char *out, size_t cap, const char *name)
{
    char exe[PATH_MAX - 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    assert_non_null(slash);
    *slash = 0;
    snprintf(out, cap, "%s/%s", exe, name);
}

/* On a thread of its own: its first walk is the one through walk_lib_a.so, so its kept steps are the ones
 * every later walk follows first (backtrace.c: w->start), and the last walk reaches walk_lib_hop's kept
 * step by following them, not only by looking its address up: both must be forgotten at the unload. */
struct unload_walks {
    struct probe p[3];
    void *at_a;
    int setup_ok;
};

/* (cmocka's asserts belong to the main thread: this one only walks, and says whether its setup held) */
static void *after_unload(void *arg)
{
    struct unload_walks *u = arg;
    char a[PATH_MAX], b[PATH_MAX];
    lib_path(a, sizeof a, "walk_lib_a.so");
    lib_path(b, sizeof b, "walk_lib_b.so");
    void *h = dlopen(a, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    void *at_a = u->at_a = dlsym(h, "walk_lib_hop");
    struct probe *p = u->p;
    uint64_t gen = 0;
    for (int k = 0; k < 3; k++) { /* one call site for all three walks: the same return addresses */
        if (k == 2) {
            gen = ot_modules_generation();
            void *again = dlopen(a, RTLD_NOW | RTLD_LOCAL); /* a second reference: unloads nothing */
            if (dlclose(again) != 0 || ot_modules_generation() != gen)
                return NULL;
            if (dlclose(h) != 0 || ot_modules_generation() == gen) /* this one did */
                return NULL;
            h = dlopen(b, RTLD_NOW | RTLD_LOCAL);
            if (!h)
                return NULL;
            if (dlsym(h, "walk_lib_hop") != at_a)
                print_message("walk_lib_b.so was not loaded where walk_lib_a.so was: the stale case did not arise\n");
        }
        p[k] = (struct probe){.levels = 6};
        through_lib(h, &p[k]); /* the first walk keeps the rule for walk_lib_hop's return address */
    }
    u->setup_ok = dlclose(h) == 0;
    return NULL;
}

static void test_walk_after_unload(void **state)
{
    (void)state;
    static struct unload_walks u;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, after_unload, &u), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(u.setup_ok);
    struct probe *p = u.p;
    void *at_a = u.at_a;
    check_same(&p[1]);
    /* libunwind 1.6 keeps its own rules across the unload (it reads walk_lib_b's frame with walk_lib_a's
     * size), so the last walk is checked against the one through walk_lib_a.so instead: the same frames
     * up to through_lib's caller, whose call site the compiler may have copied for k == 2. */
    assert_int_equal(p[2].ours, p[1].ours);
    int in_lib = -1;
    for (int i = 0; i < p[1].ours; i++)
        if (p[1].our[i] > (uint64_t)(uintptr_t)at_a && p[1].our[i] < (uint64_t)(uintptr_t)at_a + 0x18)
            in_lib = i;
    assert_true(in_lib > 0 && in_lib + 2 < p[1].ours);
    for (int i = 0; i <= in_lib + 1; i++)
        assert_true(p[2].our[i] == p[1].our[i]);
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
        cmocka_unit_test(test_walk_replay_follows_changes),
        cmocka_unit_test(test_walk_replays_whole_walks),
        cmocka_unit_test(test_walk_replay_checks_its_slots),
        cmocka_unit_test(test_replayed_walk_names_its_stack),
        cmocka_unit_test(test_walk_many_places),
        cmocka_unit_test(test_place_memos_check_their_slots),
        cmocka_unit_test(test_walk_after_unload),
        cmocka_unit_test(test_backtrace_after_thread_exit_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
