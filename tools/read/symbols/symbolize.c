#include "symbols/symbolize.h"

#include <stdlib.h>

#include "symbols/demangle.h"

bool ot_module_is_vdso(struct ot_str path)
{
    /* The link map names it by its soname alone, never by a path: there is no file behind it. */
    static const char *const names[] = {"linux-vdso.so.1", "linux-gate.so.1", "linux-vdso64.so.1", "linux-vdso32.so.1"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (path.p && path.n == strlen(names[i]) && memcmp(path.p, names[i], path.n) == 0)
            return true;
    return false;
}

static bool is_mangled(const char *name)
{
    return name && name[0] == '_' && name[1] == 'Z';
}

#ifndef OT_HAVE_LIBDW

struct ot_symbolizer *ot_symbolizer_new(const struct ot_snapshot *s, const char *const *debug_dirs, size_t ndirs)
{
    (void)s, (void)debug_dirs, (void)ndirs;
    return NULL;
}

void ot_symbolizer_info(const struct ot_symbolizer *y, struct ot_symbolizer_info *info)
{
    (void)y;
    memset(info, 0, sizeof(*info));
    info->demangler = ot_demangler_available();
}

void ot_symbolizer_free(struct ot_symbolizer *y)
{
    (void)y;
}

size_t ot_symbolizer_cxx_names(const struct ot_symbolizer *y)
{
    (void)y;
    return 0;
}

size_t ot_symbolizer_lookup(struct ot_symbolizer *y, uint64_t address, struct ot_arena *a, struct ot_frame *out,
                            size_t cap)
{
    (void)y, (void)address, (void)a, (void)out, (void)cap;
    return 0;
}

#else

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <sys/stat.h>

struct ot_symbolizer {
    const struct ot_snapshot *snap;
    Dwfl *dwfl;
    Dwfl_Callbacks cb; /* libdwfl keeps a pointer to it: it must live as long as dwfl */
    char *debuginfo_path;
    char **dirs; /* where a module missing from its recorded path is looked for: the --debug-dir
                  * directories (absolute), then /usr/lib/debug */
    size_t ndirs;
    Dwfl_Module **mods; /* per snapshot module (same index); NULL when not verified */
    struct ot_symbolizer_info info;
    size_t cxx_names; /* lookups that met a mangled name */
};

/* Modules come from an untrusted file: only an absolute path to a regular file is opened, so a
 * snapshot cannot make the reader block on a FIFO or read a device. */
static char *usable_path(struct ot_str p)
{
    if (!p.p || p.n == 0 || p.p[0] != '/' || p.n > 4096 || memchr(p.p, 0, p.n))
        return NULL;
    /* Copied by its length: the path may end the payload with no NUL after it, and strndup may look one
     * byte further (ASan's strict string checks report it). */
    char *s = malloc(p.n + 1);
    if (s) {
        memcpy(s, p.p, p.n);
        s[p.n] = 0;
    }
    struct stat st;
    if (s && (stat(s, &st) != 0 || !S_ISREG(st.st_mode))) {
        free(s);
        return NULL;
    }
    return s;
}

static char *make_debuginfo_path(const char *const *dirs, size_t ndirs)
{
    /* Our directories first, then libdwfl's default ":.debug:/usr/lib/debug" (the empty element is
     * the binary's own directory). Only absolute directories are searched by build-id, so relative
     * ones are made absolute. */
    static const char dflt[] = ":.debug:/usr/lib/debug";
    size_t len = sizeof(dflt);
    char **abs = calloc(ndirs ? ndirs : 1, sizeof(char *));
    if (!abs)
        return NULL;
    for (size_t i = 0; i < ndirs; i++) {
        abs[i] = realpath(dirs[i], NULL);
        if (abs[i])
            len += strlen(abs[i]) + 1;
    }
    char *path = malloc(len);
    if (path) {
        path[0] = 0;
        for (size_t i = 0; i < ndirs; i++) {
            if (abs[i] && !strchr(abs[i], ':')) {
                strcat(path, abs[i]);
                strcat(path, ":");
            }
        }
        strcat(path, dflt);
    }
    for (size_t i = 0; i < ndirs; i++)
        free(abs[i]);
    free(abs);
    return path;
}

/* Does the ELF file at path carry this build-id? Read through a Dwfl of its own, so that a file that does not
 * match is never reported into the one the lookups use. */
static bool build_id_is(const char *path, struct ot_str want)
{
    static char *no_path = NULL;
    Dwfl_Callbacks cb = {.find_elf = dwfl_build_id_find_elf,
                         .find_debuginfo = dwfl_standard_find_debuginfo,
                         .section_address = dwfl_offline_section_address,
                         .debuginfo_path = &no_path};
    Dwfl *d = dwfl_begin(&cb);
    if (!d)
        return false;
    dwfl_report_begin(d);
    Dwfl_Module *mod = dwfl_report_elf(d, path, path, -1, 0, false);
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int n = mod ? dwfl_module_build_id(mod, &bits, &vaddr) : 0;
    bool same = n > 0 && (size_t)n == want.n && memcmp(bits, want.p, want.n) == 0;
    dwfl_report_end(d, NULL, NULL);
    dwfl_end(d);
    return same;
}

/* A module whose file is not at its recorded path (the snapshot was copied to another machine, the program
 * rebuilt or moved): looked for in each directory by its build-id (DIR/.build-id/xx/rest.debug, then the
 * binary itself, DIR/.build-id/xx/rest) and by its name (DIR/NAME, DIR/NAME.debug). Only a regular file whose
 * build-id is the recorded one is used; NULL when none is found. */
static char *find_elsewhere(const struct ot_symbolizer *y, const struct ot_module *m)
{
    if (m->build_id.n < 2 || m->build_id.n > 64 || !m->path.p || !m->path.n)
        return NULL;
    char hex[129];
    for (size_t i = 0; i < m->build_id.n; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)m->build_id.p[i]);
    struct ot_str base = ot_base_name(m->path);
    if (!base.p || !base.n || base.n > 255 || memchr(base.p, 0, base.n) || memchr(base.p, '/', base.n))
        base.n = 0;
    for (size_t d = 0; d < y->ndirs; d++) {
        size_t len = strlen(y->dirs[d]) + 2 * base.n + 160;
        char *cand = malloc(len);
        if (!cand)
            return NULL;
        for (int k = 0; k < 4; k++) {
            if (k < 2)
                snprintf(cand, len, "%s/.build-id/%.2s/%s%s", y->dirs[d], hex, hex + 2, k == 0 ? ".debug" : "");
            else if (base.n)
                snprintf(cand, len, "%s/%.*s%s", y->dirs[d], (int)base.n, base.p, k == 3 ? ".debug" : "");
            else
                continue;
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && build_id_is(cand, m->build_id))
                return cand;
        }
        free(cand);
    }
    return NULL;
}

