#include "analyze/userline.h"

#include <string.h>

/* ".../lib/python3.12/x.py" or ".../lib64/python3.12/x.py" with no site-packages below: the standard
 * library of some interpreter (system, pyenv, conda, venv base). */
static bool in_stdlib(struct ot_str file)
{
    static const char *const roots[] = {"/lib/python", "/lib64/python"};
    for (size_t r = 0; r < sizeof(roots) / sizeof(roots[0]); r++) {
        size_t n = strlen(roots[r]);
        for (size_t i = 0; file.p && i + n < file.n; i++) {
            if (memcmp(file.p + i, roots[r], n) != 0)
                continue;
            /* The next component must be a version ("python3.12/"), not a project named pythonic. */
            size_t k = i + n;
            if (k < file.n && file.p[k] >= '0' && file.p[k] <= '9')
                return true;
        }
    }
    return false;
}

/* Frameworks' own sources, found also where they are not installed as packages (an editable install, a
 * source checkout on sys.path): their frames are the library side of the line. */
static bool in_framework(struct ot_str file)
{
    static const char *const dirs[] = {"/torch/", "/jax/", "/jaxlib/", "/cupy/", "/flax/", "/optax/"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        if (ot_str_contains(file, dirs[i]))
            return true;
    return false;
}

bool ot_frame_is_library(const struct ot_frame *f)
{
    if (f->kind != OT_FRAME_PY)
        return false;
    struct ot_str file = f->file;
    if (!file.p)
        return false; /* unknown file: nothing says it is a library's */
    /* "<frozen importlib._bootstrap>", "<string>" from exec and "<stdin>" are the interpreter's. */
    if (ot_str_starts(file, "<frozen") || ot_str_starts(file, "<built-in"))
        return true;
    return ot_str_contains(file, "/site-packages/") || ot_str_contains(file, "/dist-packages/") || in_stdlib(file) ||
           in_framework(file);
}

bool ot_frame_is_user(const struct ot_frame *f)
{
    return f->kind == OT_FRAME_PY && (f->file.p || f->function.p) && !ot_frame_is_library(f);
}

bool ot_frame_is_multiprocessing(const struct ot_frame *f)
{
    return f->kind == OT_FRAME_PY && f->file.p && in_stdlib(f->file) && ot_str_contains(f->file, "/multiprocessing/");
}

static bool ends_with(struct ot_str s, const char *tail)
{
    size_t k = strlen(tail);
    return s.p && s.n >= k && memcmp(s.p + s.n - k, tail, k) == 0;
}

bool ot_frame_is_user_calling(const struct ot_frame *f, const struct ot_frame *callee)
{
    if (!ot_frame_is_user(f))
        return false;
    if (!callee || !ot_frame_is_multiprocessing(callee) || !f->file.p || !ot_str_starts(f->file, "<"))
        return true;
    struct ot_str fn = callee->function;
    bool start = (ends_with(callee->file, "/multiprocessing/spawn.py") && fn.p && fn.n == 10 &&
                  memcmp(fn.p, "spawn_main", 10) == 0) ||
                 (ends_with(callee->file, "/multiprocessing/forkserver.py") && fn.p && fn.n == 4 &&
                  memcmp(fn.p, "main", 4) == 0);
    return !start;
}

size_t ot_user_frame_index(const struct ot_frame *const *fr, size_t n, bool *mp)
{
    size_t user = n;
    *mp = false;
    for (size_t i = 0; i < n; i++) {
        if (fr[i]->kind != OT_FRAME_PY)
            continue;
        *mp = *mp || ot_frame_is_multiprocessing(fr[i]);
        if (user == n && ot_frame_is_user_calling(fr[i], i ? fr[i - 1] : NULL))
            user = i;
    }
    return user;
}

static const char *find_sub(struct ot_str s, const char *needle, size_t from)
{
    size_t k = strlen(needle);
    for (size_t i = from; i + k <= s.n; i++)
        if (memcmp(s.p + i, needle, k) == 0)
            return s.p + i;
    return NULL;
}

struct ot_str ot_package_path(struct ot_str path)
{
    if (!path.p)
        return path;
    static const char *const roots[] = {"site-packages/", "dist-packages/"};
    struct ot_str best = path;
    for (size_t r = 0; r < sizeof(roots) / sizeof(roots[0]); r++) {
        size_t k = strlen(roots[r]);
        const char *hit = NULL, *h;
        size_t from = 0;
        while ((h = find_sub(path, roots[r], from)) != NULL) {
            hit = h;
            from = (size_t)(h - path.p) + 1;
        }
        if (hit && (size_t)(hit + k - path.p) < path.n) {
            struct ot_str cut = {hit + k, path.n - (size_t)(hit + k - path.p)};
            if (cut.n < best.n)
                best = cut;
        }
    }
    return best;
}

struct ot_str ot_site_file(struct ot_str path)
{
    struct ot_str pkg = ot_package_path(path);
    return !path.p || pkg.n != path.n ? pkg : ot_base_name(path);
}

static bool str_eq(struct ot_str a, struct ot_str b)
{
    if (!a.p || !b.p)
        return a.p == b.p;
    return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

bool ot_frame_same_line(const struct ot_frame *a, const struct ot_frame *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind)
        return false;
    /* Frames without a name are told apart by their place in their module. */
    if (a->kind == OT_FRAME_NATIVE && !a->function.p && !b->function.p)
        return a->has_module_offset && b->has_module_offset && a->module_offset == b->module_offset &&
               str_eq(a->module, b->module);
    return a->line == b->line && a->has_line == b->has_line && str_eq(a->file, b->file) &&
           str_eq(a->function, b->function);
}

bool ot_frame_on_callers_line(const struct ot_frame *inner, const struct ot_frame *outer)
{
    return inner && outer && inner->kind == OT_FRAME_PY && outer->kind == OT_FRAME_PY && inner->has_line &&
           outer->has_line && inner->line == outer->line && str_eq(inner->file, outer->file);
}
