#include "symbols/resolve.h"

#include <stdlib.h>

#include "symbols/demangle.h"
#include "symbols/symbolize.h"

/* Inlined chains deeper than this are cut; real ones rarely pass ten. */
#define OT_MAX_INLINE 32

struct ot_resolved {
    const struct ot_frame *frames;
    size_t n;
};

struct ot_resolver {
    const struct ot_snapshot *s;
    struct ot_symbolizer *sym;
    struct ot_arena arena;
    struct ot_u64map cache; /* raw word -> index in entries */
    struct ot_resolved *entries;
    size_t nentries, cap;
    struct ot_resolve_stats st;
};

static const struct ot_frame ot_unknown_frame = {.kind = OT_FRAME_NATIVE};

struct ot_resolver *ot_resolver_new(const struct ot_snapshot *s, struct ot_symbolizer *sym)
{
    struct ot_resolver *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->s = s;
    r->sym = sym;
    return r;
}

void ot_resolver_free(struct ot_resolver *r)
{
    if (!r)
        return;
    ot_u64map_free(&r->cache);
    free(r->entries);
    ot_arena_free(&r->arena);
    free(r);
}

void ot_resolver_stats(const struct ot_resolver *r, struct ot_resolve_stats *st)
{
    *st = r->st;
    st->cxx_names += ot_symbolizer_cxx_names(r->sym);
}

static size_t resolve_python(struct ot_resolver *r, uint64_t id, struct ot_frame *f)
{
    const struct ot_pyframe *pf = ot_snapshot_pyframe(r->s, id);
    f->kind = OT_FRAME_PY;
    f->pyframe_id = id;
    r->st.python++;
    if (!pf) {
        r->st.missing_pyframes++;
        return 1;
    }
    f->function = pf->function;
    f->file = pf->file;
    /* Python numbers lines from 1; 0 is what the writer has when the line is unknown. */
    f->line = pf->line;
    f->has_line = pf->line != 0;
    return 1;
}

static struct ot_str dump_name(struct ot_resolver *r, const struct ot_symbol *sym)
{
    if (!sym || !sym->name.p || sym->name.n == 0)
        return (struct ot_str){NULL, 0};
    if (sym->name.n > 2 && sym->name.p[0] == '_' && sym->name.p[1] == 'Z')
        r->st.cxx_names++;
    /* Only a NUL-free name can be handed to the demangler as a C string. */
    if (sym->name.n > 2 && memchr(sym->name.p, 0, sym->name.n) == NULL) {
        char *tmp = ot_arena_strdup(&r->arena, sym->name.p, sym->name.n);
        char *d = tmp ? ot_demangle(tmp) : NULL;
        if (d) {
            char *copy = ot_arena_strdup(&r->arena, d, strlen(d));
            free(d);
            if (copy)
                return ot_cstr(copy);
        }
    }
    return sym->name;
}

static size_t resolve_native(struct ot_resolver *r, uint64_t address, struct ot_frame *out, size_t cap)
{
    const struct ot_module *m = ot_snapshot_module(r->s, address);
    const struct ot_symbol *sym = ot_snapshot_symbol(r->s, address);
    r->st.native++;

    size_t n = r->sym ? ot_symbolizer_lookup(r->sym, address, &r->arena, out, cap) : 0;
    if (n)
        r->st.symbolized++;
    else
        n = 1;
    struct ot_str dname = dump_name(r, sym);
    for (size_t i = 0; i < n; i++) {
        struct ot_frame *f = &out[i];
        f->kind = OT_FRAME_NATIVE;
        f->address = address;
        if (m) {
            f->module = m->path;
            f->module_offset = address - m->load_bias;
            f->has_module_offset = true;
        }
    }
    /* The outermost frame of an inline chain is the real function the address lies in: debug info
     * may lack its name (no DWARF, only line tables), the dump may have it. */
    struct ot_frame *outer = &out[n - 1];
    if (!outer->function.p && dname.p) {
        outer->function = dname;
        outer->offset = sym->offset;
        outer->has_offset = true;
    }
    return n;
}

size_t ot_resolve(struct ot_resolver *r, uint64_t raw, const struct ot_frame **out)
{
    uint32_t idx = ot_u64map_get(&r->cache, raw);
    if (idx != OT_U64MAP_NONE) {
        *out = r->entries[idx].frames;
        return r->entries[idx].n;
    }
    struct ot_frame tmp[OT_MAX_INLINE];
    memset(tmp, 0, sizeof(tmp));
    size_t n = (raw & OT_FRAME_PYTHON) ? resolve_python(r, raw >> 1, tmp) : resolve_native(r, raw >> 1, tmp, OT_MAX_INLINE);

    struct ot_frame *frames = ot_arena_array(&r->arena, n, sizeof(*frames));
    if (r->nentries == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        struct ot_resolved *e = realloc(r->entries, cap * sizeof(*e));
        if (e) {
            r->entries = e;
            r->cap = cap;
        }
    }
    if (!frames || r->nentries == r->cap || r->nentries >= OT_U64MAP_NONE) {
        *out = &ot_unknown_frame;
        return 1;
    }
    memcpy(frames, tmp, n * sizeof(*frames));
    if (ot_u64map_put(&r->cache, raw, (uint32_t)r->nentries) == OT_U64MAP_NONE) {
        *out = frames;
        return n;
    }
    r->entries[r->nentries++] = (struct ot_resolved){frames, n};
    *out = frames;
    return n;
}
