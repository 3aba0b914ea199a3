/* Borrowing: a native thread's allocation takes a waiting Python thread's stack.
 *
 * Autograd's device threads, NCCL's and the libraries' own threads allocate with no Python frame while a
 * Python thread waits for them in a call that released the GIL (loss.backward() waits in
 * _engine_run_backward). Their allocations then carry that thread's Python stack, flagged borrowed. The
 * rule is general: a thread of the interpreter, not this one, with Python frames, that does not hold the
 * GIL; the main thread first when it is one, else the most recently started.
 *
 * The other thread may return and pop its frames at any moment, and its thread state may be freed, so
 * every read of memory that may be unmapped goes through process_vm_readv, never a plain load: plain loads
 * read only what is never unmapped, the main thread's state in _PyRuntime (static) and what lies on the
 * main thread's C stack (on_main_stack), and the main thread's frames in its frame stack once the kernel
 * read them all and no unmap came since (common/unmaps.h: the check's plain loads, borrow_whole). No lock
 * is taken (the interpreter's own head lock could be held by a thread that waits on us). */

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>

#include "capture/pyframes.h"
#include "common/clock.h"
#include "common/unmaps.h"
#include "common/log.h"
#include "common/stage.h"

#define MAX_THREADS 64
#define FRAME_OWNED_BY_THREAD 0 /* _PyInterpreterFrame.owner, 3.11 to 3.13 */
#define TS_BYTES 176 /* the largest thread state offset read below, rounded up */

/* 3.12, 3.13: the main interpreter's GIL, found once. It lives in the interpreter's (static) state as long
 * as the process: plain loads are safe there, unlike in a thread state. */
static void *gil_state;

/* The thread state that holds the GIL, or NULL (nobody holds it, or it cannot be told). */
static void *gil_holder(void *interp)
{
    const struct layout *L = ot_py.L;
    if (L->holder == HOLDER_CURRENT)
        return ot_py.gil_current ? ot_py.gil_current() : NULL;
    if (!gil_state) {
        void *g = NULL;
        int locked = 0;
        if (!interp || ot_py_checked_read((const char *)interp + L->interp_gil, &g, sizeof g) || !g ||
            ot_py_checked_read((const char *)g + 16, &locked, sizeof locked) || (locked != 0 && locked != 1))
            return NULL;
        gil_state = g;
    }
    void *last_holder = __atomic_load_n((void *const *)((const char *)gil_state + 8), __ATOMIC_RELAXED);
    return __atomic_load_n((const int *)((const char *)gil_state + 16), __ATOMIC_RELAXED) == 1 ? last_holder : NULL;
}

/* One frame of a lender's chain, its bytes read into f (ot_py_frame_need of them), appended to c as the
 * walk takes it (a C-stack shim frame sets the run end of the frame before it); its link to the next frame
 * in *prev. -1: a frame without code. */
static int take_frame(const char *f, struct chain *c, int *n, void **prev)
{
    const struct layout *L = ot_py.L;
    void *code;
    memcpy(prev, f + L->fr_previous, sizeof *prev);
    memcpy(&code, f + L->fr_code, sizeof code);
    if (L->frame_objects) {
        int lasti;
        memcpy(&lasti, f + L->fr_instr, sizeof lasti);
        if (!code)
            return -1;
        c->code[*n] = code;
        c->instr[*n] = (const char *)(uintptr_t)(lasti < 0 ? 0 : lasti);
        c->entry[(*n)++] = 1;
    } else if (L->owner_cstack >= 0 && f[L->fr_owner] == L->owner_cstack) {
        if (*n)
            c->entry[*n - 1] = 1;
    } else {
        if (!code)
            return -1;
        c->code[*n] = code;
        memcpy(&c->instr[*n], f + L->fr_instr, sizeof c->instr[*n]);
        c->entry[*n] = L->fr_is_entry >= 0 && f[L->fr_is_entry] != 0;
        (*n)++;
    }
    return 0;
}

