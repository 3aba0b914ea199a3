#include "analyze/stackview.h"

#include "analyze/userline.h"

#include <inttypes.h>
#include <stdlib.h>

struct ot_str ot_short_function(struct ot_str name)
{
    if (!name.p)
        return name;
    int depth = 0;
    for (size_t i = 0; i < name.n; i++) {
        char c = name.p[i];
        if (c == '<' || c == '{' || c == '[') {
            depth++;
        } else if (c == '>' || c == '}' || c == ']') {
            if (depth > 0)
                depth--;
        } else if (c == '(' && depth == 0) {
            static const char anon[] = "(anonymous namespace)";
            if (name.n - i >= sizeof(anon) - 1 && memcmp(name.p + i, anon, sizeof(anon) - 1) == 0) {
                i += sizeof(anon) - 2;
                continue;
            }
            if (i >= 8 && memcmp(name.p + i - 8, "operator", 8) == 0 && i + 1 < name.n && name.p[i + 1] == ')') {
                i++;
                continue;
            }
            if (i == 0)
                return name;
            size_t n = i;
            while (n > 0 && name.p[n - 1] == ' ')
                n--;
            return (struct ot_str){name.p, n};
        }
    }
    return name;
}

/* Modules: the CUDA runtime and driver, PyTorch's c10 allocator libraries, the tracer, the machinery between
 * Python and C (libffi, ctypes, the interpreter) and the C runtime (its start frames, __libc_start_call_main,
 * are on every stack); CuPy's memory pool and runtime bindings. */
static bool module_is_plumbing(struct ot_str module)
{
    static const char *const modules[] = {
        "libcuda.so", "libcuda-", "libcudart", "libnvidia-", "libc10_cuda", "libc10.so", "liboomtrace",
        "libffi", "libpython", "python", "_ctypes", "libc.so", "libc-", "ld-linux", "libpthread",
        "libstdc++", "libgcc_s",
    };
    struct ot_str mb = ot_base_name(module);
    for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++)
        if (ot_str_starts(mb, modules[i]))
            return true;
    return ot_str_contains(module, "cupy_backends/") || ot_str_contains(module, "cupy/cuda/memory");
}

bool ot_frame_is_unnamed_own(const struct ot_frame *f)
{
    return f->kind == OT_FRAME_NATIVE && (!f->function.p || f->function.n == 0) && f->module.p && f->module.n &&
           f->has_module_offset && !module_is_plumbing(f->module);
}

bool ot_frame_is_plumbing(const struct ot_frame *f)
{
    if (f->kind == OT_FRAME_PY)
        return false;
    if (!f->function.p || f->function.n == 0)
        return true;
    if (module_is_plumbing(f->module))
        return true;
    /* Functions: allocators and allocation helpers, and the interpreter's C API. */
    struct ot_str fn = ot_short_function(f->function);
    static const char *const parts[] = {
        "Allocator", "allocator", "Malloc", "malloc", "cuMem", "empty_generic", "empty_strided_generic",
        "_PyEval", "_PyObject", "PyObject_", "_PyFunction", "PyVectorcall", "cfunction_", "method_vectorcall",
    };
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (ot_str_contains(fn, parts[i]))
            return true;
    if (ot_str_starts(fn, "_Py") || (ot_str_starts(fn, "Py") && fn.n > 2 && fn.p[2] >= 'A' && fn.p[2] <= 'Z'))
        return true;
    return false;
}

void ot_walk_begin(struct ot_frame_walk *w, struct ot_resolver *res, const struct ot_stack *st, unsigned how)
{
    memset(w, 0, sizeof(*w));
    w->res_ = res;
    w->st_ = st;
    w->how_ = how;
    if ((how & OT_WALK_OUTERMOST) && st)
        w->i_ = st->nframes;
}

bool ot_walk_next(struct ot_frame_walk *w)
{
    bool outer = w->how_ & OT_WALK_OUTERMOST;
    unsigned only = w->how_ & (OT_WALK_PY | OT_WALK_NATIVE);
    for (;;) {
        if (w->k_ == w->n_) { /* this word's frames are done: resolve the next word */
            if (!w->st_ || (outer ? w->i_ == 0 : w->i_ >= w->st_->nframes))
                return false;
            w->word = w->st_->frames[outer ? --w->i_ : w->i_++];
            w->n_ = ot_resolve(w->res_, w->word, &w->fr_);
            w->k_ = 0;
            continue;
        }
        /* A word's inline chain is innermost first too: walked backwards when the stack is. */
        const struct ot_frame *f = &w->fr_[outer ? w->n_ - 1 - w->k_ : w->k_];
        w->k_++;
        bool py = f->kind == OT_FRAME_PY;
        if ((only == OT_WALK_PY && !py) || (only == OT_WALK_NATIVE && (py || ot_frame_is_plumbing(f))))
            continue;
        w->f = f;
        w->py = py;
        w->module = py ? (struct ot_str){NULL, 0} : ot_base_name(f->module);
        w->depth = w->kept_++;
        return true;
    }
}

