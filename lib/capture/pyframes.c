/* Python frames, read from C without the GIL, merged into a native backtrace: each native frame inside
 * the interpreter's eval loop is replaced by the Python frames that run of the loop executed. The parts:
 * capture/pyframes.h. */
#include <pthread.h>
#include <string.h>

#include "oomtrace_format.h"
#include "capture/pyframes.h"
#include "capture/python.h"
#include "capture/stacks.h"
#include "common/defs.h"
#include "common/stage.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

void ot_pyframes_forked(void)
{
    ot_py_pid_forked();
    ot_py_borrow_forked();
    if (ot_py_tls && ot_py_tls != PY_THREAD_NONE)
        ot_py_tls->lent.ts = NULL;
}

/* Puts the chain's frames where the interpreter ran them, from native (n frames) into frames: each native
 * frame inside the eval loop is replaced by the Python frames that run of the loop executed. Native frames
 * are copied a run at a time between eval frames (a frame-at-a-time loop was most of the merge). */
static int merge_into(uint64_t *frames, const uint64_t *native, int n, int max, const struct chain *c,
                      unsigned *flags)
{
    /* return addresses in (lo, hi] */
    const uintptr_t eval_first = ot_py.eval_lo + 1, eval_span = ot_py.eval_hi - ot_py.eval_lo;
    const int np = c->n;
    int out = 0, p = 0, i = 0;
    while (i < n && out < max) {
        int j = i;
        if (p < np)
            while (j < n && (uintptr_t)(native[j] >> 1) - eval_first >= eval_span)
                j++;
        else
            j = n; /* no Python frame left: an eval frame stays a native one */
        int k = j - i < max - out ? j - i : max - out;
        memcpy(frames + out, native + i, (size_t)k * sizeof *frames);
        out += k;
        i += k;
        if (i < j || j == n)
            break;
        /* native[j] runs the eval loop: its run, from p to its outermost frame (entry) or the chain's end */
        int q = p;
        while (q < np - 1 && !c->entry[q])
            q++;
        int take = q + 1 - p < max - out ? q + 1 - p : max - out;
        for (int m = 0; m < take; m++)
            frames[out + m] = ((uint64_t)c->id[p + m] << 1) | OT_FRAME_PYTHON;
        out += take;
        p += take;
        i = j + 1;
    }
    while (p < np && out < max)
        frames[out++] = ((uint64_t)c->id[p++] << 1) | OT_FRAME_PYTHON;
    if (i < n || p < np) /* the Python frames made the stack longer than a stack may be */
        *flags |= OT_STACK_TRUNCATED;
    return out;
}

/* Apart from ot_python_merge, so that a program without Python never reserves its stack buffers (threads
 * with 16 KiB stacks allocate too).
 *
 * A thread that allocates again from where it allocated last (a loop) has the same native frames and the
 * same chain: the merged stack is then the thread's last one, copied (struct merged), where the merge
 * read every native frame. Any difference in either, a Python frame's instruction included, merges
 * again. */
static __attribute__((noinline)) int merge(uint64_t *frames, int n, int max, unsigned *flags)
{
    struct chain c;
    const struct chain *got;
    int same;
    int np = OT_STAGE_CALL(OT_ST_PYWALK, ot_py_walk(&c, &got, &same));
    if (np == 0) {
        if (__atomic_load_n(&ot_py_state, __ATOMIC_ACQUIRE) != PY_ON)
            return n;
        uint32_t lender = 0;
        if (!ot_py.is_initialized() || (np = OT_STAGE_CALL(OT_ST_BORROW, ot_py_borrow(&c, &lender))) == 0) {
            *flags |= OT_STACK_NO_PYTHON; /* a native thread of a Python process, no thread waiting */
            return n;
        }
        *flags |= OT_STACK_BORROWED | (lender & OT_STACK_LENDER_MAX) << OT_STACK_LENDER_SHIFT;
        uint64_t native[OT_MAX_FRAMES];
        memcpy(native, frames, (size_t)n * sizeof *frames);
        return merge_into(frames, native, n, max, &c, flags);
    }
    struct py_thread *t = ot_py_tls;
    if (t == NULL || t == PY_THREAD_NONE) { /* no thread cache (ot_py_walk found none to be had) */
        uint64_t native[OT_MAX_FRAMES];
        memcpy(native, frames, (size_t)n * sizeof *frames);
        return merge_into(frames, native, n, max, got, flags);
    }
    struct merged *m = &t->merged;
    if (same && m->valid && m->n == n && m->max == max && memcmp(m->native, frames, (size_t)n * sizeof *frames) == 0) {
        OT_STAGE_CACHE(OT_C_PY_MERGED, 1);
        memcpy(frames, m->frames, (size_t)m->out * sizeof *frames);
        *flags |= m->flags;
        return m->out;
    }
    OT_STAGE_CACHE(OT_C_PY_MERGED, 0);
    memcpy(m->native, frames, (size_t)n * sizeof *frames);
    unsigned added = 0;
    int out = merge_into(frames, m->native, n, max, got, &added);
    memcpy(m->frames, frames, (size_t)out * sizeof *frames);
    m->n = n;
    m->max = max;
    m->out = out;
    m->flags = added;
    m->valid = 1;
    *flags |= added;
    return out;
}

int ot_python_merge(uint64_t *frames, int n, int max, unsigned *flags)
{
    int state = __atomic_load_n(&ot_py_state, __ATOMIC_ACQUIRE);
    if (OT_UNLIKELY(state == PY_UNPROBED)) {
        pthread_once(&probe_once, ot_py_probe);
        state = __atomic_load_n(&ot_py_state, __ATOMIC_ACQUIRE);
    }
    return state == PY_ON ? merge(frames, n, max, flags) : n;
}

