/* The unmaps' count (lib/common/unmaps.c) and the exported munmap (lib/intercept/munmap.c), linked into
 * this program as into the library: its munmap is the process's. What a reader relies on to read another
 * thread's memory with plain loads: an unmap moves the count, an unmap waits for a reader inside, a reader
 * that enters while an unmap is under way is told it cannot be sure; and the program's munmap keeps its
 * result and errno. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
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

/* The unmap a signal handler of a reading thread might make: it does not wait for its own thread. */
static void unmap_inside_own_read(void **state)
{
    (void)state;
    ot_unmaps_enter();
    assert_int_equal(munmap(map_page(), page()), 0);
    ot_unmaps_leave();
}

static void munmap_seen(void **state)
{
    (void)state;
    assert_int_equal(ot_unmaps_seen(dlsym(RTLD_DEFAULT, "munmap")), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(munmap_result_kept),      cmocka_unit_test(unmap_moves_count),
        cmocka_unit_test(unmap_waits_for_reader),  cmocka_unit_test(unmap_inside_own_read),
        cmocka_unit_test(munmap_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