bool ot_walk_is_user(const struct ot_frame_walk *w)
{
    return ot_frame_is_user(w->f);
}

bool ot_walk_is_plumbing(const struct ot_frame_walk *w)
{
    return ot_frame_is_plumbing(w->f);
}

const char *ot_walk_framework(const struct ot_frame_walk *w)
{
    const struct ot_frame *f = w->f;
    if (!w->py) {
        if (ot_str_starts(w->module, "libtorch") || ot_str_starts(w->module, "libc10"))
            return "torch";
        if (ot_str_contains(f->module, "-packages/cupy"))
            return "cupy";
        if (ot_str_contains(f->module, "-packages/jaxlib") || ot_str_starts(w->module, "xla_extension"))
            return "jax";
        return NULL;
    }
    /* Installed packages only: a virtual environment's own path may say torch (/opt/torch/.venv). */
    if (ot_str_contains(f->file, "-packages/torch/"))
        return "torch";
    if (ot_str_contains(f->file, "-packages/cupy/") || ot_str_contains(f->file, "-packages/cupy_backends/"))
        return "cupy";
    if (ot_str_contains(f->file, "-packages/jax/") || ot_str_contains(f->file, "-packages/jaxlib/"))
        return "jax";
    return NULL;
}

void ot_stack_info(struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id, struct ot_stack_info *out)
{
    memset(out, 0, sizeof(*out));
    const struct ot_stack *st = ot_snapshot_stack(s, stack_id);
    if (!st)
        return;
    out->found = true;
    out->flags = st->flags;
    const struct ot_frame *first_native = NULL, *first_named = NULL, *first_meaningful = NULL, *first_own = NULL;
    const struct ot_frame *via_candidate = NULL;
    const struct ot_frame *callee = NULL; /* the Python frame inside x */
    bool seen_py = false, caller_settled = false;
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, res, st, OT_WALK_ALL); ot_walk_next(&w);) {
        const struct ot_frame *x = w.f;
        out->nframes++;
        if (w.py) {
            out->npy++;
            out->mp_worker = out->mp_worker || ot_frame_is_multiprocessing(x);
            if (!seen_py) {
                seen_py = true;
                out->head = x;
                out->via = via_candidate;
            } else if (!out->caller || (!caller_settled && ot_frame_on_callers_line(out->caller, x))) {
                /* A comprehension's frame gives way to the function on its line (the parting's rule). */
                caller_settled = out->caller != NULL;
                out->caller = x;
            } else {
                caller_settled = true;
            }
            if (!out->user && ot_frame_is_user_calling(x, callee)) {
                out->user = x;
                out->user_depth = out->npy - 1;
            }
            callee = x;
            continue;
        }
        out->nnative++;
        if (!first_native)
            first_native = x;
        if (!first_named && x->function.p && x->function.n)
            first_named = x;
        if (!first_own && !first_meaningful && ot_frame_is_unnamed_own(x))
            first_own = x;
        if (!ot_walk_is_plumbing(&w)) {
            if (!first_meaningful)
                first_meaningful = x;
            if (!seen_py && !via_candidate)
                via_candidate = x;
        }
    }
    /* A program read away from its binary has no names for its own frames: its innermost such frame
     * ("prog+0x127c") names the site, never the C runtime's start frame that every stack ends in. */
    if (!seen_py)
        out->head = first_own ? first_own : first_meaningful ? first_meaningful : first_named ? first_named : first_native;
}

static void put_s(FILE *f, struct ot_str s)
{
    ot_fput_safe_max(f, s, 512);
}

