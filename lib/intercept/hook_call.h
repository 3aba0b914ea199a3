/* The shape of every wrapper, written once. A wrapper calls the real driver function with the caller's
 * exact arguments and returns its exact result; recording happens beside the call, never instead of it.
 *
 *     OT_HOOK_ENTER(name, (args));     the real function, or a plain pass-through when the tracer must not
 *                                      record (disabled, or already inside it on this thread)
 *     an allocation:  dev = ot_pre_alloc(); r = real(args); ... return ot_alloc_end(r, &req, err);
 *     a free:         OT_FREE_CALL(record the free into &undo, real(args));
 */
#ifndef OOMTRACE_HOOK_CALL_H
#define OOMTRACE_HOOK_CALL_H
#include <errno.h>
#include <stddef.h>

#include "common/defs.h"
#include "common/options.h"
#include "common/self.h"
#include "common/stage.h"
#include "driver/cuda_api.h"
#include "driver/driver.h"
#include "driver/real.h"
#include "record/rec.h"
#include "record/record.h"
#include "runtime/companion.h"
#include "runtime/init.h"

void *ot_real_slow(size_t off);

/* The real function: resolved on first use, for programs that call our exported names directly. */
#define OT_REAL(name, type) \
    ((type)(OT_LIKELY(ot_real.name != NULL) ? ot_real.name : ot_real_slow(offsetof(struct ot_real, name))))

/* Enters the tracer on this thread; 0 when it must not record (disabled, or already inside it). */
static inline int ot_enter(void)
{
    if (ot_self.busy || !ot_ready_fast() || OT_STAGE_PASS())
        return 0;
    ot_self.busy = 1;
    OT_STAGE_HOOK_IN();
    return 1;
}

static inline void ot_leave(int saved_errno)
{
    OT_STAGE_HOOK_OUT(OT_ST_HOOK);
    ot_self.busy = 0;
    errno = saved_errno;
}

/* The same for a free's wrapper (the stage build counts the two kinds apart). */
static inline void ot_leave_free(int saved_errno)
{
    OT_STAGE_HOOK_OUT(OT_ST_HOOK_FREE);
    ot_self.busy = 0;
    errno = saved_errno;
}

/* Declares `real` (of type `type`, from realp) and `err` (the caller's errno, for ot_leave); returns the
 * real call's result untouched when the tracer must not record. */
#define OT_HOOK_START(type, realp, args)                                                               \
    __typeof__(type) real = (__typeof__(type))(realp);                                                 \
    if (!real)                                                                                         \
        return CUDA_ERROR_NOT_INITIALIZED;                                                             \
    if (!ot_enter())                                                                                   \
        return real args;                                                                              \
    int err = errno
/* The same for the wrapper of `name` itself: the real function has the wrapper's type. */
#define OT_HOOK_ENTER(name, args) OT_HOOK_START(__typeof__(&name), OT_REAL(name, void *), args)

void ot_first_use(int device); /* the baseline alone, for a call that names its device */

/* Before an allocation on dev: the device's baseline, taken before its first allocation. Inline, as
 * ot_after_alloc below: every allocation passes here, and the calls cost as much as the rest. */
static inline void ot_pre_alloc_on(int dev)
{
    if (OT_UNLIKELY(ot_record_baseline_open(dev)))
        ot_first_use(dev);
}

/* The device a call will allocate on (its stream's, for stream-ordered memory, which belongs to no
 * context: the current context's device serves). */
static inline int ot_pre_alloc(void)
{
    OT_STAGE_BEGIN(t);
    int dev = ot_drv_current_device();
    ot_pre_alloc_on(dev);
    OT_STAGE_END(OT_ST_PRE_ALLOC, t);
    return dev;
}

/* The same for memory that is the current context's (its end frees it): the context too, into *ctx. */
static inline int ot_pre_alloc_in(uint64_t *ctx)
{
    OT_STAGE_BEGIN(t);
    int dev = ot_drv_current(ctx);
    ot_pre_alloc_on(dev);
    OT_STAGE_END(OT_ST_PRE_ALLOC, t);
    return dev;
}

void ot_after_alloc_failed(CUresult r, const struct ot_alloc_req *req);

/* After an allocation call: records the success, or the out-of-memory failure (and its snapshot). */
static inline void ot_after_alloc(CUresult r, const struct ot_alloc_req *req)
{
    if (OT_LIKELY(r == CUDA_SUCCESS)) {
        OT_STAGE_BEGIN(t);
        const uint64_t at = ot_record_alloc(req);
        if (OT_UNLIKELY(!__atomic_load_n(&ot_exit_registered, __ATOMIC_RELAXED)))
            ot_after_first_alloc();
        if (ot_opt.frameworks)
            ot_companion_poke_at(OT_POKE_ALLOC, at);
        OT_STAGE_END(OT_ST_AFTER_ALLOC, t);
    } else {
        ot_after_alloc_failed(r, req);
    }
}

static inline CUresult ot_alloc_end(CUresult r, const struct ot_alloc_req *req, int err)
{
    ot_after_alloc(r, req);
    ot_leave(err);
    return r;
}

/* The undo rule. A free is recorded before the real call: once the driver has the memory back, another
 * thread may be handed the same address or handle, and its allocation must not be mistaken for this one.
 * When the driver then refuses the call, the memory is still allocated, and everything the free changed
 * is put back. */
static inline CUresult ot_free_end(CUresult r, struct ot_undo *u)
{
    if (OT_UNLIKELY(r != CUDA_SUCCESS) && (u->n || u->lost))
        ot_record_undo(u);
    ot_undo_done(u);
    return r;
}

/* record: a statement that records the free into &undo; call: the real call. Ends the wrapper. */
#define OT_FREE_CALL(record, call)                                                                     \
    struct ot_undo undo;                                                                               \
    ot_undo_init(&undo);                                                                               \
    record;                                                                                            \
    ot_leave_free(err);                                                                                \
    return ot_free_end(call, &undo)
#endif
