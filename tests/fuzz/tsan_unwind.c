/* Preloaded ahead of the TSan runtime into traced programs by `make tsan` (tests/fuzz/sanitize.sh).
 *
 * libunwind frees each thread's trace cache from a TSD destructor that re-arms itself until the last of
 * glibc's destructor rounds, and TSan's thread-exit destructor does the same. TSan's key is the older,
 * so in that last round TSan tears the thread down first, then libunwind takes a mutex on it and the
 * TSan runtime crashes: every traced thread that exits would. (Failing libunwind's key instead is no
 * way out: libunwind ignores the error and writes to key 0, which is TSan's.)
 *
 * So libunwind's destructor is wrapped: in the first round the wrapper calls it until it has really
 * freed the cache, while TSan still knows the thread. Other keys pass through untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

typedef int (*key_create_fn)(pthread_key_t *, void (*)(void *));

static pthread_key_t unwind_key;
static void (*unwind_dtor)(void *);

static void unwind_dtor_now(void *cache)
{
    /* A round that only re-armed the key leaves it set again; the one that freed the cache does not. */
    for (int round = 0; round < 64; round++) {
        pthread_setspecific(unwind_key, NULL);
        unwind_dtor(cache);
        if (pthread_getspecific(unwind_key) == NULL)
            return;
    }
}

int pthread_key_create(pthread_key_t *key, void (*destructor)(void *))
{
    static key_create_fn next;
    if (!next)
        next = (key_create_fn)dlsym(RTLD_NEXT, "pthread_key_create");
    Dl_info info;
    if (destructor && !unwind_dtor && dladdr((void *)destructor, &info) && info.dli_fname &&
        strstr(info.dli_fname, "libunwind")) {
        int rc = next(key, unwind_dtor_now);
        if (rc == 0) {
            unwind_key = *key;
            unwind_dtor = destructor;
        }
        return rc;
    }
    return next(key, destructor);
}
