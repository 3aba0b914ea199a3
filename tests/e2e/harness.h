/* Runs a program under the preload against the stand-in driver and parses the snapshots it leaves. */
#ifndef OT_TEST_HARNESS_H
#define OT_TEST_HARNESS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../tools/read/resolve.h"
#include "../../tools/read/sites.h"
#include "../../tools/read/snapshot.h"

#define MiB (1024ull * 1024)

struct traced_run {
    char dir[256];
    int status; /* exit status, or 128 + signal */
    size_t nsnaps;
    char paths[16][512];
};

/* Runs argv with LD_PRELOAD=build/liboomtrace.so and the stand-in driver, in a fresh OOMTRACE_DIR.
 * env: extra NAME=VALUE strings, NULL-terminated (may be NULL). */
void traced_run(struct traced_run *r, char *const argv[], const char *const *env);
void traced_cleanup(struct traced_run *r);

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
uint64_t sum_bytes(const struct ot_record *recs, size_t n, bool device_only);
#endif
