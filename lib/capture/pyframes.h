/* The Python frames' parts, shared by the files that read them (capture/ only):
 *   pyprobe.c   which CPython runs, and each version's layout of what the walk reads;
 *   pyintern.c  checked reads, and (code, instruction) interned once as PYFRAMES entries;
 *   pywalk.c    the calling thread's own chain (plain loads once the layout is validated);
 *   pyborrow.c  a native thread's allocation takes a waiting Python thread's chain;
 *   pyframes.c  the chain merged into the native backtrace, the entry point.
 *
 * Nothing here takes the GIL: at a driver call the calling thread is inside native code, so its own
 * Python frame chain cannot change under us, whether or not it holds the GIL; taking the GIL could
 * deadlock (a GIL holder may wait for this thread). */
#ifndef OOMTRACE_CAPTURE_PYFRAMES_H
#define OOMTRACE_CAPTURE_PYFRAMES_H
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "capture/stacks.h"
#include "common/defs.h"

/* The str and bytes objects a code object points at: str lost its wstr fields in 3.12, which moved its
 * data 8 bytes (ASCII) and 16 bytes (compact) closer to the header. */
struct obj_layout {
    unsigned uni_state, uni_length, ascii_data, compact_utf8, compact_data;
    unsigned var_size, bytes_data;
};

/* Aligned to a line, with what every capture reads in its first 64 bytes (the walk's offsets, frame_objects,
 * co_qualname): after the step's own work the layout is one line to fetch, not two. */
struct __attribute__((aligned(64))) layout {
    unsigned ts_cframe, cframe_current;                  /* thread state -> _PyCFrame -> current frame */
    int ts_direct;                                       /* 3.13: ts_cframe is the current frame itself */
    unsigned fr_code, fr_previous, fr_instr, fr_owner;   /* _PyInterpreterFrame */
    int fr_is_entry;                                     /* 3.11: offset of is_entry; -1 otherwise */
    int owner_cstack;                                    /* 3.12: owner value of C-stack shim frames */
    /* 3.9 and 3.10: a chain of frame objects, one eval-loop run each, with f_lasti an int (3.9: a byte
     * offset, 3.10: code units) and an older line table. co_qualname is then co_name. */
    int frame_objects;
    unsigned co_firstlineno, co_filename, co_qualname, co_linetable, co_code;
    const struct obj_layout *obj;                        /* str and bytes objects */
    int lasti_bytes;    /* f_lasti counts bytes (3.9) */
    int table;          /* TABLE_LOCATIONS (3.11+), TABLE_LINES (3.10), TABLE_LNOTAB (3.9) */
    /* Borrowing (a native thread's allocation takes a waiting Python thread's stack): the thread state's
     * next (same offset, 8, in every version), its OS thread id (0: not kept, 3.9 and 3.10), and how to
     * tell which thread state holds the GIL. */
    unsigned ts_native_tid;
    int holder;          /* HOLDER_CURRENT or HOLDER_GIL */
    unsigned interp_gil; /* 3.12, 3.13: PyInterpreterState.ceval.gil */
};

/* 3.9 to 3.11: _PyThreadState_UncheckedGet() is the runtime's current thread state, the GIL holder (NULL
 * while nobody holds it). 3.12 and 3.13: that is thread-local; the interpreter's GIL (a
 * _gil_runtime_state: interval, last_holder at 8, locked at 16) says who holds it. */
enum { HOLDER_CURRENT = 0, HOLDER_GIL = 1 };

enum { TABLE_LOCATIONS = 0, TABLE_LINES = 1, TABLE_LNOTAB = 2 };

/* ---- pyprobe.c ---- */
enum { PY_UNPROBED, PY_ABSENT, PY_ON, PY_OFF };

/* What the probe found: set once, before state is published PY_ON with a release store; a thread that
 * reads PY_ON (acquire) sees it complete. Aligned to a line that holds state and what every capture reads
 * next (L, get_tstate, is_initialized): one line to fetch after the step's own work. */