static inline int on_main_stack(uintptr_t a, uintptr_t e);

/* A chain read frame by frame with one checked read each. fa: the frames' addresses as read (up to
 * LENT_RAW; *nraw 0 when there were more). *stacked: every frame is the thread's own, in its frame stack
 * (chunks CPython maps and unmaps through its arena allocator: munmap, counted), or lies on the main
 * thread's C stack; not a generator's or a frame object's, which live in objects that malloc may free by
 * an unmap that is not counted. */
static int gather_borrowed(void *frame, struct chain *c, const void **fa, uint16_t *nraw, int *stacked)
{
    const struct layout *L = ot_py.L;
    unsigned need = ot_py_frame_need();
    char f[128];
    int n = 0, raw = 0;
    c->cut = c->gap = c->gap_runs = 0;
    *stacked = !L->frame_objects;
    for (int guard = 0; frame && n < MAXPY && guard < 4 * MAXPY; guard++) {
        if (need > sizeof f || ot_py_checked_read(frame, f, need))
            return -1;
        if (fa && raw < LENT_RAW)
            fa[raw] = frame;
        raw++;
        if (*stacked && f[L->fr_owner] != FRAME_OWNED_BY_THREAD &&
            !on_main_stack((uintptr_t)frame, (uintptr_t)frame + need))
            *stacked = 0;
        if (take_frame(f, c, &n, &frame))
            return -1;
    }
    *nraw = frame || raw > LENT_RAW ? 0 : (uint16_t)raw;
    if (frame && n == MAXPY)
        return ot_py_walk_deep(frame, c, 1);
    return n;
}

/* A native thread's last borrow. While the lender still waits with the chain the walk read (every frame
 * at the address it was read from, each link, code object, instruction and run end, the same thread state
 * and _PyCFrame, and it does not hold the GIL), its chain is the one read before: checked with one
 * vectored read of those addresses instead of a walk (a walk reads each thread state, frame and qualname
 * with a system call of its own: on the H200 the first borrow of each backward cost 10.9 us, run 28). A
 * code object is known by its address, as the thread's own chain is (pywalk.c: same_as): a live frame
 * holds it, and its qualname was read at the walk. Each buffer adds to the call's cost (bench/vm_reads.c:
 * here a call 4-6 us, a buffer 0.2-0.4 us more), so the frames are read in spans and the qualnames not
 * again. While the lender has not run Python and allocated since the last check, its innermost frame alone
 * is read (3.9 and 3.10 read at each borrow, see borrow_quick), as is a chain deeper than LENT_RAW frames.
 * A full walk all the same every BORROW_RECHECK_NS, since another thread may have started waiting; not
 * where the lender is the main thread, which a walk picks over any other, and its chain is kept whole (a
 * deep chain's: a deeper frame could differ under an equal innermost one). */
static void *single; /* the interpreter's only thread state at the last walk, or NULL */
#define BORROW_RECHECK_NS 10000000ull

/* Between those reads, most borrows read nothing: autograd's thread allocates tens of times in one
 * backward while the main thread waits, and a read per allocation cost ~9 us a pair here. The lender's
 * chain is taken as read when, since the last read (stamp): no thread walked its own Python frames (a
 * lender that returned and ran Python, then allocated, counted one), the lender's thread state still names
 * the same _PyCFrame (3.11, 3.12) or frame (3.13), and it does not hold the GIL. Only where all of that is
 * in static memory: the lender's thread state inside _PyRuntime (the main interpreter's first thread
 * state, the main thread's) and the GIL's state; a thread state elsewhere may be freed under us. At most
 * BORROW_QUICK_MAX such borrows in a row, and within BORROW_QUICK_NS of the last read: then one read checks
 * the chain again (a lender that returned, ran Python without allocating and waits again, at another
 * instruction under the same _PyCFrame, is seen there). */
#define BORROW_QUICK_MAX 32
#define BORROW_QUICK_NS 1000000ull