struct ot_symbolizer *ot_symbolizer_new(const struct ot_snapshot *s, const char *const *debug_dirs, size_t ndirs)
{
    struct ot_symbolizer *y = calloc(1, sizeof(*y));
    if (!y)
        return NULL;
    y->snap = s;
    y->info.available = true;
    y->info.demangler = ot_demangler_available();
    y->info.modules = s->nmodules;
    y->mods = calloc(s->nmodules ? s->nmodules : 1, sizeof(*y->mods));
    y->debuginfo_path = make_debuginfo_path(debug_dirs, ndirs);
    y->dirs = calloc(ndirs + 1, sizeof(char *));
    if (!y->mods || !y->debuginfo_path || !y->dirs)
        goto fail;
    for (size_t i = 0; i < ndirs; i++)
        if ((y->dirs[y->ndirs] = realpath(debug_dirs[i], NULL)) != NULL)
            y->ndirs++;
    if (!(y->dirs[y->ndirs] = strdup("/usr/lib/debug")))
        goto fail;
    y->ndirs++;
    y->cb.find_elf = dwfl_build_id_find_elf;
    y->cb.find_debuginfo = dwfl_standard_find_debuginfo;
    y->cb.section_address = dwfl_offline_section_address;
    y->cb.debuginfo_path = &y->debuginfo_path;
    y->dwfl = dwfl_begin(&y->cb);
    if (!y->dwfl)
        goto fail;