struct __attribute__((aligned(64))) ot_py {
    int state; /* PY_UNPROBED .. PY_OFF */
    const struct layout *L;
    void *(*get_tstate)(void);
    int (*is_initialized)(void);
    void *(*main_interp)(void), *(*thread_head)(void *), *(*gil_current)(void);
    const void *code_type, *unicode_type, *bytes_type;
    uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's code */
    uintptr_t runtime_lo, runtime_hi; /* _PyRuntime: static, holds the main interpreter's first thread state */
    void (*get_arena)(void *); /* PyObject_GetArenaAllocator */
    char version[32];
};
extern struct ot_py ot_py;
void ot_py_probe(void);             /* once (pthread_once) */
void ot_py_publish(int state);      /* PY_OFF after a failed layout check */

/* ---- pyintern.c ---- */
pid_t ot_py_self_pid(void);
void ot_py_pid_forked(void);
/* Reads n bytes at addr through process_vm_readv, which fails instead of faulting: 0 or -1. */
int ot_py_checked_read(const void *addr, void *out, size_t n);

/* A per-thread cache of recent (code, lasti) -> id: the common case takes no lock. */
#define CACHE 256
struct cache_entry {
    uint64_t code, lasti, name;
    uint32_t id;
};
/* The PYFRAMES id of (code, instruction lasti), resolved on first sight; 0 when the code object fails
 * its checks. cache may be NULL. */
uint32_t ot_py_frame_id(struct cache_entry *cache, const void *code, uint64_t lasti, const void *name);

/* ---- pywalk.c ---- */
#define MAXPY 128
/* A chain deeper than MAXPY keeps its MAXPY - PY_OUTER innermost frames and its PY_OUTER outermost ones
 * (walk 7, #16): the program's own outer frames (<module>, the training loop) tell its call sites apart,
 * where the innermost alone (deep recursion, nested modules) merged them. PY_DEEP bounds the walk. */
#define PY_OUTER 32
#define PY_DEEP 65536

/* One walk: the chain innermost first as (code, instruction) pairs, whether each frame is the outermost
 * of one run of the eval loop, and (after interning) its PYFRAMES id. cut: frames were left out; gap: the
 * index of the first outermost frame kept after the cut (0: the outermost ones are not known either);
 * gap_runs: how many runs of the eval loop begin from frame gap - 1 to frame gap (0: both in one run). */
struct chain {
    int n;
    int cut, gap, gap_runs;
    const void *code[MAXPY];
    const char *instr[MAXPY];
    uint8_t entry[MAXPY];
    uint32_t id[MAXPY];
    /* each code's qualified name, set with the ids (ot_py_walk_ids): a code object that died between two
     * captures and whose memory a new function's code took has the same address, and may have the same
     * instruction, so the thread's last chain is the same only with the same names (as ids are keyed) */
    const void *name[MAXPY];
};

/* A native thread's last borrow (pyborrow.c). The chain's frames by address (fa, C-stack shims included),
 * as the walk read them: a later borrow checks the whole chain in one vectored read of those addresses
 * (nraw 0: not kept, a chain deeper than LENT_RAW frames). */
#define LENT_RAW 96
#define LENT_SCRATCH 16384 /* the check's buffer: the frames' spans */
#define LENT_IOV (2 + LENT_RAW)
struct lent {
    void *ts, *cframe, *frame;
    const void *code;
    const char *instr;
    uint32_t tid;
    uint64_t walked_ns, checked_ns; /* when the chain was last read, and last read or checked */
    uint64_t stamp;  /* ot_py_stamp when the chain was last read or checked */
    uint32_t quick;  /* borrows since then that read nothing but static memory */
    uint16_t nraw;
    uint8_t main;    /* the lender is the main thread: picked over any other waiting thread */
    /* The frames may be read with plain loads (pyborrow.c: borrow_whole): the lender's state is in
     * _PyRuntime and each frame lives in its frame stack or on the main thread's C stack (plain), and the
     * process's unmaps counted at the last read of all of them through the kernel (unmaps). */
    uint8_t plain;
    uint64_t unmaps;
    /* c's number: bumped each time a walk sets c anew, so that a borrow returning c's chain names it (the
     * borrowed stacks by place and chain, pyframes.c: struct blink); never 0 once c is set */
    uint64_t cgen;
    struct chain c;
    const void *fa[LENT_RAW];
    /* the check's reads, here rather than on the borrowing thread's stack (it may be a small one) */
    uint32_t at[LENT_RAW + 1];  /* frame i's bytes in scratch (at[nraw]: the _PyCFrame's) */
    uint8_t span[LENT_RAW + 1]; /* the span each is read in */
    uintptr_t lo[LENT_IOV], hi[LENT_IOV];
    struct iovec lv[LENT_IOV], rv[LENT_IOV];
    char scratch[LENT_SCRATCH];
};

