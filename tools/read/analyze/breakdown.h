/* "What held the memory": the device's memory split the way the OOM guides split it (parameters,
 * gradients, optimizer state, activations and temporaries, library workspaces, the framework's cache, the
 * CUDA context and untracked memory, other processes), at the failure (or the snapshot) and at the peak.
 *
 * A row comes from tensor identity where the framework reported it (the companion's roles, matched to the
 * driver's records by address); otherwise from the allocation's stack and libraries, and then it says it
 * is inferred. Only PyTorch's frames make an allocation "activations and temporaries" by inference: in a
 * program whose stacks show no framework (a C program, raw driver calls, CuPy or JAX without roles) the
 * rest is "the program's own allocations", split by call site. Memory outside this process's allocations (context, other processes, a pool's cache) is
 * measured only when the snapshot is written, so the peak has no number for it. */
#ifndef OT_READ_BREAKDOWN_H
#define OT_READ_BREAKDOWN_H

#include "analyze/analysis.h"

enum ot_bd_row {
    OT_BD_PARAMETERS,
    OT_BD_GRADIENTS,
    OT_BD_OPTIMIZER,   /* optimizer state */
    OT_BD_BUFFERS,     /* module buffers (identity only) */
    OT_BD_ACTIVATIONS, /* activations and temporaries: the rest of a framework's tensors (PyTorch) */
    OT_BD_PROGRAM,     /* the program's own allocations: what no framework or library claims (by call site) */
    OT_BD_WORKSPACES,  /* cuBLAS, cuDNN, NCCL */
    OT_BD_CACHE,       /* reserved by an allocator or pool, not handed out */
    OT_BD_CONTEXT,     /* the CUDA context and memory no allocation call explains */
    OT_BD_OTHERS,      /* other processes on the device */
    OT_BD_NROWS
};

/* Row names as reports print them ("optimizer state"), and as JSON keys ("optimizer_state"). A breakdown's
 * own names: its cache row, when all of it sits in the driver's stream-ordered pools, is named for them, not
 * for a framework (a C program's cuMemFreeAsync'd memory is no framework's cache). */
struct ot_breakdown;
const char *ot_bd_row_name(const struct ot_breakdown *b, enum ot_bd_row r);
const char *ot_bd_row_key(enum ot_bd_row r);

#define OT_BD_MAX_PARTS 12
#define OT_BD_SITE_PARTS 4   /* call sites named under the program's row; the rest as one "N more call sites" */
#define OT_BD_SITE_LABEL 96

/* A row's split: optimizer state by class and state name ("Adam.exp_avg"), workspaces by library, the
 * program's own allocations by call site. */
struct ot_bd_part {
    enum ot_bd_row row;
    struct ot_str label; /* untrusted bytes (optimizer labels come from the program) */
    uint64_t bytes;
    uint32_t rank; /* the order it was added in: equal bytes keep it (the sites' tables' own order) */
    bool rest;     /* "N more call sites": listed after the named parts, whatever its bytes */
};

struct ot_bd_moment {
    bool known;                     /* false: no records for this moment (no LIVE / no PEAK section) */
    uint64_t bytes[OT_BD_NROWS];
    bool measured[OT_BD_NROWS];     /* false: this moment has no measure of the row (printed as unknown) */
    uint64_t inferred[OT_BD_NROWS]; /* bytes of the row that come from stacks, not identity */
    uint64_t whole;                 /* what shares are of: used device memory at the snapshot, or the peak */
    uint64_t no_model_bytes;        /* PyTorch's allocations counted as the program's own (no_model) */
    bool whole_is_used;             /* whole is the device's used memory (cuMemGetInfo), not a sum of rows */
    size_t nparts;
    struct ot_bd_part parts[OT_BD_MAX_PARTS]; /* largest first within a row */
    /* The call sites' labels the program row's parts point to ("train.py:43 in forward"); the moment is
     * never copied, so the parts may point into it. */
    char site_label[OT_BD_SITE_PARTS + 1][OT_BD_SITE_LABEL];
};

