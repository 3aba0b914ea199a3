/* The public API of include/oomtrace.h. */
#define OOMTRACE_NO_INLINE
#include "oomtrace.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "oomtrace_format.h"
#include "common/defs.h"
#include "common/self.h"
#include "common/stage.h"
#include "driver/cuda_api.h"
#include "record/rec.h"
#include "record/record.h"
#include "runtime/companion.h"
#include "runtime/init.h"
#include "snapshot/framework.h"
#include "snapshot/snapshot.h"

/* A label longer than a marker keeps is cut at a UTF-8 character's boundary: a cut inside one made the
 * report's label end in U+FFFD (walk 7, #4). */
static const char *fit_label(const char *label, char out[OT_LABEL_MAX])
{
    size_t n = strnlen(label, OT_LABEL_MAX);
    if (n < OT_LABEL_MAX)
        return label;
    n = OT_LABEL_MAX - 1;
    while (n > 0 && ((unsigned char)label[n] & 0xC0) == 0x80) /* label[n], the first byte dropped, continues a character */
        n--;
    memcpy(out, label, n);
    out[n] = 0;
    return out;
}

OT_EXPORT int oomtrace_mark(const char *label)
{
    if (!label || ot_self.busy || !ot_ready_fast())
        return -1;
    int err = errno;
    char cut[OT_LABEL_MAX];
    label = fit_label(label, cut);
    OT_STAGE_MARK(label);
    ot_self.busy = 1;
    ot_record_marker(label);
    ot_self.busy = 0;
    errno = err;
    return 0;
}

/* The companion's step marker (companion_step.c, at every optimizer step): oomtrace_mark for a label whose
 * length it knows and that a marker keeps whole ("step N"), measured once, not twice. */
int ot_mark_n(const char *label, size_t n)
{
    if (ot_self.busy || !ot_ready_fast())
        return -1;
    int err = errno;
    ot_self.busy = 1;
    ot_record_marker_n(label, n);
    ot_self.busy = 0;
    errno = err;
    return 0;
}

OT_EXPORT int oomtrace_dump(const char *reason)
{
    if (ot_self.busy || !ot_ready_fast())
        return -1;
    return ot_snapshot_trigger(OT_TRIGGER_API, reason ? reason : "oomtrace_dump");
}

OT_EXPORT int oomtrace_framework_state(const void *payload, size_t len)
{
    if (ot_self.busy || !ot_ready_fast())
        return -1;
    int err = errno;
    int rc = ot_framework_keep(payload, len);
    errno = err;
    return rc;
}

OT_EXPORT int oomtrace_framework_oom(const char *framework, unsigned long long request_bytes, int device,
                                     const void *payload, size_t len)
{
    if (ot_self.busy || !ot_ready_fast())
        return -1;
    int err = errno;
    if (payload && len)
        ot_framework_keep(payload, len);
    /* The framework's refusal is an event like a driver's, so timelines and the FAILURE section show it;
     * it writes no driver-level OOM snapshot of its own. */
    struct ot_alloc_req q = {.ns = OT_NS_DEVPTR, .cat = OT_CAT_DEVICE, .api = OT_API_framework_allocator,
                             .device = device, .size = request_bytes};
    ot_self.busy = 1;
    const struct trace_failure mine = ot_record_failure(&q, CUDA_ERROR_OUT_OF_MEMORY);
    ot_self.busy = 0;
    int rc = ot_snapshot_trigger_failure(OT_TRIGGER_FRAMEWORK_OOM, framework && *framework ? framework : "framework",
                                         &mine);
    errno = err;
    return rc;
}