/* The main thread's C stack, below the stack pointer it started with: its mapping only ever grows, so an
 * address the interpreter kept a live _PyCFrame or C-stack shim frame at (3.11-3.13: locals of the eval
 * loop) stays readable for the process's life, and is read here with plain loads where the check's system
 * call cost a buffer each (on the H200 the backward's first borrow, a read of 2 buffers, cost ~10 us, run
 * 35). Only addresses that the lender's own thread state or frames named are read so: nothing else can be
 * mapped within the range (the kernel keeps the mmap area at least 128 MiB below the stack, hence the
 * bound), and another thread's stack lies outside it. 0 when glibc does not say where it started. */
extern void *__libc_stack_end __attribute__((weak));
static uintptr_t main_stack_lo, main_stack_hi;
#define MAIN_STACK_MAX (128u << 20)

static pthread_once_t main_stack_once = PTHREAD_ONCE_INIT;
static void main_stack_find(void)
{
    if (!&__libc_stack_end || !__libc_stack_end)
        return;
    struct rlimit r;
    uintptr_t hi = (uintptr_t)__libc_stack_end, size = MAIN_STACK_MAX;
    if (getrlimit(RLIMIT_STACK, &r) == 0 && r.rlim_cur != RLIM_INFINITY && r.rlim_cur < size)
        size = (uintptr_t)r.rlim_cur;
    if (hi <= size)
        return;
    main_stack_lo = hi - size;
    main_stack_hi = hi;
}

static inline int on_main_stack(uintptr_t a, uintptr_t e)
{
    return a >= main_stack_lo && e <= main_stack_hi && a < e;
}

/* A copy of memory another thread may write meanwhile (the check compares what it read against the kept
 * chain, as with the system call's copy); its stack frames are not the sanitizers' to check. By words (a
 * byte loop took ~500 cycles for 3.12's 183 bytes here, a buffer's worth); the frames and _PyCFrame are
 * 8-aligned, and a word never crosses a page. */
__attribute__((no_sanitize("address", "thread"))) static void copy_racy(char *dst, uintptr_t src, size_t n)
{
    size_t i = 0;
    if (!(src & 7))
        for (; i + 8 <= n; i += 8) {
            const uint64_t w = *(const volatile uint64_t *)(src + i);
            __builtin_memcpy(dst + i, &w, 8);
        }
    for (; i < n; i++)
        dst[i] = *(const volatile char *)(src + i);
}

/* Whether the lender's thread state (its bytes read into ts) still names the _PyCFrame (read into cf) and
 * frame it named at the walk. */
static int still_there(const struct lent *l, const char *ts, const char *cf)
{
    const struct layout *L = ot_py.L;
    void *p;
    memcpy(&p, ts + L->ts_cframe, sizeof p);
    if (p != (l->cframe ? l->cframe : l->frame))
        return 0;
    if (l->cframe)
        memcpy(&p, cf + L->cframe_current, sizeof p);
    return p == l->frame;
}

/* The lender's whole chain, read in one vectored call at the addresses its walk read (struct lent: fa):
 * the thread state, its _PyCFrame, the frames (those within a page of each other in one span: a run of the
 * eval loop keeps its frames side by side in the thread's data stack; a span of at most a page never
 * crosses from one mapping over an unmapped one into another). Each frame
 * is taken as the walk takes it (take_frame), and its link must name the next address read (the last's
 * none): 1 when the chain is the one kept, in c with its ids. */
