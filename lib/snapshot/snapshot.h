#ifndef OOMTRACE_SNAPSHOT_H
#define OOMTRACE_SNAPSHOT_H
#include "oomtrace_format.h"

/* Writes a snapshot of the recorder's state into OOMTRACE_DIR. Not for signal context: the signal and
 * crash paths hand over to the dumper thread. Returns 0 when the file was written. */
int ot_snapshot_write(enum ot_trigger trigger, const char *reason);

/* Removes this process's crash-surviving flush file (the process finished). */
void ot_flush_file_remove(void);
/* Set for the last flush after a fatal signal: the state lock is then waited for at most a second. */
extern int ot_flush_final;
#endif
