/* The allocator's view: the frameworks' segments joined to the driver allocations that hold them, and
 * the facts a report states about them (allocated against reserved, free inside segments and the
 * largest free block, CUDA graph private pools, other frameworks' pool caches, the per-process limit).
 *
 * The join is by address: a driver allocation (cuMemAlloc, stream-ordered, managed) contains a
 * segment, or, for an expandable segment, the VMM mappings inside its range each name a cuMemCreate
 * allocation. Sorting makes it O(n log n) in driver records and segments. */
#ifndef OT_READ_ALLOCVIEW_H
#define OT_READ_ALLOCVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/snapshot.h"

/* One framework segment and what holds it. */
struct ot_fw_segview {
    const struct ot_fw_segment *seg;
    uint64_t allocated_bytes; /* blocks allocated or pending free (else the segment's allocated_size) */
    uint64_t free_bytes;      /* free blocks: reserved but unallocated */
    uint64_t largest_free;    /* largest free block (0 without blocks) */
    const struct ot_record *creator; /* the driver allocation at the segment's start; NULL when none */
    size_t ncreators;                /* driver allocations overlapping the segment (several when expandable) */
    bool cached;                     /* no live tensor in it: memory the program freed, kept by the framework */
};

/* The segments of one creator call site (one driver stack). */
struct ot_fw_creator {
    uint64_t stack_id; /* 0 and has_stack false: segments with no driver allocation found */
    bool has_stack;
    struct ot_str framework; /* of its first segment */
    size_t nsegments, ncached;
    uint64_t reserved_bytes, allocated_bytes, free_bytes, cached_bytes;
};

/* One framework on one device. */
struct ot_fw_devview {
    struct ot_str framework;
    uint64_t device;
    size_t nsegments;
    uint64_t reserved_bytes, allocated_bytes, free_bytes;
    uint64_t largest_free;           /* in the default pools: where an ordinary request can go */
    uint64_t default_free_bytes;     /* free bytes in the default pools */
    size_t ncached;                  /* segments with no live tensor */
    uint64_t cached_bytes;
    size_t nprivate_pools, nprivate_segments;
    uint64_t private_bytes, private_allocated_bytes;
    size_t nexpandable;
    uint64_t expandable_bytes;
    size_t nunjoined;                /* segments no driver allocation was found for */
};

struct ot_allocview {
    bool present; /* the snapshot had the frameworks' view */
    bool earlier; /* a view older than the snapshot's moment (ot_allocview_earlier) */
    bool start_read; /* earlier, and a statement or remedy read JAX's preallocation and pool limit from it
                      * (ot_fw_jax_prealloc_limit; set by ot_analyze once they are made) */
    const struct ot_framework *fw;
    size_t nsegs;
    struct ot_fw_segview *segs; /* by device, then address */
    size_t ndevs;
    struct ot_fw_devview *devs;
    size_t ncreators;
    struct ot_fw_creator *creators; /* by reserved bytes, largest first */
    struct ot_u64map creator_index; /* stack id -> index into creators (those with a stack) */
    uint64_t blocks_with_stacks;     /* blocks carrying their allocation's Python stack */
    const struct ot_fw_info *info;   /* the first collection record (who, when, why); NULL when none */
    const struct ot_fw_error *error; /* the framework's own OOM message; NULL when none */
    bool fatal;                      /* a framework refused an allocation: this snapshot is the fatal one */
    struct ot_str fatal_framework;   /* which one (from its message, else the collection record) */
};

/* Builds the view; NULL only when out of memory (a snapshot without the frameworks' view gives one with
 * present false). */
struct ot_allocview *ot_allocview_new(const struct ot_snapshot *s);
/* The view the companion took before the snapshot's moment (s->fw_earlier), for the reports to show as such:
 * its segments measured, not joined (no creators); NULL when there is none or memory runs out. */
struct ot_allocview *ot_allocview_earlier(const struct ot_snapshot *s);
void ot_allocview_free(struct ot_allocview *v);

/* The view of one framework on one device; NULL when absent. */
const struct ot_fw_devview *ot_allocview_dev(const struct ot_allocview *v, const char *framework, uint64_t device);

/* The segments whose driver allocations were made at this call site (its stack), with what they hold as
 * the framework reported it: reserved, allocated to live tensors, free in its cache. NULL when the site
 * made none. A site's driver bytes are then reserved memory, whoever's tensors now sit in it. */
const struct ot_fw_creator *ot_allocview_creator(const struct ot_allocview *v, uint64_t stack_id);

/* Whether a site's row, read as live memory, misstates what its segments hold: at least a tenth of them is
 * free in the framework's cache (the tensors once made there are gone; what sits there now may be
 * anyone's). Below that, reserved and allocated agree to a tenth and the row reads true. */
bool ot_fw_segments_misread(uint64_t reserved_bytes, uint64_t free_bytes);

/* A framework's counter (STATS) for a device, else from its record for all devices (device 2^32-1), never
 * another device's: of the view that shows the snapshot's moment (s->fw), or of a given one. */
bool ot_fw_stat(const struct ot_snapshot *s, const char *framework, uint64_t device, const char *key, uint64_t *out);
bool ot_fw_stat_of(const struct ot_framework *fw, const char *framework, uint64_t device, const char *key,
                   uint64_t *out);
/* JAX's pool limit on a device (bytes_limit), when its preallocation is on (preallocate_effective "true").
 * Both are fixed when JAX starts, so a view taken before the snapshot's moment (s->fw_earlier) still says them
 * truly, where the snapshot's own has no JAX settings; *earlier says it came from there. Nothing else of an
 * earlier view is read by a share, statement or remedy. */
bool ot_fw_jax_prealloc_limit(const struct ot_snapshot *s, uint64_t device, uint64_t *limit, bool *earlier);

/* "PyTorch", "JAX", "CuPy", else NULL (the reader then shows the framework's own name). */
const char *ot_fw_display_name(struct ot_str framework);

#endif