static int borrow_whole(struct lent *l, struct chain *c)
{
    const struct layout *L = ot_py.L;
    const unsigned need = ot_py_frame_need(), ncf = L->cframe_current + 8, nts = L->ts_cframe + 8;
    const int nraw = l->nraw, np = l->c.n;
    char ts[TS_BYTES];
    struct iovec *const lv = l->lv, *const rv = l->rv;
    if (nts > sizeof ts || need > 128)
        return 0;
    int k = 0;
    size_t total = 0, used = 0;
    /* The main thread's state lies in _PyRuntime: static, read with a plain load (as borrow_quick reads it) */
    const uintptr_t tsa = (uintptr_t)l->ts;
    if (tsa >= ot_py.runtime_lo && tsa + nts <= ot_py.runtime_hi) {
        void *p = __atomic_load_n((void *const *)(tsa + L->ts_cframe), __ATOMIC_RELAXED);
        memcpy(ts + L->ts_cframe, &p, sizeof p);
    } else {
        lv[k] = (struct iovec){ts, nts};
        rv[k++] = (struct iovec){l->ts, nts};
        total += nts;
    }
    /* The frames and the _PyCFrame (item nraw), each in the first span it fits in, a span at most a page
     * long: 3.12's _PyCFrame and the C-stack shim frame of its run share the eval loop's C frame. */
    const int nitems = nraw + (l->cframe != NULL);
    int ns = 0;
    for (int i = 0; i < nitems; i++) {
        const uintptr_t a = (uintptr_t)(i < nraw ? l->fa[i] : l->cframe), e = a + (i < nraw ? need : ncf);
        int s = 0;
        for (; s < ns; s++) {
            const uintptr_t nlo = a < l->lo[s] ? a : l->lo[s], nhi = e > l->hi[s] ? e : l->hi[s];
            if (nhi - nlo <= 4096) {
                l->lo[s] = nlo;
                l->hi[s] = nhi;
                break;
            }
        }
        if (s == ns) {
            if (ns == LENT_IOV - 1)
                return 0;
            l->lo[s] = a;
            l->hi[ns++] = e;
        }
        l->span[i] = (uint8_t)s;
    }
    /* Each span's place in scratch; those on the main thread's C stack copied with plain loads, the others
     * read in the one call, or with plain loads too where no unmap came since such a call read them all
     * (l->unmaps; common/unmaps.h): a frame stack's chunks leave only by munmap, counted. */
    uint32_t off[LENT_IOV];
    uint8_t plain[LENT_IOV];
    size_t remote = 0;
    const uint64_t unmaps = l->plain ? ot_unmaps_enter() : OT_UNMAPS_UNSURE;
    const int fast = unmaps != OT_UNMAPS_UNSURE && unmaps == l->unmaps;
    for (int s = 0; s < ns; s++) {
        const size_t len = l->hi[s] - l->lo[s];
        if (used + len > LENT_SCRATCH) {
            if (l->plain)
                ot_unmaps_leave();
            return 0;
        }
        off[s] = (uint32_t)used;
        plain[s] = (uint8_t)(fast || on_main_stack(l->lo[s], l->hi[s]));
        if (!plain[s]) {
            lv[k] = (struct iovec){l->scratch + used, len};
            rv[k++] = (struct iovec){(void *)l->lo[s], len};
            remote += len;
        }
        used += len;
    }
    for (int i = 0; i < nitems; i++) {
        const uintptr_t a = (uintptr_t)(i < nraw ? l->fa[i] : l->cframe);
        l->at[i] = (uint32_t)(off[l->span[i]] + (a - l->lo[l->span[i]]));
    }
    total += remote;
    const int read = !k || OT_STAGE_CALL(OT_ST_BORROW_READ, process_vm_readv(ot_py_self_pid(), lv, (unsigned long)k, rv,
                                                                             (unsigned long)k, 0)) == (ssize_t)total;
    /* A span read with plain loads is copied item by item, not whole: a span is the lender's frames with
     * their locals and value stacks between them, often ~40 lines, of which the check needs ~2 a frame;
     * and the lender's lines were last written on its own core. The items' addresses are all known, so
     * their misses overlap instead of following each other through the span. */
    if (read)
        for (int i = 0; i < nitems; i++)
            if (plain[l->span[i]])
                copy_racy(l->scratch + l->at[i], (uintptr_t)(i < nraw ? l->fa[i] : l->cframe), i < nraw ? need : ncf);
    if (l->plain) {
        ot_unmaps_leave();
        if (read && k && unmaps != OT_UNMAPS_UNSURE) /* every frame read through the kernel, within one count */
            l->unmaps = unmaps;
    }
    OT_STAGE_CACHE(OT_C_BORROW_PLAIN, fast);
    if (!read)
        return 0;
    const char *const cf = l->cframe ? l->scratch + l->at[nraw] : NULL;
    if (!still_there(l, ts, cf) || l->frame != l->fa[0])
        return 0;
    int n = 0;
    for (int i = 0; i < nraw; i++) {
        void *prev;
        if (take_frame(l->scratch + l->at[i], c, &n, &prev) || n > np || prev != (i + 1 < nraw ? l->fa[i + 1] : NULL))
            return 0;
    }
    if (n != np || !n)
        return 0;
    c->entry[n - 1] = 1;
    if (memcmp(c->code, l->c.code, (size_t)n * sizeof c->code[0]) || memcmp(c->instr, l->c.instr, (size_t)n * sizeof c->instr[0]) ||
        memcmp(c->entry, l->c.entry, (size_t)n))
        return 0;
    c->n = n;
    c->cut = c->gap = c->gap_runs = 0;
    memcpy(c->id, l->c.id, (size_t)n * sizeof c->id[0]);
    return 1;
}

