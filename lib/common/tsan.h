/* Telling ThreadSanitizer's runtime, when the program was built with it, of the tracer's own
 * synchronization, which it cannot see (tsan.c). */
#ifndef OOMTRACE_COMMON_TSAN_H
#define OOMTRACE_COMMON_TSAN_H

int ot_tsan_present(void);
void ot_tsan_acquire(const void *addr); /* after reading what another thread published at addr */
void ot_tsan_release(const void *addr); /* before publishing what was written at addr */
#endif