    dwfl_report_begin(y->dwfl);
    for (size_t i = 0; i < s->nmodules; i++) {
        const struct ot_module *m = &s->modules[i];
        char *path = usable_path(m->path);
        if (!path && ot_module_is_vdso(m->path)) {
            y->info.vdso++;
            y->info.modules--;
            continue;
        }
        if (!path && (path = find_elsewhere(y, m)) != NULL)
            y->info.elsewhere++;
        if (!path) {
            if (y->info.missing < OT_SYM_MISSING_NAMED)
                y->info.missing_idx[y->info.missing] = i;
            y->info.missing++;
            continue;
        }
        if (m->build_id.n == 0) {
            /* Nothing to compare the file with: using it could give confidently wrong lines. */
            y->info.unverifiable++;
            free(path);
            continue;
        }
        /* add_p_vaddr: the base is the load bias (dlpi_addr), to which the file's p_vaddr is added. */
        Dwfl_Module *mod = dwfl_report_elf(y->dwfl, path, path, -1, m->load_bias, true);
        free(path);
        if (!mod) {
            y->info.unreadable++;
            continue;
        }
        GElf_Addr bias;
        const unsigned char *bits = NULL;
        GElf_Addr vaddr;
        dwfl_module_getelf(mod, &bias);
        int n = dwfl_module_build_id(mod, &bits, &vaddr);
        if (n <= 0 || (size_t)n != m->build_id.n || memcmp(bits, m->build_id.p, (size_t)n) != 0) {
            y->info.mismatched++;
            continue;
        }
        y->mods[i] = mod;
        y->info.verified++;
    }
    dwfl_report_end(y->dwfl, NULL, NULL);
    return y;
fail:
    ot_symbolizer_free(y);
    return NULL;
}

void ot_symbolizer_info(const struct ot_symbolizer *y, struct ot_symbolizer_info *info)
{
    if (y) {
        *info = y->info;
    } else {
        memset(info, 0, sizeof(*info));
        info->demangler = ot_demangler_available();
    }
}

size_t ot_symbolizer_cxx_names(const struct ot_symbolizer *y)
{
    return y ? y->cxx_names : 0;
}

void ot_symbolizer_free(struct ot_symbolizer *y)
{
    if (!y)
        return;
    if (y->dwfl)
        dwfl_end(y->dwfl);
    free(y->mods);
    free(y->debuginfo_path);
    for (size_t i = 0; y->dirs && i < y->ndirs; i++)
        free(y->dirs[i]);
    free(y->dirs);
    free(y);
}

static struct ot_str arena_str(struct ot_arena *a, const char *s)
{
    if (!s)
        return (struct ot_str){NULL, 0};
    size_t n = strlen(s);
    char *d = ot_arena_strdup(a, s, n);
    return d ? (struct ot_str){d, n} : (struct ot_str){NULL, 0};
}

/* A function's name as C++ programmers read it: the demangled linkage name when there is one (it
 * carries namespaces and parameter types, which the plain DWARF name lacks), else the DWARF name. */
static struct ot_str die_function_name(Dwarf_Die *die, struct ot_arena *a)
{
    Dwarf_Attribute attr;
    const char *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!linkage)
        linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (linkage) {
        char *d = ot_demangle(linkage);
        struct ot_str r = arena_str(a, d ? d : linkage); /* mangled when no demangler: still exact */
        free(d);
        return r;
    }
    return arena_str(a, dwarf_diename(die));
}

