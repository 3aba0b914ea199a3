#ifndef OOMTRACE_FRAMEWORK_H
#define OOMTRACE_FRAMEWORK_H
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* The frameworks' view (OT_SEC_FRAMEWORK), as the Python companion last handed it over: kept as opaque
 * bytes, written into every later snapshot. Returns 0 when kept. */
int ot_framework_keep(const void *payload, size_t len);
/* Appends the kept payload; 0 when there is none. */
int ot_framework_serialize(struct ot_buf *b);

/* A driver-level OOM snapshot was written: remembered until the next framework OOM lists it. */
void ot_probe_note(const char *path, uint64_t failure_seq, uint64_t requested, int device);
/* Writes the PROBES payload and forgets the list (the framework OOM that follows them owns them). */
void ot_probes_take(struct ot_buf *b);

void ot_framework_reset_child(void);
#endif
