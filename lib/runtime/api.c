/* The public API of include/oomtrace.h. */
#define OOMTRACE_NO_INLINE
#include "oomtrace.h"

#include <errno.h>

#include "internal.h"
#include "snapshot/snapshot.h"

OT_EXPORT int oomtrace_mark(const char *label)
{
    if (!label || ot_self.busy || !ot_ready())
        return -1;
    int err = errno;
    ot_self.busy = 1;
    ot_record_marker(label);
    ot_self.busy = 0;
    errno = err;
    return 0;
}

OT_EXPORT int oomtrace_dump(const char *reason)
{
    if (ot_self.busy || !ot_ready())
        return -1;
    return ot_snapshot_write(OT_TRIGGER_API, reason ? reason : "oomtrace_dump");
}
