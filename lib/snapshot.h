#ifndef OOMTRACE_SNAPSHOT_H
#define OOMTRACE_SNAPSHOT_H
#include "oomtrace_format.h"

/* Writes a snapshot of the recorder's state into OOMTRACE_DIR. Not for signal context: the signal and
 * crash paths hand over to the dumper thread. Returns 0 when the file was written. */
int ot_snapshot_write(enum ot_trigger trigger, const char *reason);
#endif
