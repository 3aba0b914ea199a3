/* Stack frames as a person reads them: a raw STACKS word becomes one or more frames (more when debug
 * info shows inlined calls), with names from debug info when the symbolizer has them, else from the
 * snapshot's own dump-time SYMBOLS and PYFRAMES. */
#ifndef OT_READ_RESOLVE_H
#define OT_READ_RESOLVE_H

#include "model/snapshot.h"
#include "symbols/frame.h"

struct ot_symbolizer;
struct ot_resolver;

/* sym may be NULL (dump-time names only). The resolver does not own it. */
struct ot_resolver *ot_resolver_new(const struct ot_snapshot *s, struct ot_symbolizer *sym);
void ot_resolver_free(struct ot_resolver *r);

/* The frames for one raw STACKS word, innermost first; at least one. Results are cached and stay valid
 * for the resolver's lifetime. Never fails: on out of memory it returns a static "unknown" frame. */
size_t ot_resolve(struct ot_resolver *r, uint64_t raw, const struct ot_frame **out);

/* Counts for the report: frames that fell back to dump-time names, Python ids missing from PYFRAMES,
 * native frames named by a mangled (C++) name, from the dump or from debug info. */
struct ot_resolve_stats {
    size_t native, python, symbolized, missing_pyframes, cxx_names;
};
void ot_resolver_stats(const struct ot_resolver *r, struct ot_resolve_stats *st);

#endif
