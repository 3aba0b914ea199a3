#include "render/sitelabel.h"

#include "analyze/userline.h"

#include "analyze/stackview.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

void ot_sb_put(struct ot_sb *b, const char *p, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (b->cap - b->n <= n) {
        size_t ncap = b->cap ? b->cap : 64;
        while (ncap - b->n <= n && ncap < SIZE_MAX / 2)
            ncap *= 2;
        char *np = ncap - b->n > n ? realloc(b->p, ncap) : NULL;
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

void ot_sb_str(struct ot_sb *b, struct ot_str s)
{
    if (s.p)
        ot_sb_put(b, s.p, s.n);
}

void ot_sb_cstr(struct ot_sb *b, const char *s)
{
    ot_sb_put(b, s, strlen(s));
}

void ot_sb_printf(struct ot_sb *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        ot_sb_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

void ot_sb_reset(struct ot_sb *b)
{
    b->n = 0;
    if (b->p)
        b->p[0] = 0;
}

void ot_sb_free(struct ot_sb *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

struct ot_str ot_sb_view(const struct ot_sb *b)
{
    return (struct ot_str){b->p ? b->p : "", b->n};
}

struct ot_str ot_lbl_basename(struct ot_str p)
{
    if (!p.p)
        return p;
    struct ot_str b = p;
    for (size_t i = 0; i < p.n; i++)
        if (p.p[i] == '/') {
            b.p = p.p + i + 1;
            b.n = p.n - i - 1;
        }
    return b;
}

static void frame_name(struct ot_sb *b, const struct ot_frame *f, bool base_file)
{
    if (f->kind == OT_FRAME_PY) {
        if (!f->function.p && !f->file.p) {
            ot_sb_printf(b, "<python frame %" PRIu64 ">", f->pyframe_id);
            return;
        }
        struct ot_str fn = f->function.p && f->function.n ? f->function : ot_cstr("?");
        /* A label spells the file as the text report does (userline.h); a flame graph's frame keeps the
         * path, from the package root inside one. */
        struct ot_str file = !f->file.p ? ot_cstr("?") : base_file ? ot_site_file(f->file) : ot_package_path(f->file);
        if (base_file) { /* a label spells a Python site as the text report and the README do: "file:line in f" */
            ot_sb_str(b, file);
            if (f->has_line)
                ot_sb_printf(b, ":%" PRIu64, f->line);
            ot_sb_cstr(b, " in ");
            ot_sb_str(b, fn);
            return;
        }
        ot_sb_str(b, fn);
        ot_sb_cstr(b, " (");
        ot_sb_str(b, file);
        if (f->has_line)
            ot_sb_printf(b, ":%" PRIu64, f->line);
        ot_sb_cstr(b, ")");
        return;
    }
    if (f->function.p && f->function.n) {
        ot_sb_str(b, f->function);
        /* A label names a C site as the text report does, "function (file:line)", when debug info gave them. */
        if (base_file && f->file.p && f->file.n && f->has_line) {
            ot_sb_cstr(b, " (");
            ot_sb_str(b, ot_site_file(f->file));
            ot_sb_printf(b, ":%" PRIu64 ")", f->line);
        }
        return;
    }
    if (f->module.p && f->has_module_offset) {
        ot_sb_str(b, ot_lbl_basename(f->module));
        ot_sb_printf(b, "+0x%" PRIx64, f->module_offset);
        return;
    }
    ot_sb_printf(b, "0x%" PRIx64, f->address);
}

void ot_lbl_frame(struct ot_sb *b, const struct ot_frame *f)
{
    frame_name(b, f, false);
}

/* The frames a label is built from, innermost first: every Python frame when the stack has one, else
 * every native frame that is not plumbing, else every frame. */
#define OT_LBL_FRAMES 48

static size_t meaningful(const struct ot_analysis *a, const struct ot_stack *st, const struct ot_frame **out, size_t max)
{
    static const unsigned passes[] = {OT_WALK_PY, OT_WALK_NATIVE, OT_WALK_ALL};
    size_t n = 0;
    for (size_t pass = 0; pass < sizeof(passes) / sizeof(passes[0]) && n == 0; pass++) {
        struct ot_frame_walk w;
        for (ot_walk_begin(&w, a->res, st, passes[pass]); n < max && ot_walk_next(&w);) {
            /* A caller that is a comprehension's frame is named by the function on its line, as
             * everywhere else (userline.h); the site's own frame is kept. */
            if (n > 1 && ot_frame_on_callers_line(out[n - 1], w.f))
                out[n - 1] = w.f;
            else
                out[n++] = w.f;
        }
    }
    return n;
}

static char *capped_frame(const struct ot_frame *f, size_t max_bytes)
{
    struct ot_sb one = {0};
    if (f->kind == OT_FRAME_NATIVE && f->function.p && f->function.n) {
        struct ot_frame g = *f;
        g.function = ot_short_function(f->function); /* a label has no room for C++ parameter lists */
        frame_name(&one, &g, true);
    } else {
        frame_name(&one, f, true);
    }
    if (max_bytes && one.n > max_bytes) {
        size_t cut = max_bytes;
        /* Do not cut a UTF-8 sequence in half. */
        while (cut > 0 && ((unsigned char)one.p[cut] & 0xc0) == 0x80)
            cut--;
        one.n = cut;
        one.p[cut] = 0;
        ot_sb_cstr(&one, "...");
    }
    if (one.oom || !one.p) {
        ot_sb_free(&one);
        return NULL;
    }
    return one.p;
}

/* A site's frame names for labels: innermost first, a run of equal names (C++ overloads calling each
 * other, recursion) kept once. */
struct names {
    char *v[OT_LBL_FRAMES];
    size_t n;
};

static int site_names(const struct ot_analysis *a, uint64_t stack_id, size_t max_bytes, struct names *out)
{
    memset(out, 0, sizeof(*out));
    const struct ot_stack *st = ot_snapshot_stack(a->s, stack_id);
    struct ot_sb b = {0};
    if (!st) {
        ot_sb_printf(&b, "(stack %" PRIu64 " not recorded)", stack_id);
    } else {
        const struct ot_frame *fr[OT_LBL_FRAMES];
        size_t n = meaningful(a, st, fr, OT_LBL_FRAMES);
        /* The user's own line leads when the innermost Python frame is a library's (userline.h); without one,
         * in a worker multiprocessing started, "a multiprocessing worker" does (stackview.h's headline). */
        size_t user = 0;
        bool mp = false, worker = false;
        if (n && fr[0]->kind == OT_FRAME_PY) {
            user = ot_user_frame_index(fr, n, &mp);
            worker = user == n && mp;
            if (user == n)
                user = 0;
        }
        for (size_t i = 0; i < n; i++) {
            char *name = capped_frame(fr[i], max_bytes);
            if (!name)
                return -1;
            if (i == 0 && worker && ot_frame_is_multiprocessing(fr[0])) {
                free(name);
                name = strdup("a multiprocessing worker");
                if (!name)
                    return -1;
            } else if (i == 0 && (user || worker)) {
                char *u = user ? capped_frame(fr[user], max_bytes) : NULL;
                struct ot_sb both = {0};
                ot_sb_cstr(&both, u ? u : worker ? "a multiprocessing worker" : "?");
                ot_sb_cstr(&both, " \xe2\x86\x92 "); /* " → " */
                ot_sb_cstr(&both, name);
                free(u);
                free(name);
                if (both.oom || !both.p) {
                    ot_sb_free(&both);
                    return -1;
                }
                name = both.p;
            }
            if (out->n && strcmp(out->v[out->n - 1], name) == 0) {
                free(name);
                continue;
            }
            out->v[out->n++] = name;
        }
        if (out->n)
            return 0;
        ot_sb_cstr(&b, "(empty stack)");
    }
    if (b.oom || !b.p) {
        ot_sb_free(&b);
        return -1;
    }
    out->v[out->n++] = b.p;
    return 0;
}

static void names_free(struct names *x)
{
    for (size_t i = 0; i < x->n; i++)
        free(x->v[i]);
    x->n = 0;
}

static const char *name_at(const struct names *x, size_t i)
{
    return i < x->n ? x->v[i] : "";
}

#define ARROW " \xe2\x86\x90 "      /* " <- " */
#define ELLIPSIS "\xe2\x80\xa6" /* "..." in one character */

char **ot_lbl_sites(const struct ot_analysis *a, const struct ot_site *v, size_t n, size_t max_bytes)
{
    char **out = calloc(n ? n : 1, sizeof(char *));
    struct names *nm = calloc(n ? n : 1, sizeof(*nm));
    if (!out || !nm)
        goto oom;
    for (size_t i = 0; i < n; i++)
        if (site_names(a, v[i].stack_id, max_bytes, &nm[i]) < 0)
            goto oom;
    /* A label is the innermost meaningful frame. Where several sites share it, each adds the first
     * outer frame that tells it from all of them ("f <- g", or "f <- ... <- g" past equal frames).
     * Quadratic in n, and n is a --top. */
    for (size_t i = 0; i < n; i++) {
        size_t k = 0; /* the outer frame to add; 0: none needed */
        for (size_t j = 0; j < n; j++) {
            if (j == i || strcmp(name_at(&nm[i], 0), name_at(&nm[j], 0)) != 0)
                continue;
            size_t d = 1;
            while (d < OT_LBL_FRAMES && (d < nm[i].n || d < nm[j].n) && strcmp(name_at(&nm[i], d), name_at(&nm[j], d)) == 0)
                d++;
            if (d > k)
                k = d;
        }
        struct ot_sb b = {0};
        ot_sb_cstr(&b, name_at(&nm[i], 0));
        if (k && k < nm[i].n) {
            ot_sb_cstr(&b, k == 1 ? ARROW : ARROW ELLIPSIS ARROW);
            ot_sb_cstr(&b, nm[i].v[k]);
        } else if (k) {
            ot_sb_printf(&b, " (stack %" PRIu64 ")", v[i].stack_id);
        }
        if (b.oom || !b.p) {
            ot_sb_free(&b);
            goto oom;
        }
        out[i] = b.p;
    }
    /* Two sites can still read alike (stacks that differ only in frames a label leaves out): the
     * stack id tells them apart. */
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++)
            dup = j != i && strcmp(out[i], out[j]) == 0;
        if (!dup)
            continue;
        struct ot_sb b = {0};
        ot_sb_cstr(&b, out[i]);
        ot_sb_printf(&b, " (stack %" PRIu64 ")", v[i].stack_id);
        if (b.oom || !b.p) {
            ot_sb_free(&b);
            goto oom;
        }
        free(out[i]);
        out[i] = b.p;
    }
    for (size_t i = 0; i < n; i++)
        names_free(&nm[i]);
    free(nm);
    return out;
oom:
    if (nm)
        for (size_t i = 0; i < n; i++)
            names_free(&nm[i]);
    free(nm);
    ot_strv_free(out, n);
    return NULL;
}


bool ot_lbl_ends_with_stack(const char *label, uint64_t stack_id)
{
    char tail[40];
    int n = snprintf(tail, sizeof(tail), " (stack %" PRIu64 ")", stack_id);
    size_t len = label ? strlen(label) : 0;
    return n > 0 && len >= (size_t)n && strcmp(label + len - (size_t)n, tail) == 0;
}

char *ot_lbl_failure(const struct ot_analysis *a, uint64_t stack_id, size_t top, size_t max_bytes)
{
    const struct ot_sites *tables[2] = {a->peak && a->peak->has_sites ? &a->peak->sites : NULL,
                                        a->has_at_failure ? &a->at_failure : NULL};
    size_t cap = 1;
    for (int t = 0; t < 2; t++)
        cap += tables[t] ? (tables[t]->n < top ? tables[t]->n : top) : 0;
    struct ot_site *v = calloc(cap, sizeof(*v));
    if (!v)
        return NULL;
    size_t n = 0;
    v[n++].stack_id = stack_id;
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; tables[t] && i < tables[t]->n && i < top; i++) {
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++)
                seen = v[k].stack_id == tables[t]->v[i].stack_id;
            if (!seen)
                v[n++].stack_id = tables[t]->v[i].stack_id;
        }
    }
    char **l = ot_lbl_sites(a, v, n, max_bytes);
    free(v);
    if (!l)
        return NULL;
    char *first = l[0];
    l[0] = NULL;
    ot_strv_free(l, n);
    return first;
}
