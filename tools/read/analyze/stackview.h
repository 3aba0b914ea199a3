/* Stacks as people read them. For a Python program the answer is "train.py:42 in forward", not eight
 * frames of libffi, cudart and c10: a stack with Python frames is shown as one "via" line (the innermost
 * native frame that is not the CUDA runtime, the driver, an allocator or interpreter plumbing), then its
 * Python frames innermost first, then how many native frames were hidden. A site's headline names its
 * innermost Python frame, or, without one, its innermost meaningful native frame.
 *
 * Everything here writes untrusted strings through ot_fput_safe, so callers may print the results raw. */
#ifndef OT_READ_STACKVIEW_H
#define OT_READ_STACKVIEW_H

#include <stdio.h>

#include "symbols/resolve.h"
#include "model/snapshot.h"

/* True for a native frame a reader does not need: no function name, or inside the CUDA runtime or
 * driver, an allocator (caching allocators, cudaMalloc wrappers, empty_generic), libffi/ctypes, the
 * Python interpreter, libc or the tracer. Python frames are never plumbing. */
bool ot_frame_is_plumbing(const struct ot_frame *f);
/* True for a native frame with no function name (its binary is not on this machine, or stripped) in a module
 * that is not plumbing: the program's own code, shown as module+offset; a headline names it before any
 * plumbing frame. */
bool ot_frame_is_unnamed_own(const struct ot_frame *f);

/* A walk over one stack's frames: the only loop that turns STACKS words into frames (ot_resolve: a word
 * is one frame, or several where debug info shows calls inlined there). Innermost first, or outermost
 * first with OT_WALK_OUTERMOST; every frame, or only those `OT_WALK_PY` or `OT_WALK_NATIVE` keeps.
 *
 *     struct ot_frame_walk w;
 *     for (ot_walk_begin(&w, res, st, OT_WALK_PY); ot_walk_next(&w);)
 *         ... w.f, w.depth ...
 */
enum {
    OT_WALK_ALL = 0,
    OT_WALK_PY = 1,         /* Python frames only */
    OT_WALK_NATIVE = 2,     /* native frames that are not plumbing: what a native headline is made of */
    OT_WALK_OUTERMOST = 16, /* or'ed in: outermost first (a flame graph's order) */
};

struct ot_frame_walk {
    /* The frame next() stopped at. It lives as long as the resolver: callers may keep the pointer. */
    const struct ot_frame *f;
    bool py;              /* a Python frame (f->file, f->function, f->line); else native (f->module ...) */
    struct ot_str module; /* native: the base name of f's loaded object (p NULL when unknown); Python: none */
    uint64_t word;        /* the STACKS word f comes from (a word's inlined calls share it) */
    size_t depth;         /* f's place among the frames this walk keeps, 0 first */
    /* The walk's own place. */
    struct ot_resolver *res_;
    const struct ot_stack *st_;
    const struct ot_frame *fr_;
    size_t i_, k_, n_, kept_;
    unsigned how_;
};

/* st may be NULL (a stack id not in STACKS): the walk then has no frame. */
void ot_walk_begin(struct ot_frame_walk *w, struct ot_resolver *res, const struct ot_stack *st, unsigned how);
/* Moves to the next kept frame; false past the last. */
bool ot_walk_next(struct ot_frame_walk *w);

/* Whose frame the walk stands at: the program's own Python code (userline.h's rule), plumbing (the
 * CUDA runtime, driver, allocators, interpreter, C runtime and the tracer itself: ot_frame_is_plumbing),
 * or a framework's ("torch", "cupy", "jax" from its native library or its installed Python package; NULL
 * for none). Asked, not precomputed: each is a few string searches. */
bool ot_walk_is_user(const struct ot_frame_walk *w);
bool ot_walk_is_plumbing(const struct ot_frame_walk *w);
const char *ot_walk_framework(const struct ot_frame_walk *w);

struct ot_stack_info {
    bool found;                    /* the id is in STACKS */
    size_t nframes;                /* frames after expansion of inlined calls */
    size_t npy, nnative;
    const struct ot_frame *head;   /* what the headline names; NULL when the stack is unknown or empty */
    const struct ot_frame *caller; /* the Python frame that called head (Python heads only), or NULL */
    const struct ot_frame *via;    /* Python stacks: the innermost meaningful native frame inside the
                                    * innermost Python frame, or NULL */
    const struct ot_frame *user;   /* the innermost frame of the program's own code (userline.h), or NULL;
                                    * equal to head when the innermost Python frame is the user's */
    size_t user_depth;             /* Python frames inside user (0: user is head) */
    bool mp_worker;                /* a Python frame is the standard library's multiprocessing (userline.h) */
    uint64_t flags;                /* OT_STACK_* */
};

void ot_stack_info(struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id, struct ot_stack_info *out);

