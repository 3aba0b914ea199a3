/* oomtrace public API.
 *
 * liboomtrace.so is loaded with LD_PRELOAD and records every device allocation and free with its
 * backtrace. These two calls let a program label its phases and ask for a snapshot. They are safe to
 * call whether or not the library is preloaded: the inline wrappers below look the library up at run
 * time (dlsym(RTLD_DEFAULT)) and do nothing when it is absent, so a program needs no link flag.
 *
 * Both calls are thread-safe, take no GIL and never fail the caller; they return 0 on success and -1
 * when the tracer is absent or disabled. Define OOMTRACE_NO_INLINE to get only the prototypes
 * (for code linked directly against liboomtrace.so). */
#ifndef OOMTRACE_H
#define OOMTRACE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Adds a marker to the event stream, e.g. "step 1282 seq_len=2048". The label is copied (at most
 * 255 bytes are kept, cut at a UTF-8 character's boundary). The report shows the last markers before the peak
 * and before the failure.
 * Cost: one event, no backtrace. */
int oomtrace_mark(const char *label);

/* Writes a snapshot now, into OOMTRACE_DIR, with trigger "api" (its file is named ...-N-dump.oomt) and the
 * given reason (may be NULL).
 * Returns 0 when the file was written, -1 otherwise (one line on stderr says why). */
int oomtrace_dump(const char *reason);

/* The framework layer, called by the Python companion that liboomtrace.so starts in Python processes
 * (through ctypes); other callers may use it the same way. payload is an OT_SEC_FRAMEWORK payload
 * (docs/FORMAT.md, FRAMEWORK: allocator segments, blocks, statistics and settings); it is copied (at most
 * 256 MiB) and written, unparsed, into every later snapshot, replacing the previous one.
 * Returns 0 when kept. */
int oomtrace_framework_state(const void *payload, size_t len);

/* A framework refused an allocation of request_bytes on device (PyTorch's OOM observer, JAX/XLA
 * RESOURCE_EXHAUSTED, CuPy OutOfMemoryError). Keeps payload as above (when len > 0), then writes the
 * fatal snapshot now: trigger "framework-oom", the request in its failure record, and the driver-level
 * OOM snapshots written since the previous framework OOM listed as its probes. Returns 0 when written. */
int oomtrace_framework_oom(const char *framework, unsigned long long request_bytes, int device,
                           const void *payload, size_t len);

#ifndef OOMTRACE_NO_INLINE
#include <dlfcn.h>

static inline int oomtrace_mark_if_loaded(const char *label)
{
    int (*f)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "oomtrace_mark");
    return f ? f(label) : -1;
}

static inline int oomtrace_dump_if_loaded(const char *reason)
{
    int (*f)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "oomtrace_dump");
    return f ? f(reason) : -1;
}
#endif

#ifdef __cplusplus
}
#endif
#endif
