/* One stack frame as a person reads it: what the resolver (resolve.h) hands out and what the
 * symbolizer (symbolize.h) fills from debug info. */
#ifndef OT_READ_FRAME_H
#define OT_READ_FRAME_H

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

#endif