void ot_put_short_frame(FILE *f, const struct ot_frame *fr)
{
    if (fr->kind == OT_FRAME_PY) {
        if (!fr->function.p && !fr->file.p) {
            fprintf(f, "<Python frame %" PRIu64 " not recorded>", fr->pyframe_id);
            return;
        }
        put_s(f, fr->file.p ? ot_site_file(fr->file) : ot_cstr("?"));
        if (fr->has_line)
            fprintf(f, ":%" PRIu64, fr->line);
        fputs(" in ", f);
        put_s(f, fr->function.p ? fr->function : ot_cstr("?"));
        return;
    }
    struct ot_str mb = ot_base_name(fr->module);
    if (fr->function.p && fr->function.n) {
        put_s(f, ot_short_function(fr->function));
        if (fr->symbolized && fr->file.p) {
            fputs(" (", f);
            put_s(f, ot_site_file(fr->file));
            if (fr->has_line)
                fprintf(f, ":%" PRIu64, fr->line);
            fputc(')', f);
        } else if (mb.p) {
            fputs(" (", f);
            put_s(f, mb);
            fputc(')', f);
        }
        return;
    }
    /* Without a name, the place in its file ("prog+0x127c", what addr2line takes), which is the same in
     * every run; the address alone when the module is unknown. */
    if (mb.p && fr->has_module_offset) {
        put_s(f, mb);
        fprintf(f, "+0x%" PRIx64, fr->module_offset);
        return;
    }
    fprintf(f, "0x%" PRIx64, fr->address);
    if (mb.p) {
        fputs(" (", f);
        put_s(f, mb);
        fputc(')', f);
    }
}

void ot_put_headline(FILE *f, const struct ot_stack_info *si, bool with_caller)
{
    if (!si->head) {
        fputs(si->found ? "(empty stack)" : "(unknown stack)", f);
        return;
    }
    if (si->user && si->user != si->head) {
        ot_put_short_frame(f, si->user);
        fputs(" \xe2\x86\x92 ", f); /* " → " */
        ot_put_short_frame(f, si->head);
        return;
    }
    if (!si->user && si->mp_worker && si->head->kind == OT_FRAME_PY) {
        fputs("a multiprocessing worker", f);
        if (!ot_frame_is_multiprocessing(si->head)) {
            fputs(" \xe2\x86\x92 ", f);
            ot_put_short_frame(f, si->head);
        }
        return;
    }
    ot_put_short_frame(f, si->head);
    /* multiprocessing's worker loop calling a task says nothing of the program (and its "pool.py" reads as the
     * user's file when theirs has that name) */
    if (with_caller && si->caller && !ot_frame_is_multiprocessing(si->caller)) {
        fputs(", called from ", f);
        ot_put_short_frame(f, si->caller);
    }
}