/* Counts the walks of threads' own Python frames while some thread keeps a borrow (ot_py_lending): a lender
 * that ran Python since a borrow was checked, and allocated, changed it. */
extern uint64_t ot_py_stamp;
extern int ot_py_lending;

/* A thread's cache, and its previous walk: in a loop the same call sites come back, and a chain equal to
 * the last one in every (code, instruction) pair has the same ids, found with three memcmp and no lookup.
 * The code objects are alive (the frames hold them), so equal pointers mean the same code.
 * Mapped at the thread's first walk rather than kept in static TLS: glibc carves a thread's static TLS out
 * of its stack, and these 11 KB made pthread_create fail on PTHREAD_STACK_MIN stacks (issue 15, item 5). */
/* The thread's last merged stack (pyframes.c): the native frames it was made of, and the result. Made from
 * the chain in last, so it holds while the walk finds that chain again (ot_py_walk's *same). */
struct merged {
    int valid, n, max, out;
    unsigned flags; /* what the merge added to the stack's flags */
    struct mentry *ref; /* the merged stack by place it is (then nothing below is used), or NULL */
    uint64_t native[OT_MAX_FRAMES];
    uint64_t frames[OT_MAX_FRAMES];
};

/* The thread's merged stacks by place (pyframes.c): a training step allocates from a hundred places in
 * turn, so the last merged stack (struct merged) rarely is the one; each entry is keyed by all it was made
 * of, the native frames and the chain's (code, instruction, qualname, entry) of every frame, and holds the
 * chain's ids and the merged stack. A borrowed stack's entry is keyed by the native frames, the lender's
 * chain as interned (ids, entry) and the lender (bflags). Mapped at the thread's first miss, MSETS sets
 * of 2. */
#define MSETS 512
#define MNATIVE 96
#define MPY 64
#define MRAW 80 /* frames of a chain kept by address, C-stack shims included */
struct mentry {
    uint64_t h;
    uint16_t n, np, out, max;
    uint16_t nraw; /* the frames' addresses, innermost first, that the chain was last read from (fa) */
    uint32_t ver;  /* bumped at each refill: a walk's link (ot_native_link) names the entry at one version */
    unsigned flags;
    unsigned bflags; /* a borrowed stack's: OT_STACK_BORROWED and the lender (keyed by ids, not code); else 0 */
    struct ot_stack_memo sid; /* the id the stack was interned as (capture/stacks.h), zeroed when refilled */
    /* the walk kept by place (ot_backtrace_place) whose frames native was last found equal to, or filled
     * from: that walk's frames need no compare (pyframes.c: native_same); 0: none */
    uint64_t ngen;
    uint64_t native[MNATIVE];
    const void *code[MPY], *name[MPY];
    const char *instr[MPY];
    uint8_t entry[MPY];
    uint32_t id[MPY];
    uint64_t frames[MNATIVE + MPY];
    const void *fa[MRAW];
};
/* The merged stacks by the walk kept by place that gave their native frames (backtrace.h:
 * ot_backtrace_place) and the innermost Python frame and its instruction, PLSETS sets of PLWAYS: each names
 * an entry above at its version, and its chain's frames' addresses are the entry's (fa). Several chains
 * share a key where only outer frames differ (one line calling from several callers): the check tells. */
#define PLSETS 256
#define PLWAYS 4
struct plink {
    uint64_t gen;
    const void *f0, *i0;
    struct mentry *r;
    uint32_t ver, used;
};
/* The borrowed stacks by the walk kept by place that gave their native frames and the lender's chain as the
 * thread's last borrow kept it (struct lent: cgen), BLSETS sets of one: each names an entry above at its
 * version. An autograd thread borrows one chain for a whole backward, from ~50 places (pyframes.c:
 * merge_borrowed). */
