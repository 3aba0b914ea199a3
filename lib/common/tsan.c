/* A program built with ThreadSanitizer instruments its own code and intercepts the C library; the tracer's
 * code is not instrumented, so its locks and atomics are invisible to TSan, while the C library calls it
 * makes under them (memcmp, mmap, snprintf) are seen. Without a word from us, TSan reports the tracer's
 * own data as races and the program exits 66 (walk 8, #25). Its runtime's annotation calls tell it where
 * our synchronization is; weak, they are NULL in every other process, and these calls do nothing. */
#include <stddef.h>

#include "common/tsan.h"

extern void __tsan_acquire(void *addr) __attribute__((weak));
extern void __tsan_release(void *addr) __attribute__((weak));

int ot_tsan_present(void)
{
    return __tsan_acquire != NULL && __tsan_release != NULL;
}

void ot_tsan_acquire(const void *addr)
{
    if (__tsan_acquire)
        __tsan_acquire((void *)addr);
}

void ot_tsan_release(const void *addr)
{
    if (__tsan_release)
        __tsan_release((void *)addr);
}