static int borrow_quick(const struct lent *l, uint64_t stamp, uint64_t now)
{
    const struct layout *L = ot_py.L;
    uintptr_t ts = (uintptr_t)l->ts;
    if (l->quick >= BORROW_QUICK_MAX || stamp != l->stamp || now - l->checked_ns > BORROW_QUICK_NS ||
        ts < ot_py.runtime_lo || ts + L->ts_cframe + sizeof(void *) > ot_py.runtime_hi)
        return 0;
    void *p = __atomic_load_n((void *const *)(ts + L->ts_cframe), __ATOMIC_RELAXED);
    return p == (l->cframe ? l->cframe : l->frame) && gil_holder(NULL) != l->ts;
}

static int borrow_again(struct lent *l, struct chain *c, uint32_t *lender, uint64_t stamp, const struct chain **got)
{
    const struct layout *L = ot_py.L;
    uint64_t now = l && l->ts ? ot_now_ns() : 0;
    const int expired = now - (l ? l->walked_ns : 0) > BORROW_RECHECK_NS;
    if (!l || !l->ts || (expired && !(l->nraw && l->main)))
        return 0;
    int quick = borrow_quick(l, stamp, now);
    OT_STAGE_CACHE(OT_C_BORROW_QUICK, quick);
    if (quick) { /* the chain kept, where it is: its ids, run ends and cut (not copied: a merge by place
                  * that the borrow's number names reads none of them) */
        l->quick++;
        *got = &l->c;
        *lender = l->tid;
        return l->c.n;
    }
    /* The whole chain where the lender ran Python and allocated since (a forward between two backwards: its
     * frames further out may differ under the same waiting one) or where a walk is due; else (it waited all
     * along) its innermost frame, a read of three buffers. */
    if (l->nraw && (stamp != l->stamp || expired)) {
        const int whole = borrow_whole(l, c) && gil_holder(NULL) != l->ts;
        OT_STAGE_CACHE(OT_C_BORROW_WHOLE, whole);
        if (!whole)
            return 0;
        l->stamp = stamp;
        l->quick = 0;
        l->checked_ns = now;
        if (expired) /* (the main thread's: the chain a walk would pick, read whole) */
            l->walked_ns = now;
        *lender = l->tid;
        return c->n;
    }
    /* The thread state in _PyRuntime and the _PyCFrame on the main thread's C stack with plain loads (see
     * borrow_whole), the rest in one call. */
    char ts[TS_BYTES], fr[128], cf[64];
    unsigned need = ot_py_frame_need(), ncf = L->cframe_current + 8, nts = L->ts_cframe + 8;
    struct iovec local[4], remote[4];
    int k = 0;
    size_t total = 0;
    const uintptr_t tsa = (uintptr_t)l->ts, cfa = (uintptr_t)l->cframe;
    const int ts_plain = tsa >= ot_py.runtime_lo && tsa + nts <= ot_py.runtime_hi,
              cf_plain = l->cframe && on_main_stack(cfa, cfa + ncf);
    if (!ts_plain) {
        local[k] = (struct iovec){ts, sizeof ts};
        remote[k++] = (struct iovec){l->ts, sizeof ts};
        total += sizeof ts;
    }
    local[k] = (struct iovec){fr, need};
    remote[k++] = (struct iovec){l->frame, need};
    total += need;
    if (l->cframe && !cf_plain) {
        local[k] = (struct iovec){cf, ncf};
        remote[k++] = (struct iovec){l->cframe, ncf};
        total += ncf;
    }
    if (need > sizeof fr || ncf > sizeof cf || nts > sizeof ts)
        return 0;
    /* The innermost frame is the first of those borrow_whole reads: with plain loads on the same terms. */
    const int counted = l->plain && l->nraw && ts_plain && (!l->cframe || cf_plain);
    const uint64_t unmaps = counted ? ot_unmaps_enter() : OT_UNMAPS_UNSURE;
    const int fast = unmaps != OT_UNMAPS_UNSURE && unmaps == l->unmaps;
    if (fast)
        copy_racy(fr, (uintptr_t)l->frame, need);
    const int read = fast || OT_STAGE_CALL(OT_ST_BORROW_READ, process_vm_readv(ot_py_self_pid(), local, (unsigned long)k, remote,
                                                                               (unsigned long)k, 0)) == (ssize_t)total;
    if (counted)
        ot_unmaps_leave();
    OT_STAGE_CACHE(OT_C_BORROW_PLAIN, fast);
    if (!read)
        return 0;
    if (ts_plain) {
        void *p = __atomic_load_n((void *const *)(tsa + L->ts_cframe), __ATOMIC_RELAXED);
        memcpy(ts + L->ts_cframe, &p, sizeof p);
    }
    if (cf_plain)
        copy_racy(cf, cfa, ncf);
    if (!still_there(l, ts, cf))
        return 0;
    void *p, *code;
    memcpy(&code, fr + L->fr_code, sizeof code);
    if (code != l->code)
        return 0;
    if (L->frame_objects) {
        int lasti;
        memcpy(&lasti, fr + L->fr_instr, sizeof lasti);
        if ((const char *)(uintptr_t)(lasti < 0 ? 0 : lasti) != l->instr)
            return 0;
    } else {
        memcpy(&p, fr + L->fr_instr, sizeof p);
        if (p != l->instr)
            return 0;
    }
    if (gil_holder(NULL) == l->ts)
        return 0;
    l->stamp = stamp;
    l->quick = 0;
    l->checked_ns = now;
    *got = &l->c; /* (as a quick borrow: a copy was ~60 lines written) */
    *lender = l->tid;
    return l->c.n;
}

