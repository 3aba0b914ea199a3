/* Runs a program under the preload against the stand-in driver and parses the snapshots it leaves. */
#ifndef OT_TEST_HARNESS_H
#define OT_TEST_HARNESS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "symbols/resolve.h"
#include "analyze/sites.h"
#include "model/snapshot.h"

#define MiB (1024ull * 1024)

struct traced_run {
    char dir[256];
    int status; /* exit status, or 128 + signal */
    size_t nsnaps;
    char paths[16][512];
    char *out; /* the program's standard output (traced_run_capture, untraced_run), NUL-terminated */
    size_t outlen;
};
#define RUN_OUT_MAX (1u << 20)

/* Runs argv with LD_PRELOAD=build/liboomtrace.so and the stand-in driver, in a fresh OOMTRACE_DIR.
 * env: extra NAME=VALUE strings, NULL-terminated (may be NULL). The variables OOMTRACE_TEST_LIB (another
 * build of the library) and OOMTRACE_TEST_PRELOAD_EXTRA (preloaded before it: a sanitizer runtime)
 * change what is preloaded. */
void traced_run(struct traced_run *r, char *const argv[], const char *const *env);
void traced_cleanup(struct traced_run *r);
/* traced_run, keeping the program's standard output in r->out. */
void traced_run_capture(struct traced_run *r, char *const argv[], const char *const *env);
/* The same run without the tracer (LD_PRELOAD removed; same driver and environment otherwise), standard
 * output in r->out. Clean up with traced_cleanup. */
void untraced_run(struct traced_run *r, char *const argv[], const char *const *env);
/* For programs a test spawns itself: the deadline (CLOCK_MONOTONIC seconds) a program started now must
 * finish by, OT_TEST_RUN_TIMEOUT seconds from now (default 300, far above the slowest program), so a hang
 * fails one test with the program's name rather than stalling the whole run. wait_until waits for pid and
 * returns its wait status; past the deadline it kills pid's process group (so the program should call
 * setpgid(0, 0) before exec) and fails the test. */
double run_deadline(void);
int wait_until(pid_t pid, const char *name, double deadline);
/* The value of the program's output line "key value", or NULL (valid until the next call). */
const char *run_value(const struct traced_run *r, const char *key);
/* The same value as a number (0x... or decimal); fails the test when absent or not a number. */
uint64_t run_u64(const struct traced_run *r, const char *key);

/* Loads and parses one snapshot (fails the test on a parse error). */
struct loaded {
    uint8_t *buf;
    size_t len;
    struct ot_snapshot s;
    struct ot_resolver *res;
};
void load_snapshot(struct loaded *l, const char *path);
void unload_snapshot(struct loaded *l);

/* True when a frame of the stack (native by dump-time name, or Python by function) is `name`. */
bool stack_has_function(struct loaded *l, uint64_t stack_id, const char *name);
/* The Python frame named `function` in the stack: its line, or -1. */
long stack_python_line(struct loaded *l, uint64_t stack_id, const char *function, const char *file_suffix);
/* Bytes of the records (of a peak or the live set) whose stack contains `function`. */
uint64_t bytes_with_function(struct loaded *l, const struct ot_record *recs, size_t n, const char *function,
                             uint64_t *count);
/* Every snapshot of a run, and the one whose META reason (the dump label) is `reason`; by_reason fails the
 * test unless exactly one matches. */
struct loaded_run {
    size_t n;
    struct loaded snap[16];
};
void load_all(struct loaded_run *lr, const struct traced_run *r);
void unload_all(struct loaded_run *lr);
struct loaded *by_reason(struct loaded_run *lr, const char *reason);

/* Records matching every given field: api, category, size and address match when nonzero; device and
 * flags always match unless any_device / any_flags. */
struct rec_match {
    uint64_t api, category, size, address, flags;
    int64_t device;
    bool any_device, any_flags;
};
size_t count_recs(const struct ot_record *recs, size_t n, const struct rec_match *m);
/* Events in the ring of the given kind (OT_EV_*), api (0: any) and address (0: any); *bytes (may be NULL)
 * gets the sum of their sizes. */
size_t count_events(const struct ot_snapshot *s, uint64_t kind, uint64_t api, uint64_t addr, uint64_t *bytes);
uint64_t sum_bytes(const struct ot_record *recs, size_t n, bool device_only);
#endif
