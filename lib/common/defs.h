/* What every room of the library uses: visibility, branch hints, and the library's fixed bounds. Nothing is
 * exported: the library is built with -fvisibility=hidden and exports only what OT_EXPORT marks (the
 * driver entry points it wraps, dlsym, dlclose, the exec family, and the public oomtrace_* API). */
#ifndef OOMTRACE_COMMON_DEFS_H
#define OOMTRACE_COMMON_DEFS_H

#define OT_EXPORT __attribute__((visibility("default")))
#define OT_LIKELY(x) __builtin_expect(!!(x), 1)
#define OT_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* Reads of the thread's own stack anywhere between its rsp and its top (a kept walk checked at another
 * place: capture/backtrace.c) are sound, but may land in a sanitizer's redzones around a frame's arrays. */
#if defined(__SANITIZE_ADDRESS__)
#define OT_STACK_READS __attribute__((no_sanitize_address))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OT_STACK_READS __attribute__((no_sanitize_address))
#endif
#endif
#ifndef OT_STACK_READS
#define OT_STACK_READS
#endif

/* A line fetched for writing (PREFETCHW: the line comes owned, so the store that follows it needs no second
 * trip; CPUs without it run it as a no-op). __builtin_prefetch(p, 1, 3) emits a plain read prefetch unless
 * the build targets such a CPU (-march). Never faults, whatever p is. */
static inline __attribute__((always_inline)) void ot_prefetch_w(const void *p)
{
#if defined(__x86_64__)
    __asm__ volatile("prefetchw (%0)" ::"r"(p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

#define OT_MAX_DEVICES 64
#define OT_MAX_FRAMES 256
#define OT_LABEL_MAX 256
#define OT_VERSION "0.1.0"
#endif