void ot_py_borrow_forked(void)
{
    __atomic_store_n(&single, NULL, __ATOMIC_RELAXED);
}

/* Whether the threads' frame stacks are unmapped through the counted munmap (common/unmaps.h): CPython's
 * arena allocator, which maps and unmaps them, is CPython's own (not one a program set with
 * PyObject_SetArenaAllocator in another object, which may be anything), and a page it maps and frees here
 * reaches the count: a CPython whose arenas come from malloc, or whose munmap binds past the tracer's (a
 * libpython loaded with RTLD_DEEPBIND), does not. Tried again only when the allocator changes. */
struct arena {
    void *ctx;
    void *(*alloc)(void *, size_t);
    void (*free)(void *, void *, size_t);
};

static void arena_try(void *arg)
{
    const struct arena *a = arg;
    void *p = a->alloc(a->ctx, 4096);
    if (p)
        a->free(a->ctx, p, 4096);
}

static int arena_counted(void)
{
    static void *tried_free;
    static int counted;
    struct arena a = {0};
    Dl_info own, set;
    if (!ot_py.get_arena)
        return 0;
    ot_py.get_arena(&a);
    if (!a.alloc || !a.free || !dladdr((void *)ot_py.get_arena, &own) || !dladdr((void *)a.free, &set) ||
        own.dli_fbase != set.dli_fbase)
        return 0;
    if (__atomic_load_n(&tried_free, __ATOMIC_ACQUIRE) == (void *)a.free)
        return __atomic_load_n(&counted, __ATOMIC_RELAXED);
    const int c = ot_unmaps_reached(arena_try, &a);
    __atomic_store_n(&counted, c, __ATOMIC_RELAXED);
    __atomic_store_n(&tried_free, (void *)a.free, __ATOMIC_RELEASE);
    return c;
}