static bool is_function_scope(Dwarf_Die *die)
{
    int tag = dwarf_tag(die);
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

size_t ot_symbolizer_lookup(struct ot_symbolizer *y, uint64_t address, struct ot_arena *a, struct ot_frame *out,
                            size_t cap)
{
    if (!y || cap == 0)
        return 0;
    const struct ot_module *m = ot_snapshot_module(y->snap, address);
    if (!m)
        return 0;
    Dwfl_Module *mod = y->mods[m - y->snap->modules];
    if (!mod)
        return 0;
    /* Stack words are return addresses: the call that matters is the instruction before. */
    Dwarf_Addr pc = address > m->start ? address - 1 : address;

    GElf_Off symoff = 0;
    GElf_Sym sym;
    const char *symname = dwfl_module_addrinfo(mod, pc, &symoff, &sym, NULL, NULL, NULL);
    if (is_mangled(symname))
        y->cxx_names++;

    const char *file = NULL;
    int lineno = 0;
    Dwfl_Line *line = dwfl_module_getsrc(mod, pc);
    if (line)
        file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);

    size_t n = 0;
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, pc, &bias);
    Dwarf_Die *scopes = NULL;
    int nscopes = cu ? dwarf_getscopes(cu, pc - bias, &scopes) : 0;
    if (nscopes > 0) {
        /* dwarf_getscopes continues past an inlined instance with the scopes around the inlined
         * function's abstract definition; the callers are the DIEs physically around the innermost
         * scope, as eu-addr2line -i does it. */
        Dwarf_Die inner = scopes[0];
        free(scopes);
        scopes = NULL;
        nscopes = dwarf_getscopes_die(&inner, &scopes);
    }
    if (nscopes > 0) {
        Dwarf_Files *files = NULL;
        size_t nfiles = 0;
        if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
            files = NULL;
        /* Scopes run innermost first. Each inlined_subroutine names the inlined function and, in
         * DW_AT_call_file/line, where in the next function out the call was. */
        const char *cur_file = file;
        uint64_t cur_line = lineno > 0 ? (uint64_t)lineno : 0;
        for (int i = 0; i < nscopes && n < cap; i++) {
            Dwarf_Die *d = &scopes[i];
            if (!is_function_scope(d))
                continue;
            struct ot_frame *f = &out[n++];
            memset(f, 0, sizeof(*f));
            f->kind = OT_FRAME_NATIVE;
            f->symbolized = true;
            f->function = die_function_name(d, a);
            f->file = arena_str(a, cur_file);
            f->line = cur_line;
            f->has_line = cur_line > 0;
            if (dwarf_tag(d) != DW_TAG_inlined_subroutine)
                break;
            f->inlined = true;
            Dwarf_Attribute attr;
            Dwarf_Word cf = 0, cl = 0;
            cur_file = NULL;
            if (files && dwarf_formudata(dwarf_attr(d, DW_AT_call_file, &attr), &cf) == 0 && cf < nfiles)
                cur_file = dwarf_filesrc(files, cf, NULL, NULL);
            cur_line = dwarf_formudata(dwarf_attr(d, DW_AT_call_line, &attr), &cl) == 0 ? cl : 0;
        }
        free(scopes);
        if (n && out[n - 1].inlined && n < cap) {
            /* The chain ended without the enclosing subprogram (odd DWARF): keep the call site. */
            struct ot_frame *f = &out[n++];
            memset(f, 0, sizeof(*f));
            f->kind = OT_FRAME_NATIVE;
            f->symbolized = true;
            f->file = arena_str(a, cur_file);
            f->line = cur_line;
            f->has_line = cur_line > 0;
        }
    }
    if (n == 0) {
        if (!symname && !file)
            return 0;
        /* No DWARF scope: still the ELF symbol table (which sees static functions, unlike dladdr)
         * and maybe a line table. */
        struct ot_frame *f = &out[n++];
        memset(f, 0, sizeof(*f));
        f->kind = OT_FRAME_NATIVE;
        f->symbolized = true;
        f->file = arena_str(a, file);
        f->line = lineno > 0 ? (uint64_t)lineno : 0;
        f->has_line = lineno > 0;
    }
    struct ot_frame *outer = &out[n - 1];
    if (symname) {
        if (!outer->function.p) {
            char *d = ot_demangle(symname);
            outer->function = arena_str(a, d ? d : symname);
            free(d);
        }
        /* Offset of the return address itself, as in the dump (the lookup used pc = address - 1). */
        outer->offset = symoff + (address - pc);
        outer->has_offset = true;
    }
    return n;
}

#endif
