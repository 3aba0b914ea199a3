/* Snapshots: the recorder's state written to one file, in the format of docs/FORMAT.md. */
#ifndef OOMTRACE_SNAPSHOT_H
#define OOMTRACE_SNAPSHOT_H
#include "oomtrace_format.h"

/* The one entry for every trigger (trigger.c): writes a snapshot into OOMTRACE_DIR when the options ask
 * for this trigger (an OOM with OOMTRACE_DUMP containing "oom", the exit once, ...). Not for signal
 * context: the signal and crash paths hand over to a thread. Returns 0 when a file was written. */
int ot_snapshot_trigger(enum ot_trigger trigger, const char *reason);
/* The same for an out-of-memory trigger: the snapshot's FAILURE is this one, the caller's own (an out-of-memory
 * trigger without one writes no FAILURE). */
struct trace_failure;
int ot_snapshot_trigger_failure(enum ot_trigger trigger, const char *reason, const struct trace_failure *failure);

/* The next flush is the last, after a fatal signal: the recorder is waited for at most a second. */
void ot_snapshot_last_flush(void);
/* The exit snapshot is written for a SIGTERM whose handler waits for it: the recorder is waited for at most a
 * second (the thread the signal interrupted may hold it until the handler returns). */
void ot_snapshot_exit_bounded(void);
/* In a forked child: its exit is a snapshot of its own. */
void ot_snapshot_forked(void);
/* Before the process ends (exit, exec): waits, at most OT_WRITES_WAIT_MS, for the snapshots other threads of
 * this process are writing, and says one line when it gives up. WHEN names the moment ("exit", "exec").
 * Only atomics and nanosleep until that line: safe where exit() was called from a signal handler. */
#define OT_WRITES_WAIT_MS 5000
void ot_snapshot_wait_writes(const char *when);

/* Removes this process's crash-surviving flush file (the process finished). */
void ot_flush_file_remove(void);

/* OOMTRACE_DIR was reported unusable: later failures there stay quiet (file.c). */
extern int ot_dir_warned;
/* Creates a missing directory and its missing parents, mode 0700, never through a symbolic link (file.c):
 * at the first allocation, and again when a write finds it gone. 0, or the errno of the mkdir that failed. */
int ot_dir_make(const char *dir);
#endif