#define BLSETS 512
struct blink {
    uint64_t gen, cgen;
    struct mentry *r;
    uint32_t ver;
    unsigned bflags;
};
/* The merged stacks by place last found for the walk kept by place that gave the native frames and the
 * innermost Python frame and its instruction: PPSETS sets of PPWAYS guesses in one line, by their key's
 * hash (tag), each naming an entry by its index at (the low bits of) its version. Only guesses, each checked
 * against the entry's whole key (pyframes.c: merge_predicted); they spare hashing the chain first. Several
 * chains share a key where only outer frames differ (a module's forward calling two layers of one kind, in
 * turn), and a chain of the warm steps may stay: the way found after each way (succ) is tried first, so
 * chains that come in turn are each found at once. */
#define PPSETS 1024
#define PPWAYS 6
struct ppred {
    uint32_t tag;  /* 0: empty */
    uint16_t ver;
    uint16_t at;   /* the entry, mc->e[0][0] + at */
};
struct ppset {
    struct ppred w[PPWAYS];
    uint8_t last;          /* the way found or noted last */
    uint8_t victim;        /* the way a new guess takes when none is empty */
    uint8_t succ[PPWAYS];  /* the way found or noted after each */
} __attribute__((aligned(64)));
struct mcache {
    struct mentry e[MSETS][2];
    uint8_t older[MSETS]; /* the way to replace next */
    struct ppset pp[PPSETS];
    struct plink pl[PLSETS][PLWAYS];
    uint32_t pltick;
    struct blink bl[BLSETS];
};

/* The frames the thread's last full read of its chain went through (their addresses), fetched at the start
 * of its next capture (ot_python_prefetch): after the step's work between two allocations they are cold,
 * and the chain is read one frame's link after another, each a miss of its own; fetched first, together
 * and while the native walk runs. Only a hint: a frame that went is fetched for nothing. */
#define PY_PF 32
struct py_thread {
    uint32_t npf;
    int pf_whole; /* pf holds the whole chain that this capture read (npf frames, shims included) */
    /* When not NULL, the thread's last chain is this entry's (its np frames' code, instr, entry and id), not
     * the copy in last (then stale); it is the thread's last merged stack (merged.ref). A capture whose chain
     * a merged stack by place held copied it into last, ~10 lines cold after the step's work that the next
     * capture seldom reads. Here, in the line the capture writes first, as the check reads it first. */
    const struct mentry *last_ref;
    uint32_t last_np;
    int fast; /* this thread saw the layout validated (pywalk.c): its own copy, in the line it writes first */
    uint64_t last_gen; /* the walk kept by place of the thread's last capture that could guess (pyframes.c) */
    uint32_t captures; /* so far: at OT_TABLE_HOT the thread's tables move onto 2 MiB pages (common/tables.h) */
    const void *pf[MRAW];
    struct cache_entry cache[CACHE];
    struct chain last;
    struct lent lent; /* a native thread's last borrow (borrow_again) */
    struct merged merged;
    struct mcache *mc; /* NULL until the first miss; then in the same table, at PY_MC_AT */
};
/* A thread's table (common/tables.h): its struct py_thread, then its merged stacks by place. The merged
 * stacks' pages are touched from the first miss on, as they were when mapped apart. */
#define PY_MC_AT ((sizeof(struct py_thread) + 4095) / 4096 * 4096)
#define PY_TABLE (PY_MC_AT + sizeof(struct mcache))
#define PY_THREAD_NONE ((struct py_thread *)1) /* none to be had (exited, or mmap failed): walks go uncached */
extern __thread struct py_thread *ot_py_tls __attribute__((tls_model("initial-exec")));
struct py_thread *ot_py_thread_get(void); /* NULL: none */

/* Frame i's instruction, counted in code units from the start of its code object. */
uint64_t ot_py_instr_index(const struct chain *c, int i);
/* The bytes of one frame that the walk reads: code, previous, instruction and owner. */
unsigned ot_py_frame_need(void);
/* The calling thread's chain, ids interned, at *got (c, or the thread's last chain when it is the same);
 * returns its length, 0 when it has no Python frame (or the check failed). *same: the chain is the one
 * the thread's previous walk found (the thread's last). */
