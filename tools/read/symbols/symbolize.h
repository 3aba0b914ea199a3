/* Symbolization on this machine with elfutils (libdwfl): file:line, inlined calls and demangled names
 * for native frames, from the binaries and debug files found here. A module is used only when its
 * build-id matches the one the snapshot recorded, so a rebuilt library never yields wrong lines.
 * Without libdw (OT_HAVE_LIBDW unset) every call here is a stub and names come from the dump. */
#ifndef OT_READ_SYMBOLIZE_H
#define OT_READ_SYMBOLIZE_H

#include "symbols/frame.h"

struct ot_symbolizer;

/* How many missing modules a report names. */
#define OT_SYM_MISSING_NAMED 8

struct ot_symbolizer_info {
    bool available;        /* built with libdw */
    bool demangler;        /* __cxa_demangle found */
    size_t modules;        /* modules in the snapshot */
    size_t verified;       /* used: file found and build-id matches */
    size_t elsewhere;      /* of those, found not at the recorded path but in a debug directory */
    size_t missing;        /* no such regular file here */
    size_t mismatched;     /* file found, build-id differs */
    size_t unverifiable;   /* the snapshot has no build-id for it */
    size_t unreadable;     /* libdw could not load it */
    size_t vdso;           /* the kernel's vDSO: no file to find, so not counted in modules */
    size_t missing_idx[OT_SYM_MISSING_NAMED]; /* snapshot module indexes of the first missing ones */
    size_t cxx_names;      /* native frames named by a C++ (mangled) name; set after resolving */
};

/* debug_dirs: extra directories searched for debug files (by build-id and by name), and for a module missing
 * from its recorded path (DIR/.build-id/xx/rest.debug, DIR/.build-id/xx/rest, DIR/NAME, DIR/NAME.debug;
 * /usr/lib/debug after them). Returns NULL when
 * symbolization is unavailable (no libdw) or out of memory; the report then uses dump-time names. */
struct ot_symbolizer *ot_symbolizer_new(const struct ot_snapshot *s, const char *const *debug_dirs, size_t ndirs);
void ot_symbolizer_info(const struct ot_symbolizer *y, struct ot_symbolizer_info *info);
void ot_symbolizer_free(struct ot_symbolizer *y);

/* True when a module path is the kernel's vDSO (linux-vdso.so.1, linux-gate.so.1): it has no file. */
bool ot_module_is_vdso(struct ot_str path);

/* How many names the lookups so far found mangled (C++), to say "C++ names demangled" only then. */
size_t ot_symbolizer_cxx_names(const struct ot_symbolizer *y);

/* The frames at a native return address, innermost (most deeply inlined) first, strings copied into a.
 * Returns how many were written (at most cap), 0 when debug info knows nothing about the address. */
size_t ot_symbolizer_lookup(struct ot_symbolizer *y, uint64_t address, struct ot_arena *a, struct ot_frame *out,
                            size_t cap);

#endif
