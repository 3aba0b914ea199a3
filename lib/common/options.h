/* The options: one table, read once from the environment (options.c). */
#ifndef OOMTRACE_COMMON_OPTIONS_H
#define OOMTRACE_COMMON_OPTIONS_H
#include <stddef.h>

struct ot_options {
    int disabled;          /* OOMTRACE_DISABLE */
    size_t ring_bytes;     /* OOMTRACE_RING: compressed bytes the event ring may hold */
    char dir[512];         /* OOMTRACE_DIR */
    int dir_given;         /* the directory is OOMTRACE_DIR's, not the default (unset, empty or refused) */
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
    int huge_pages;        /* OOMTRACE_HUGE_PAGES: a hot thread's tables move onto 2 MiB pages (common/tables.h) */
    int lock_owner;        /* OOMTRACE_LOCK_OWNER: a thread that records alone may own the lock (record/lock.h) */
};
extern struct ot_options ot_opt;
void ot_options_load(void);
#endif
