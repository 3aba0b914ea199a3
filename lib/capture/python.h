/* Python frames of the calling thread, merged into a native backtrace: what capture/'s Python readers
 * (pyframes.h and its files) give the other rooms. */
#ifndef OOMTRACE_CAPTURE_PYTHON_H
#define OOMTRACE_CAPTURE_PYTHON_H
#include <stdint.h>

struct ot_buf;

/* The merged stack of the n native frames at native (capture/backtrace.h: ot_backtrace_at; they may be in
 * frames) at *src: native itself (no Python frame), frames (room for max, written), or a thread's kept
 * merged stack when the merge found one (not copied out: the stack table takes the id it was interned as,
 * ot_stack_hint, and reads the frames only when that misses). *src holds until the thread's next capture. */
int ot_python_merge(const uint64_t *native, uint64_t *frames, int n, int max, unsigned *flags, const uint64_t **src);
void ot_python_prefetch(void); /* before a capture: fetches the frames the thread's last one read */
const char *ot_python_version(void); /* "3.12", or "" when the process runs no Python */
void ot_pyframes_forked(void);       /* in the child of a fork: forget the parent's pid and threads */
void ot_pyframes_serialize(struct ot_buf *b);
#endif