/* What one of the writers below (headline, short frame, parting) puts, as a malloc'd string. */
static char *put_str(const struct ot_stack_info *si, bool with_caller, const struct ot_frame *fr,
                     const struct ot_parting *part)
{
    char *p = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&p, &n);
    if (!m)
        return NULL;
    if (si)
        ot_put_headline(m, si, with_caller);
    else if (fr)
        ot_put_short_frame(m, fr);
    else
        ot_put_parting(m, part);
    if (fclose(m) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

char *ot_headline_str(const struct ot_stack_info *si, bool with_caller)
{
    return put_str(si, with_caller, NULL, NULL);
}

char *ot_short_frame_str(const struct ot_frame *fr)
{
    return put_str(NULL, false, fr, NULL);
}

void ot_put_frame(FILE *o, const struct ot_frame *f)
{
    if (f->kind == OT_FRAME_PY) {
        if (!f->function.p && !f->file.p) {
            fprintf(o, "<Python frame %" PRIu64 " not recorded>", f->pyframe_id);
            return;
        }
        put_s(o, f->file.p ? f->file : ot_cstr("?"));
        if (f->has_line)
            fprintf(o, ":%" PRIu64, f->line);
        fputs(" in ", o);
        put_s(o, f->function.p ? f->function : ot_cstr("?"));
        return;
    }
    if (f->symbolized && f->file.p) {
        put_s(o, f->function.p ? f->function : ot_cstr("??"));
        fputs(" (", o);
        put_s(o, f->file);
        if (f->has_line)
            fprintf(o, ":%" PRIu64, f->line);
        fputs(")", o);
        if (f->inlined)
            fputs(" [inlined]", o);
        return;
    }
    struct ot_str mb = ot_base_name(f->module);
    if (f->function.p) {
        put_s(o, f->function);
        if (f->has_offset)
            fprintf(o, "+0x%" PRIx64, f->offset);
        if (mb.p) {
            fputs(" (", o);
            put_s(o, mb);
            fputs(")", o);
        }
    } else {
        fprintf(o, "0x%" PRIx64, f->address);
        if (mb.p) {
            fputs(" (", o);
            put_s(o, mb);
            fprintf(o, "+0x%" PRIx64 ")", f->module_offset);
        } else {
            fputs(" (no module)", o);
        }
    }
    if (f->inlined)
        fputs(" [inlined]", o);
}

void ot_put_borrowed_note(FILE *f, struct ot_resolver *res, const struct ot_snapshot *s, const struct ot_stack *st,
                          const char *indent)
{
    if (!(st->flags & OT_STACK_BORROWED))
        return;
    struct ot_frame_walk w;
    ot_walk_begin(&w, res, st, OT_WALK_PY);
    const struct ot_frame *wait = ot_walk_next(&w) ? w.f : NULL;
    fprintf(f, "%s(Python stack borrowed from ", indent);
    if (st->lender_tid && st->lender_tid == s->meta.pid)
        fprintf(f, "the main thread (%" PRIu64 ")", st->lender_tid);
    else if (st->lender_tid) {
        fprintf(f, "thread %" PRIu64, st->lender_tid);
        const struct snap_thread *th = ot_snapshot_thread(s, st->lender_tid);
        if (th) {
            fputs(" (", f);
            ot_fput_safe_max(f, th->name, 64);
            fputc(')', f);
        }
    }
    else
        fputs("another thread", f);
    if (wait) {
        fputs(", which waited in ", f);
        ot_put_short_frame(f, wait);
    }
    fputs(")\n", f);
}

bool ot_put_stack_python_first(FILE *f, struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id,
                               const char *indent, size_t max_frames)
{
    struct ot_stack_info si;
    ot_stack_info(res, s, stack_id, &si);
    if (!si.found || si.npy == 0)
        return false;
    const struct ot_stack *st = ot_snapshot_stack(s, stack_id);
    if (si.via) {
        fprintf(f, "%svia ", indent);
        ot_put_short_frame(f, si.via);
        fputc('\n', f);
    }
    /* Past max_frames, the program's own frames are still shown (the user's line of a failed request
     * can sit under twenty frames of a library); the library frames between are counted. */
    size_t shown = 0, cut = 0;
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, res, st, OT_WALK_PY); ot_walk_next(&w);) {
        bool show = w.depth < max_frames || (ot_walk_is_user(&w) && shown < 2 * max_frames);
        if (!show) {
            cut++;
            continue;
        }
        if (cut)
            fprintf(f, "%s    ... %zu library frame%s\n", indent, cut, cut == 1 ? "" : "s");
        cut = 0;
        fprintf(f, "%s#%-2zu ", indent, w.depth);
        ot_put_frame(f, w.f);
        fputc('\n', f);
        shown++;
    }
    if (cut)
        fprintf(f, "%s... %zu more Python frame%s (--frames)\n", indent, cut, cut == 1 ? "" : "s");
    size_t hidden = si.nnative - (si.via ? 1 : 0);
    if (hidden)
        fprintf(f, "%s(%zu native frame%s hidden; --native shows every frame)\n", indent, hidden, hidden == 1 ? "" : "s");
    if (st->flags & OT_STACK_TRUNCATED)
        fprintf(f, "%s(the tracer cut this stack at its maximum depth)\n", indent);
    ot_put_borrowed_note(f, res, s, st, indent);
    return true;
}

bool ot_put_stack_from_user(FILE *f, struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id,
                            const char *indent, size_t max_frames)
{
    const struct ot_stack *st = ot_snapshot_stack(s, stack_id);
    size_t shown = 0, rest = 0;
    bool from = false;
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, res, st, OT_WALK_PY); ot_walk_next(&w);) {
        from = from || ot_walk_is_user(&w);
        if (from && shown < max_frames) {
            fprintf(f, "%s#%-2zu ", indent, w.depth);
            ot_put_frame(f, w.f);
            fputc('\n', f);
            shown++;
        } else if (from) {
            rest++;
        }
    }
    if (rest)
        fprintf(f, "%s... %zu more Python frame%s (--frames)\n", indent, rest, rest == 1 ? "" : "s");
    return from;
}

/* The frame at depth d (0: innermost) of a stack among its Python frames (py), else among its native
 * frames that are not plumbing; NULL past the last. */
static const struct ot_frame *meaningful_at(struct ot_resolver *res, const struct ot_stack *st, bool py, size_t d)
{
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, res, st, py ? OT_WALK_PY : OT_WALK_NATIVE); ot_walk_next(&w);)
        if (w.depth == d)
            return w.f;
    return NULL;
}