struct ot_breakdown {
    bool has_device;
    int64_t device;
    bool at_failure;     /* first moment: the failure (an oom snapshot), else the snapshot */
    bool identity;       /* the framework's view named some memory by address: roles, or free blocks as cache */
    bool framework_seen; /* a framework (PyTorch, CuPy, JAX) is on a stack the rows were inferred from: a
                          * program with none (C, raw driver calls) is never told of tensors' roles */
    bool cache_is_pools; /* the cache row is only the stream-ordered pools' reserved beyond used */
    bool roles_earlier;  /* the only roles the companion reported are in a view older than the snapshot's
                          * moment (the allocator's view, earlier), which no row reads */
    bool no_model;       /* the companion looked for a model's tensors and found none on the GPU, and PyTorch's
                          * allocations live then were counted as the program's own (by call site) */
    struct ot_bd_moment now, peak;
    /* Set when no row holds a byte at either moment known (a process whose first allocation failed): the
     * one sentence a report gives instead of an empty table, "nothing: ..."; "" otherwise. */
    char nothing_held[200];
    char *owned;         /* a copy's own label bytes (ot_breakdown_copy); NULL in a built one */
};

/* Why the rows were inferred from the allocations' stacks and libraries, as a clause ("the tensors' roles were
 * not reported"); NULL when they come from the tensors' identity. */
const char *ot_bd_inferred_why(const struct ot_breakdown *b);

/* Builds the breakdown for the analysis's device (the failing one, else the leading peak's). -1 only
 * when out of memory. */
int ot_breakdown_build(const struct ot_analysis *a, struct ot_breakdown *out);

/* A copy that outlives its snapshot (the merged view of a run keeps each process's): the parts' labels,
 * which point into the snapshot and into the moment itself, copied into storage of the copy's own, freed by
 * ot_breakdown_copy_free. -1 when out of memory: then dst is a copy without parts. */
int ot_breakdown_copy(struct ot_breakdown *dst, const struct ot_breakdown *src);
void ot_breakdown_copy_free(struct ot_breakdown *b);

/* A row's split at both moments: the parts of either moment matched by label, each with its bytes at each
 * (in_now / in_peak false: that moment has no such part). An exit snapshot's peak held other call sites than
 * its end (a spike freed before exit): they are listed too, with their bytes at the peak. */
struct ot_bd_split {
    struct ot_str label;
    uint64_t now, peak;
    bool in_now, in_peak;
    bool rest;     /* "N more call sites": last */
    uint32_t rank; /* first moment's order of adding, for equal bytes */
};
#define OT_BD_MAX_SPLITS (2 * OT_BD_MAX_PARTS)

/* Row r's splits, the largest (at either moment) first, equal ones in the order they were added, the
 * "N more call sites" last; the count, at most OT_BD_MAX_SPLITS. Parts of an
 * unknown moment are left out. */
size_t ot_bd_splits(const struct ot_breakdown *b, enum ot_bd_row r, struct ot_bd_split out[OT_BD_MAX_SPLITS]);

/* The row with the most bytes of a moment among the program's own rows (parameters .. workspaces, plus
 * cache, context and others when measured); OT_BD_NROWS when the moment is unknown or empty. */
enum ot_bd_row ot_bd_largest(const struct ot_bd_moment *m);

/* A part's bytes (0 when the moment has no such part); OT_BD_PART_CUPY_POOL: the framework cache held by
 * CuPy's pool, as far as driver allocations hold it. */
#define OT_BD_PART_CUPY_POOL "CuPy's memory pool"
uint64_t ot_bd_part_bytes(const struct ot_bd_moment *m, enum ot_bd_row row, const char *label);

/* The row a stack's frames and libraries suggest for what it allocated (the inferred rows' rule), e.g. the
 * failed request's: OT_BD_OPTIMIZER when it came from inside an optimizer. */
enum ot_bd_row ot_bd_guess(const struct ot_analysis *a, uint64_t stack_id);

/* The framework a stack allocated through, from its libraries and installed sources: "torch" (libtorch,
 * libc10, site-packages/torch), "cupy" (cupy, cupy_backends), "jax" (jax, jaxlib, XLA's extension); NULL
 * for none of them. What a remedy's words are written for (a CuPy leak is not fixed with loss.item()). */
const char *ot_stack_framework(const struct ot_analysis *a, uint64_t stack_id);

#endif
