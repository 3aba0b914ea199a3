/* Declarations shared by the files of liboomtrace.so. Nothing here is exported: the library is built
 * with -fvisibility=hidden and exports only the driver entry points it wraps, dlsym, dlclose (an unload
 * starts a new modules' generation, lib/intercept/dlclose.c), the exec family, and the public oomtrace_* API. */
#ifndef OOMTRACE_INTERNAL_H
#define OOMTRACE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "oomtrace_format.h"

#define OT_EXPORT __attribute__((visibility("default")))
#define OT_LIKELY(x) __builtin_expect(!!(x), 1)
#define OT_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define OT_MAX_DEVICES 64
#define OT_MAX_FRAMES 256
#define OT_LABEL_MAX 256
#define OT_VERSION "0.1.0"

/* ---- common/options.c: one table, read once from the environment ---- */
struct ot_options {
    int disabled;          /* OOMTRACE_DISABLE */
    size_t ring_bytes;     /* OOMTRACE_RING: compressed bytes the event ring may hold */
    char dir[512];         /* OOMTRACE_DIR */
    int dump_exit;         /* OOMTRACE_DUMP contains "exit" */
    int dump_crash;        /* OOMTRACE_DUMP contains "crash" */
    int dump_oom;          /* OOMTRACE_DUMP contains "oom" (default on) */
    int signal;            /* OOMTRACE_SIGNAL: a signal number, 0 = none */
    int depth;             /* OOMTRACE_DEPTH: native frames kept per backtrace */
    int max_snapshots;     /* OOMTRACE_MAX_SNAPSHOTS */
    size_t max_bytes;      /* OOMTRACE_MAX_BYTES: snapshot bytes one process may write */
    int python;            /* OOMTRACE_PYTHON: read Python frames */
    unsigned flush_ms;     /* OOMTRACE_FLUSH_MS: crash-surviving flush interval */
    int quiet;             /* OOMTRACE_QUIET: no "snapshot written" lines */
    int frameworks;        /* OOMTRACE_FRAMEWORKS: start the Python companion in Python processes */
    int tsc;               /* OOMTRACE_TSC: read the clock from the TSC where it is invariant */
};
extern struct ot_options ot_opt;
void ot_options_load(void);

/* ---- common/log.c: one bounded line on stderr, never allocating ---- */
void ot_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ot_log_init(void); /* remembers which file fd 2 is at start (log.c) */

/* ---- common/self.c: the thread's own state, the clock ---- */
struct trace_thread {
    int busy;     /* reentrancy guard: set while the tracer itself runs on this thread */
    uint32_t tid; /* cached gettid() */
    int in_loader; /* inside a walk of the loaded objects (capture/loader.c) */
};
extern __thread struct trace_thread ot_self __attribute__((tls_model("initial-exec")));
uint32_t ot_tid(void);

/* ---- common/clock.c: CLOCK_MONOTONIC nanoseconds, read from the TSC where it is invariant ---- */
uint64_t ot_now_ns(void);  /* the tracer's clock: every time it records (within microseconds of the next) */
uint64_t ot_mono_ns(void); /* clock_gettime(CLOCK_MONOTONIC) itself */
void ot_clock_start(int use_tsc); /* after the options: calibrate the TSC against CLOCK_MONOTONIC */
void ot_clock_forked(void);
int ot_clock_uses_tsc(void);
void ot_clock_tune(uint64_t cal_ns, uint64_t anchor_ns); /* tests: shorter calibration and anchors */
extern uint64_t ot_start_ns; /* CLOCK_MONOTONIC at start-up (set by runtime/init.c) */

/* ---- snapshot/file.c ---- */
extern int ot_dir_warned; /* OOMTRACE_DIR was reported unusable: later failures there stay quiet */

/* ---- runtime/init.c ---- */
int ot_ready(void); /* 1 when the tracer is initialised and enabled */
void ot_after_first_alloc(void);
int ot_exec_begin(void);  /* before an exec: 1 when the crash-surviving file was taken away */
void ot_exec_failed(void); /* after one that returned, when ot_exec_begin said 1 */

/* ---- backtrace.c ---- */
int ot_backtrace(uint64_t *frames, int max, unsigned *flags);
void ot_backtrace_init(void);
int ot_native_walk(uint64_t *frames, int want); /* raw return addresses from the caller out; -1: use libunwind */
/* Bytes of this thread's stack below the caller's frame; SIZE_MAX where unknown (on another stack). The
 * tracer's deep work checks it, so that threads with small stacks (PTHREAD_STACK_MIN, 16 KiB) never
 * overflow in it: libunwind's backtrace needs OT_UNWIND_STACK, a snapshot's writer OT_WRITER_STACK (both
 * with a wide margin over what docs/RELIABILITY.md measured). */
size_t ot_stack_room(void);
#define OT_UNWIND_STACK (24 * 1024)
#define OT_WRITER_STACK (128 * 1024)

/* ---- stacks.c: interned backtraces ---- */
/* A stack's flags carry, above the file's OT_STACK_* bits, the OS thread id it borrowed its Python frames
 * from (OT_STACK_BORROWED; 0 unknown): two lenders with the same frames make two stacks. The snapshot
 * writes the bits below the shift in STACKS, the lender in BORROWED. */
#define OT_STACK_LENDER_SHIFT 8
#define OT_STACK_LENDER_MAX 0xffffffu
uint32_t ot_stack_intern(const uint64_t *frames, int n, unsigned flags); /* caller holds ot_lock */
struct ot_stack_view {
    const uint64_t *frames;
    uint32_t n;
    uint32_t flags;
};
uint32_t ot_stack_count(void);
int ot_stack_get(uint32_t id, struct ot_stack_view *out);

/* ---- the allocation record: kept by record/ (record/record.h), passed by the hooks ---- */
enum ot_ns { OT_NS_DEVPTR = 0, OT_NS_VMM = 1, OT_NS_HOST = 2, OT_NS_ARRAY = 3 };

struct ot_rec {
    uint64_t key; /* address, or handle */
    uint64_t size;
    uint64_t seq;
    uint64_t time_ns;
    uint32_t stack;
    uint32_t tid;
    int16_t device;
    uint8_t cat;
    uint8_t ns;
    uint16_t api;
    uint16_t flags;
    uint32_t refs; /* VMM: references (create, retain) */
    uint32_t maps; /* VMM: live mappings */
};

struct ot_alloc_req {
    uint8_t ns;
    uint8_t cat;
    uint16_t api;
    uint16_t flags;
    int device;
    uint64_t key;
    uint64_t size;
};


/* ---- companion.c: the Python companion (lib/companion/), started at a pending call ---- */
enum ot_poke { OT_POKE_ALLOC = 1, OT_POKE_DRIVER_OOM = 2 };
void ot_companion_poke(enum ot_poke why); /* never from signal context, never with ot_lock held */

/* ---- pyframes.c (with capture/py*.c): Python frames of the calling thread, merged into a native backtrace ---- */
int ot_python_merge(uint64_t *frames, int n, int max, unsigned *flags);
const char *ot_python_version(void); /* "3.12", or "" when the process runs no Python */
void ot_pyframes_forked(void); /* in the child of a fork: forget the parent's pid and threads */
struct ot_buf;
void ot_pyframes_serialize(struct ot_buf *b);

#endif
