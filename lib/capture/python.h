/* Python frames of the calling thread, merged into a native backtrace: what capture/'s Python readers
 * (pyframes.h and its files) give the other rooms. */
#ifndef OOMTRACE_CAPTURE_PYTHON_H
#define OOMTRACE_CAPTURE_PYTHON_H
#include <stdint.h>

struct ot_buf;

int ot_python_merge(uint64_t *frames, int n, int max, unsigned *flags);
void ot_python_prefetch(void); /* before a capture: fetches the frames the thread's last one read */
const char *ot_python_version(void); /* "3.12", or "" when the process runs no Python */
void ot_pyframes_forked(void);       /* in the child of a fork: forget the parent's pid and threads */
void ot_pyframes_serialize(struct ot_buf *b);
#endif
