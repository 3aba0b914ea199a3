/* Python frames, read from C without the GIL, merged into a native backtrace: each native frame inside
 * the interpreter's eval loop is replaced by the Python frames that run of the loop executed. The parts:
 * capture/pyframes.h. */
#include <pthread.h>
#include <string.h>

#include "capture/pyframes.h"
#include "internal.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

void ot_pyframes_forked(void)
{
    ot_py_pid_forked();
    ot_py_borrow_forked();
    if (ot_py_tls && ot_py_tls != PY_THREAD_NONE)
        ot_py_tls->lent.ts = NULL;
}

/* Puts the Python frames where the interpreter ran them: each native frame inside the eval loop is
 * replaced by the Python frames that run of the loop executed. Apart from ot_python_merge, so that a
 * program without Python never reserves its 5 KB of stack (threads with 16 KiB stacks allocate too). */
static __attribute__((noinline)) int merge(uint64_t *frames, int n, int max, unsigned *flags)
{
    struct chain c;
    int np = ot_py_walk(&c);
    if (np == 0) {
        if (__atomic_load_n(&ot_py_state, __ATOMIC_ACQUIRE) != PY_ON)
            return n;
        uint32_t lender = 0;
        if (!ot_py.is_initialized() || (np = ot_py_borrow(&c, &lender)) == 0) {
            *flags |= OT_STACK_NO_PYTHON; /* a native thread of a Python process, no thread waiting */
            return n;
        }
        *flags |= OT_STACK_BORROWED | (lender & OT_STACK_LENDER_MAX) << OT_STACK_LENDER_SHIFT;
    }
    uint64_t native[OT_MAX_FRAMES];
    memcpy(native, frames, (size_t)n * sizeof *frames);
    int out = 0, p = 0, i;
    /* return addresses in (lo, hi] */
    const uintptr_t eval_first = ot_py.eval_lo + 1, eval_span = ot_py.eval_hi - ot_py.eval_lo;
    for (i = 0; i < n && out < max; i++) {
        uintptr_t a = (uintptr_t)(native[i] >> 1);
        if (a - eval_first < eval_span && p < np) {
            /* The run: from p to its outermost frame (entry), or to the chain's end; found first, then
             * copied in one loop (a frame-at-a-time loop with three exits was most of the merge). */
            int q = p;
            while (q < np - 1 && !c.entry[q])
                q++;
            int take = q + 1 - p < max - out ? q + 1 - p : max - out;
            for (int k = 0; k < take; k++)
                frames[out + k] = ((uint64_t)c.id[p + k] << 1) | OT_FRAME_PYTHON;
            out += take;
            p += take;
            continue;
        }
        frames[out++] = native[i];
    }
    while (p < np && out < max)
        frames[out++] = ((uint64_t)c.id[p++] << 1) | OT_FRAME_PYTHON;
    if (i < n || p < np) /* the Python frames made the stack longer than a stack may be */
        *flags |= OT_STACK_TRUNCATED;
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