static int borrow_off;    /* the layout check failed: no borrowing in this process */
static int holder_misses; /* full walks in a row whose GIL holder the thread list lacked */
#define HOLDER_MISSES_MAX 16

static int borrow_walk(struct chain *c, uint32_t *lender, struct py_thread *t, struct lent *l, uint64_t stamp);

/* *lender is 0 when this CPython keeps no OS thread id and the lender is not the main thread. */
int ot_py_borrow(struct chain *c, uint32_t *lender, uint64_t *cgen, const struct chain **got)
{
    *cgen = 0;
    *got = c;
    if (!ot_py.main_interp || !ot_py.thread_head || __atomic_load_n(&borrow_off, __ATOMIC_RELAXED))
        return 0;
    struct py_thread *t = ot_py_thread_get();
    struct lent *l = t ? &t->lent : NULL;
    /* Before any read of the lender: its walks count from now on (see borrow_quick). */
    if (l && !__atomic_load_n(&ot_py_lending, __ATOMIC_RELAXED))
        __atomic_store_n(&ot_py_lending, 1, __ATOMIC_SEQ_CST);
    uint64_t stamp = __atomic_load_n(&ot_py_stamp, __ATOMIC_SEQ_CST);
    int n = borrow_again(l, c, lender, stamp, got);
    if (!n) {
        if (l)
            l->ts = NULL;
        n = OT_STAGE_CALL(OT_ST_BORROW_WALK, borrow_walk(c, lender, t, l, stamp));
    }
    /* (each way that found a chain with l returns l's: borrow_again's checks found it unchanged, a walk
     * kept it there) */
    if (n && l && l->ts)
        *cgen = l->cgen;
    return n;
}

/* The lender picked among the interpreter's threads and its chain walked, each read a call of its own, its
 * frames interned (each new one's names and line table read); kept in l for borrow_again. */