/* "train.py:42 in forward", "torch/nn/modules/linear.py:134 in Linear.forward" (files as
 * analyze/userline's ot_site_file spells them) for Python, "load_weights (scenario.h:23)" for a
 * native frame with debug info, "at::native::empty_cuda (libtorch_cuda.so)" from dump-time names (C++
 * parameter lists dropped), "0x7f.. (libfoo.so+0x12)" without a name. */
void ot_put_short_frame(FILE *f, const struct ot_frame *fr);
/* The headline: the user's line first, then the library frame it went through ("h8.py:19 in evaluate →
 * linear.py:134 in Linear.forward"); head alone when it is the user's own frame or no user frame exists;
 * "a multiprocessing worker → head" without a user's frame in a worker multiprocessing started (spawned:
 * the line that made the Pool is in another process), "a multiprocessing worker" alone when head is
 * multiprocessing's own (a task that is a C function: its Pool's line that called it is no one's site).
 * with_caller adds ", called from <caller>" for such a head. "(unknown stack)" when none. */
void ot_put_headline(FILE *f, const struct ot_stack_info *si, bool with_caller);
/* The same as a malloc'd NUL-terminated string (NULL when out of memory). */
char *ot_headline_str(const struct ot_stack_info *si, bool with_caller);
/* ot_put_short_frame as a malloc'd NUL-terminated string (NULL when out of memory). */
char *ot_short_frame_str(const struct ot_frame *fr);

/* One frame in full, as the text report prints it (Python: path:line in function; native:
 * function (file:line), function+0xOFF (module) or 0xADDR (module+0xOFF)). */
void ot_put_frame(FILE *f, const struct ot_frame *fr);

/* The Python-first rendering of a stack: returns false (and writes nothing) when the stack has no
 * Python frame, so the caller shows the native frames instead. max_frames limits the Python frames. */
/* Under a borrowed stack (OT_STACK_BORROWED): one line naming the thread that lent its Python frames and
 * the call it waited in. Nothing for other stacks. */
void ot_put_borrowed_note(FILE *f, struct ot_resolver *res, const struct ot_snapshot *s, const struct ot_stack *st,
                          const char *indent);
bool ot_put_stack_python_first(FILE *f, struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id,
                               const char *indent, size_t max_frames);

/* The Python frames from the program's own innermost frame outward (a group's line and its callers),
 * numbered as in the Python-first view, up to max_frames; false (nothing written) without a user frame. */
bool ot_put_stack_from_user(FILE *f, struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id,
                            const char *indent, size_t max_frames);

/* Where two stacks part: a's innermost Python frame that is not b's Python frame at the same depth
 * (depth 0: the innermost Python frame), with its depth in *depth; NULL when every Python frame of a is
 * b's. Tells apart sites that share a headline. */
const struct ot_frame *ot_stack_first_difference(struct ot_resolver *res, const struct ot_snapshot *s, uint64_t a,
                                                 uint64_t b, size_t *depth);

/* A stack of a snapshot, with the resolver that names its frames (the two sides of --diff differ). */
struct ot_stack_ref {
    struct ot_resolver *res;
    const struct ot_snapshot *s;
    uint64_t id;
};

/* Where a's stack parts from b's: a's frame at the first depth where b's differs, counting the frames a
 * headline is made of (the Python frames when a has any, else the native frames that are not plumbing;
 * depth 0: the innermost), with that depth in *depth; NULL when b has every one of a's. */
const struct ot_frame *ot_stack_parting(const struct ot_stack_ref *a, const struct ot_stack_ref *b, size_t *depth);

/* For sites whose headlines read the same (two C call sites reaching the allocation through one helper:
 * "grab (my_prog.c:7)" twice), the caller that tells each from all the others. */
struct ot_parting {
    const struct ot_frame *frame; /* NULL: no other site of v reads the same, or nothing tells them apart */
    size_t depth;                 /* 1: the headline's own caller; more: frames they share lie between */
};
/* Fills out[0..n) for the stacks v[0..n): each one's frame at the deepest depth where it parts from a
 * stack with the same headline. -1 when out of memory (out is then all NULL). Quadratic in n, a --top. */
int ot_headline_partings(const struct ot_stack_ref *v, size_t n, struct ot_parting *out);
/* " ← main (my_prog.c:21)", or " ← … ← main (my_prog.c:21)" past shared frames; nothing for no frame. */
void ot_put_parting(FILE *f, const struct ot_parting *p);
char *ot_parting_str(const struct ot_parting *p); /* the same as a string ("" for none); NULL when out of memory */

/* Every frame in full (the --native view), up to max_frames. */
void ot_put_stack_native(FILE *f, struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id,
                         const char *indent, size_t max_frames);

/* A name without its C++ parameter list: "ns::f(int) const" -> "ns::f"; other names unchanged. */
struct ot_str ot_short_function(struct ot_str name);

#endif