const struct ot_frame *ot_stack_parting(const struct ot_stack_ref *a, const struct ot_stack_ref *b, size_t *depth)
{
    const struct ot_stack *sa = ot_snapshot_stack(a->s, a->id), *sb = ot_snapshot_stack(b->s, b->id);
    bool py = meaningful_at(a->res, sa, true, 0) != NULL;
    for (size_t d = 0;; d++) {
        const struct ot_frame *x = meaningful_at(a->res, sa, py, d);
        if (!x)
            return NULL;
        const struct ot_frame *y = meaningful_at(b->res, sb, py, d);
        if (!y || !ot_frame_same_line(x, y)) {
            *depth = d;
            return x;
        }
    }
}

const struct ot_frame *ot_stack_first_difference(struct ot_resolver *res, const struct ot_snapshot *s, uint64_t a,
                                                 uint64_t b, size_t *depth)
{
    const struct ot_stack_ref ra = {res, s, a}, rb = {res, s, b};
    if (!meaningful_at(res, ot_snapshot_stack(s, a), true, 0))
        return NULL; /* Python frames only, as said */
    return ot_stack_parting(&ra, &rb, depth);
}

int ot_headline_partings(const struct ot_stack_ref *v, size_t n, struct ot_parting *out)
{
    memset(out, 0, n * sizeof(*out));
    char **hl = calloc(n ? n : 1, sizeof(*hl));
    if (!hl)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct ot_stack_info si;
        ot_stack_info(v[i].res, v[i].s, v[i].id, &si);
        hl[i] = si.head ? ot_headline_str(&si, false) : NULL;
        if (si.head && !hl[i])
            rc = -1;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        for (size_t j = 0; j < n && hl[i]; j++) {
            if (j == i || !hl[j] || strcmp(hl[i], hl[j]) != 0)
                continue;
            size_t d = 0;
            const struct ot_frame *part = ot_stack_parting(&v[i], &v[j], &d);
            /* Depth 0 parts inside the headline itself (frames a headline leaves out): nothing to add. */
            if (part && d > 0 && d > out[i].depth)
                out[i] = (struct ot_parting){part, d};
        }
        /* A comprehension's own frame (Python 3.11 and before: forward.<locals>.<listcomp>) sits on the line of
         * the function that runs it: the function names the caller better, as the breakdown does. */
        if (out[i].frame && out[i].frame->kind == OT_FRAME_PY) {
            const struct ot_stack *st = ot_snapshot_stack(v[i].s, v[i].id);
            const struct ot_frame *up = meaningful_at(v[i].res, st, true, out[i].depth + 1);
            if (ot_frame_on_callers_line(out[i].frame, up))
                out[i].frame = up;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(hl[i]);
    free(hl);
    if (rc < 0)
        memset(out, 0, n * sizeof(*out));
    return rc;
}

void ot_put_parting(FILE *f, const struct ot_parting *p)
{
    if (!p->frame)
        return;
    fputs(p->depth > 1 ? " \xe2\x86\x90 \xe2\x80\xa6 \xe2\x86\x90 " : " \xe2\x86\x90 ", f); /* " ← … ← ", " ← " */
    ot_put_short_frame(f, p->frame);
}

char *ot_parting_str(const struct ot_parting *p)
{
    return put_str(NULL, false, NULL, p);
}

void ot_put_stack_native(FILE *f, struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id,
                         const char *indent, size_t max_frames)
{
    const struct ot_stack *st = ot_snapshot_stack(s, stack_id);
    if (!st) {
        fprintf(f, "%s(stack %" PRIu64 " is not among the snapshot's recorded stacks)\n", indent, stack_id);
        return;
    }
    if (st->nframes == 0)
        fprintf(f, "%s(empty stack)\n", indent);
    size_t total = 0;
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, res, st, OT_WALK_ALL); ot_walk_next(&w); total++) {
        if (w.depth >= max_frames)
            continue;
        fprintf(f, "%s#%-2zu ", indent, w.depth);
        ot_put_frame(f, w.f);
        fputc('\n', f);
    }
    if (total > max_frames)
        fprintf(f, "%s... %zu more frame%s (--frames)\n", indent, total - max_frames,
                total - max_frames == 1 ? "" : "s");
    if (st->flags & OT_STACK_TRUNCATED)
        fprintf(f, "%s(the tracer cut this stack at its maximum depth)\n", indent);
    if (st->tracer_frames)
        fprintf(f, "%s(%zu tracer frame%s hidden)\n", indent, st->tracer_frames, st->tracer_frames == 1 ? "" : "s");
    if (st->flags & OT_STACK_NO_PYTHON)
        fprintf(f, "%s(no Python frames: a native thread of a Python process)\n", indent);
    ot_put_borrowed_note(f, res, s, st, indent);
}