int ot_py_walk(struct chain *c, const struct chain **got, int *same);
/* ot_py_walk in two halves, so that a chain found in the merged-stack cache (pyframes.c) is not interned
 * again: the chain gathered (its ids only when *same), 0 when none, -1 when a check refused it, *fast when
 * the layout was validated; then its ids and the thread's last chain (ot_py_walk_ids: n, or 0 when a check
 * failed), or, found in an entry of that cache, the entry named the thread's last chain
 * (ot_py_walk_last_is_ref). *same 2: the chain is that entry's, and *got NULL until ot_py_walk_last copies
 * it into the thread's last chain (for a merge that needs it whole) and returns it. */
int ot_py_walk_gather(struct chain *c, const struct chain **got, int *same, int *fast);
/* ot_py_walk_gather in two: up to the check against the thread's last chain (its result, or
 * OT_PY_WALK_MORE with the innermost frame at *frame), then the chain's read (ot_py_walk_rest). Between
 * them, a chain may be found among the merged stacks by place without being read into c: ot_py_walk_hash
 * (its length and the key's hash of it, or -1), then ot_py_walk_is against an entry (with the layout
 * validated and without frame objects: 3.11 and later). */
#define OT_PY_WALK_MORE (-2)
int ot_py_walk_begin(struct chain *c, const struct chain **got, int *same, int *fast, void **frame, int check_last);
int ot_py_walk_rest(void *frame, struct chain *c, const struct chain **got, int *same, int fast);
int ot_py_walk_hash(void *frame, uint64_t *ca, uint64_t *cb);
int ot_py_walk_is(void *frame, int np, const void *const *code, const char *const *instr, const void *const *name,
                  const uint8_t *entry);
/* ot_py_walk_is that keeps the frames' addresses for the next capture's prefetch, as ot_py_walk_hash does
 * (the thread's cache must exist: a capture with a merged stack by place has one) */
int ot_py_walk_is_kept(void *frame, int np, const void *const *code, const char *const *instr,
                       const void *const *name, const uint8_t *entry);
/* A merged stack's key is hashed from its native frames and the code and instruction of its chain's frames,
 * mixed into two lanes from OT_PY_HASH_A and OT_PY_HASH_B: the same from a chain read (pyframes.c) as from
 * the frames (ot_py_walk_hash); the rest of the key (qualnames, run ends) is compared, not hashed. */
#define OT_PY_HASH_A 0x243F6A8885A308D3ull
#define OT_PY_HASH_B 0x9E3779B97F4A7C15ull
static inline void ot_py_chain_mix(uint64_t *a, uint64_t *b, const void *code, const void *instr)
{
    const uint64_t k = 0xff51afd7ed558ccdull;
    *a = (*a ^ (uint64_t)(uintptr_t)code) * k;
    *b = (*b ^ (uint64_t)(uintptr_t)instr) * k;
}
int ot_py_walk_ids(struct chain *c, int n, int fast);
void ot_py_walk_last_is_ref(struct py_thread *t, const struct mentry *r); /* r: the last merged stack (merged.ref) */
const struct chain *ot_py_walk_last(void);
/* A chain whose walk filled MAXPY frames with frame (the next) still to read: walks on to the outermost
 * frame and keeps the PY_OUTER outermost in place of the innermost ones past MAXPY - PY_OUTER, setting cut,
 * gap and gap_runs. checked: every read through ot_py_checked_read (another thread's chain). Returns MAXPY,
 * or -1 when a frame fails its check. */
int ot_py_walk_deep(void *frame, struct chain *c, int checked);

/* ---- pyborrow.c ---- */
/* A waiting Python thread's chain (ids interned) at *got: c, filled, or the chain the thread's last borrow
 * keeps (struct lent) where the borrow found it unchanged without reading it whole (not copied: ~60 lines).
 * Returns its length, 0 when no thread waits;
 * sets *lender to the lender's OS thread id and *cgen to the number of the chain the thread's last borrow
 * keeps when *got is that chain, else 0. */
int ot_py_borrow(struct chain *c, uint32_t *lender, uint64_t *cgen, const struct chain **got);
void ot_py_borrow_forked(void);
#endif
