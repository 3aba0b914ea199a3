/* The tracer's own writes (its stderr lines, its snapshot files) raise no signal in the program (nosig.c). */
#ifndef OOMTRACE_COMMON_NOSIG_H
#define OOMTRACE_COMMON_NOSIG_H

#include <signal.h>

struct ot_nosig {
    sigset_t old;     /* the thread's mask before */
    int before;       /* bit per signal (0 SIGPIPE, 1 SIGXFSZ): pending before the writes, kept */
    int raised;       /* bit per signal: a write failed with EPIPE / EFBIG, so its signal is ours */
};

void ot_nosig_begin(struct ot_nosig *q);
void ot_nosig_saw(struct ot_nosig *q, int err); /* a write's errno */
void ot_nosig_end(struct ot_nosig *q);
#endif
