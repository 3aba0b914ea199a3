/* The directory view's model, shared by merge.c (reading the directory, keeping each process's most
 * informative snapshot, ordering) and merge_report.c (the run's report in every format). Not for use
 * outside modes/merge*.c. */
#ifndef OT_READ_MODES_MERGE_H
#define OT_READ_MODES_MERGE_H

#include "analyze/breakdown.h"
#include "modes/run.h"
#include "render/json_writer.h"

struct snapinfo {
    const char *path;
    bool ok;
    char host[256];
    uint64_t pid;
    char command[256]; /* the command line, its words joined by spaces, cut at 255 bytes */
    int64_t rank, local_rank, world_size;
    uint64_t trigger;
    bool complete;
    uint64_t mono_ns, wall_ns, snapshot_seq;
    /* When its tracer started: with host and pid, what tells a process apart (a container restarted as PID 1
     * again, on the same host name and volume, is another process). start_wall_ns is 0 when unknown. */
    uint64_t start_mono_ns, start_wall_ns;
    bool failed;
    uint64_t fail_time_ns, fail_wall_ns;
    bool fail_wall_known;
    uint64_t requested, fail_api;
    char fail_api_words[64]; /* the report's words for who refused (ot_failure_api): "PyTorch's allocator" */
    int64_t fail_device;
    bool has_at_failure;
    uint64_t at_failure_bytes;
    bool peak_known;
    int64_t peak_device;
    uint64_t peak_bytes;
    uint64_t max_peak;
    int64_t max_peak_device;
    char uuid[80];
    bool fatal;          /* a framework out-of-memory snapshot */
    bool probes_known;   /* nprobes is known (from its probe list, or counted from the process's files) */
    size_t nprobes;      /* driver-level out-of-memory snapshots before it: the framework's retries and probes */
    bool probes_listed;  /* nprobes came from the snapshot's own list */
    /* A crash-surviving flush: crash_signal non-NULL when a fatal signal wrote it ("SIGABRT", "" when its
     * words name no signal known here; crash_words: the writer's strsignal words), no_last_flush when only
     * timed flushes were written (killed by SIGKILL or the kernel's OOM killer, or still running). */
    const char *crash_signal;
    char crash_words[64];
    bool no_last_flush;
    /* "SIGTERM" or "SIGINT": an exit snapshot written as that signal at its default ended the process (the
     * writer's reason "ended by SIGTERM", lib/runtime/init.c): how torchrun, Slurm and multiprocessing's Pool
     * stop a process, and Ctrl-C a Python job whose KeyboardInterrupt went uncaught. NULL otherwise. */
    const char *ended_by;
    /* What held the memory (analyze/breakdown.h), copied: the snapshot is freed once read. has_device
     * false: none (no device known, or no memory to build it). */
    struct ot_breakdown bd;
};

struct proc {
    size_t first, n; /* members in the sorted index */
    size_t kept;     /* index into infos */
    bool has_exit, has_incomplete;
    const char *stopped; /* the signal whose end wrote its exit snapshot (ended_by): it did not finish */
    /* How it ended when not by exit: its crash-surviving flush (index into infos) says it crashed, or that
     * it was killed without a last flush. */
    bool crashed, killed;
    size_t ended;
};

/* A process known only by the name of a snapshot file that could not be read (none of its files could):
 * oomtrace-HOST-PID[-rankR]-TAG.oomt gives its host, pid, rank and trigger, and the reader says why the file
 * failed. Its row keeps it in the table: the file may be the job's first failure. */
struct lostproc {
    char host[128];
    uint64_t pid;
    int64_t rank;
    char trigger[16]; /* the name's trigger word: "oom", "framework-oom", "exit", "dump", "flush" ... */
    const char *path; /* its first unreadable file (an out-of-memory one first) */
    char why[200];    /* why that file could not be read */
    size_t n;         /* its unreadable files */
};

struct run {
    const struct ot_run_opts *r;
    const char *dir;
    char **files;
    size_t nfiles;
    struct snapinfo *infos;
    size_t *order;
    struct proc *procs;
    size_t nprocs, readable;
    struct lostproc *lost; /* by rank, then host and pid */
    size_t nlost;
    const struct proc *first_fail; /* NULL when no process failed */
    size_t nfailed;
    size_t ncrashed;                /* processes that crashed or were killed (proc.crashed, proc.killed) */
    const struct proc *first_crash; /* the first of them by the wall time of its flush; NULL when none */
    const struct proc *pmax; /* the largest peak */
    /* The imbalance of peaks, between ranks (or, with no ranks, processes of one command line: a launcher
     * script and its workers are no imbalance); both NULL when there is none to say: fewer than two such
     * processes, or equal peaks. */
    const struct proc *imax, *imin;
    const struct proc *report; /* whose report follows: the first failure, else the first crash, else the
                                * largest peak */
};

/* The run's report: 0, or -1 when it could not be written. */
/* Fills *l from a snapshot file's name (oomtrace-HOST-PID[-rankR]-N-TRIGGER[.K].oomt, or
 * ...-rRUN-flush.oomt); false when the name is not of that shape. */
bool merge_name_of(const char *path, struct lostproc *l);
/* Did the lost process's file say it ran out of memory? */
bool merge_lost_oom(const struct lostproc *l);

int merge_write_json(FILE *f, struct run *u);
int merge_write_text(FILE *f, struct run *u);
int merge_write_doc(FILE *f, struct run *u, enum ot_doc_kind kind);

/* Each process's breakdown rows (merge_breakdown.c): one line per process in text (in JSON, each rank's
 * "breakdown" is the report's object, render/json_breakdown.h). */
void merge_text_breakdowns(FILE *f, const struct run *u);

#endif
