/* Stack frames as a person reads them: a raw STACKS word becomes one or more frames (more when debug
 * info shows inlined calls), with names from debug info when the symbolizer has them, else from the
 * snapshot's own dump-time SYMBOLS and PYFRAMES. */
#ifndef OT_READ_RESOLVE_H
#define OT_READ_RESOLVE_H

#include "model/snapshot.h"

enum ot_frame_kind { OT_FRAME_NATIVE = 0, OT_FRAME_PY = 1 };

/* Unknown strings have p == NULL; unknown numbers have their has_ flag clear. */
struct ot_frame {
    enum ot_frame_kind kind;
    struct ot_str function;
    struct ot_str file;
    struct ot_str module; /* native: path of the loaded object */
    uint64_t line;        /* valid when has_line */
    uint64_t address;     /* native: the return address as recorded */
    uint64_t offset;      /* native: address - start of function (has_offset) */
    uint64_t module_offset; /* native: address - load bias (has_module_offset): what addr2line wants */
    uint64_t pyframe_id;  /* python: PYFRAMES id */
    bool has_line, has_offset, has_module_offset;
    bool inlined;    /* this call was inlined into the next (outer) frame */
    bool symbolized; /* from debug info on this machine, not from the dump */
};

struct ot_symbolizer;
struct ot_resolver;

/* sym may be NULL (dump-time names only). The resolver does not own it. */
struct ot_resolver *ot_resolver_new(const struct ot_snapshot *s, struct ot_symbolizer *sym);
void ot_resolver_free(struct ot_resolver *r);

/* The frames for one raw STACKS word, innermost first; at least one. Results are cached and stay valid
 * for the resolver's lifetime. Never fails: on out of memory it returns a static "unknown" frame. */
size_t ot_resolve(struct ot_resolver *r, uint64_t raw, const struct ot_frame **out);

/* Counts for the report: frames that fell back to dump-time names, Python ids missing from PYFRAMES. */
struct ot_resolve_stats {
    size_t native, python, symbolized, missing_pyframes;
};
void ot_resolver_stats(const struct ot_resolver *r, struct ot_resolve_stats *st);

#endif
