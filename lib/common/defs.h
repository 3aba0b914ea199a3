/* What every room of the library uses: visibility, branch hints, and the library's fixed bounds. Nothing is
 * exported: the library is built with -fvisibility=hidden and exports only what OT_EXPORT marks (the
 * driver entry points it wraps, dlsym, dlclose, the exec family, and the public oomtrace_* API). */
#ifndef OOMTRACE_COMMON_DEFS_H
#define OOMTRACE_COMMON_DEFS_H

#define OT_EXPORT __attribute__((visibility("default")))
#define OT_LIKELY(x) __builtin_expect(!!(x), 1)
#define OT_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define OT_MAX_DEVICES 64
#define OT_MAX_FRAMES 256
#define OT_LABEL_MAX 256
#define OT_VERSION "0.1.0"
#endif