static int borrow_walk(struct chain *c, uint32_t *lender, struct py_thread *t, struct lent *l, uint64_t stamp)
{
    const struct layout *L = ot_py.L;
    int n = 0;
    pthread_once(&main_stack_once, main_stack_find); /* (before any check, which follows a walk) */
    void *interp = ot_py.main_interp();
    if (!interp)
        return 0;
    void *self = ot_py.get_tstate(), *holder = gil_holder(interp), *head = ot_py.thread_head(interp);
    /* The interpreter had one thread state at the last walk, and the head is still it (a new thread
     * state would be the head): when it is this thread's or holds the GIL, nobody waits, and no read is
     * needed (the main thread of a one-thread program runs Python while a library's thread allocates). */
    if (head && head == __atomic_load_n(&single, __ATOMIC_RELAXED) && (head == self || head == holder))
        return 0;
    /* Candidates: thread states other than this thread's and the GIL holder's, with a Python frame
     * (autograd's own threads have a thread state and no frame). The list runs newest first, so the main
     * thread's state is its last: it is the one when it is a candidate, else the newest candidate. */
    void *pick = NULL, *cf = NULL, *frame = NULL;
    char ts[TS_BYTES], pick_ts[TS_BYTES];
    int holder_seen = 0, main_picked = 0;
    __atomic_store_n(&single, NULL, __ATOMIC_RELAXED);
    for (void *th = head; th && n < MAX_THREADS; n++) {
        if (ot_py_checked_read(th, ts, sizeof ts))
            return 0;
        void *next, *tcf = NULL, *tframe = NULL;
        memcpy(&next, ts + 8, sizeof next);
        holder_seen |= th == holder;
        if (th != self && th != holder) {
            memcpy(&tcf, ts + L->ts_cframe, sizeof tcf);
            if (L->ts_direct)
                tframe = tcf, tcf = NULL;
            else if (tcf && ot_py_checked_read((const char *)tcf + L->cframe_current, &tframe, sizeof tframe))
                tframe = NULL;
        }
        if (tframe && (!pick || !next)) {
            pick = th, cf = tcf, frame = tframe, main_picked = !next;
            memcpy(pick_ts, ts, sizeof ts);
        }
        th = next;
    }
    if (holder && !holder_seen && n < MAX_THREADS) {
        /* The GIL names a thread state the interpreter does not list. Once, that is a thread exiting
         * (its state leaves the list before it lets the GIL go); walk after walk, this CPython's layout is
         * not the one expected (a patch release that moved a field): borrowing stops, said once. */
        if (__atomic_add_fetch(&holder_misses, 1, __ATOMIC_RELAXED) == HOLDER_MISSES_MAX) {
            __atomic_store_n(&borrow_off, 1, __ATOMIC_RELAXED);
            ot_log("Python %s: the GIL's holder is not among the interpreter's threads; native threads' "
                   "allocations keep no Python stack", ot_py.version);
        }
        return 0;
    }
    if (holder)
        __atomic_store_n(&holder_misses, 0, __ATOMIC_RELAXED);
    if (n == 1)
        __atomic_store_n(&single, head, __ATOMIC_RELAXED);
    if (!pick)
        return 0;
    uint32_t tid = 0;
    if (L->ts_native_tid) {
        unsigned long ntid;
        memcpy(&ntid, pick_ts + L->ts_native_tid, sizeof ntid);
        tid = (uint32_t)ntid;
    }
    if (!tid && main_picked)
        tid = (uint32_t)ot_py_self_pid();
    /* the frames' addresses, kept in l for borrow_whole (its fields are read only once l->ts names the
     * lender again, below) */
    uint16_t nraw = 0;
    int stacked = 0;
    if ((n = gather_borrowed(frame, c, l ? l->fa : NULL, &nraw, &stacked)) <= 0)
        return 0;
    c->entry[n - 1] = 1;
    for (int i = 0; i < n; i++) {
        uint64_t lasti = ot_py_instr_index(c, i);
        void *name = NULL;
        if (ot_py_checked_read((const char *)c->code[i] + L->co_qualname, &name, sizeof name))
            return 0;
        if (!(c->id[i] = ot_py_frame_id(t ? t->cache : NULL, c->code[i], lasti, name)))
            return 0;
    }
    c->n = n;
    *lender = tid;
    if (l) {
        l->cframe = cf;
        l->frame = frame;
        l->code = c->code[0];
        l->instr = c->instr[0];
        l->tid = tid;
        l->stamp = stamp;
        l->quick = 0;
        l->nraw = c->cut ? 0 : nraw;
        l->main = (uint8_t)main_picked;
        /* Plain loads of the frames for a lender whose state lies in _PyRuntime (the main thread's: one
         * that no thread exit frees), whose frames all lie in its frame stack, mapped and unmapped by
         * CPython's own arena allocator through the munmap counted (arena_counted), from the first check
         * that reads them all through the kernel. */
        const uintptr_t pa = (uintptr_t)pick;
        l->plain = (uint8_t)(stacked && !c->cut && nraw && pa >= ot_py.runtime_lo &&
                             pa + L->ts_cframe + sizeof(void *) <= ot_py.runtime_hi && arena_counted());
        l->unmaps = OT_UNMAPS_UNSURE;
        l->walked_ns = l->checked_ns = ot_now_ns();
        memcpy(&l->c, c, sizeof *c);
        l->cgen++;
        l->ts = pick;
    }
    return n;
}

