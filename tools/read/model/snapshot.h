/* The in-memory model of one snapshot file (docs/FORMAT.md), and the parser that builds it.
 *
 * ot_snapshot_parse() is the only entry point that sees raw bytes, and it trusts none of them: every
 * count is checked against the bytes left before anything is allocated, every field read goes through
 * the bounded cursor of oomtrace_format.h, and any inconsistency ends the parse with one line of text
 * in errbuf. It has no other side effects (no output, no exit), so a fuzzer can call it directly.
 *
 * Strings in the model point into the caller's buffer (uncompressed sections) or into decompressed
 * payloads owned by the snapshot: the buffer passed to ot_snapshot_parse must outlive the snapshot. */
#ifndef OT_READ_SNAPSHOT_H
#define OT_READ_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oomtrace_format.h"
#include "model/framework.h"
#include "model/util.h"

#define OT_ERRBUF 512 /* size of the errbuf every fallible reader function takes */

struct ot_meta {
    struct ot_str tracer_version;
    uint64_t trigger; /* enum ot_trigger; other values are kept and shown as unknown */
    struct ot_str reason;
    uint64_t pid, ppid;
    struct ot_str host;
    size_t argc;
    struct ot_str *argv;
    struct ot_str exe;
    uint64_t wall_ns, mono_ns, start_mono_ns;
    int64_t rank, local_rank, world_size; /* -1 unknown */
    struct ot_str rank_source;
    uint64_t events_recorded, events_kept, events_dropped, chunks_dropped;
    uint64_t ring_budget_bytes, ring_used_bytes;
    uint64_t snapshot_seq;
    struct ot_str python_version, cuda_visible_devices;
};

struct snap_device {
    int64_t ordinal;
    struct ot_str name, uuid;
    uint64_t flags;
    uint64_t total_bytes, free_bytes, baseline_used_bytes;
    uint64_t tracked_bytes, peak_bytes, peak_time_ns, peak_seq;
    size_t ncat;
    uint64_t *by_category; /* index = category id */
};

struct snap_failure {
    uint64_t api, category;
    int64_t device;
    uint64_t requested_bytes, result_code, time_ns, tid, stack_id, seq;
};

struct ot_module {
    struct ot_str path;
    uint64_t start, end; /* [start, end) */
    uint64_t load_bias;
    struct ot_str build_id;
};

struct ot_symbol {
    uint64_t address;
    struct ot_str name;
    uint64_t offset;
};

struct ot_pyframe {
    uint64_t id;
    struct ot_str function, file;
    uint64_t line;
};

struct ot_stack {
    uint64_t id, flags;
    uint64_t lender_tid; /* OT_STACK_BORROWED: the OS thread whose Python frames these are; 0 unknown */
    size_t nframes;
    const uint64_t *frames; /* raw frame words, innermost first (see OT_FRAME_PYTHON) */
    size_t tracer_frames;   /* the tracer's own Python frames (file "<oomtrace>/..."), left out of frames */
};

struct ot_record {
    uint64_t address, size;
    int64_t device;
    uint64_t category, api, flags, stack_id, tid, time_ns, seq;
};

struct ot_peak {
    int64_t device;
    uint64_t peak_bytes, peak_time_ns, peak_seq;
    size_t count;
    struct ot_record *recs;
    uint64_t lost; /* records of the peak set the tracer had no memory to keep (PEAK_REF); 0 from PEAK */
};

/* A PEAK_REF section as read; ot_snapshot_parse resolves it against the live set into peaks[]. */
struct ot_peak_ref {
    struct ot_peak peak; /* recs/count: the retained records only */
    uint64_t count;      /* the whole peak set, as the writer counted it */
    uint64_t hdr_off;
};

/* One ring chunk, still compressed: events are decoded on demand (events.h). */
struct ot_chunk {
    uint64_t first_seq, nevents, t0_ns, raw_len;
    struct ot_str frame; /* one zstd frame */
};

struct snap_marker {
    uint64_t seq, time_ns, tid;
    struct ot_str label;
};

struct snap_pool {
    uint64_t handle;
    int64_t device;
    uint64_t flags, reserved_bytes, used_bytes;
};

struct ot_mapping {
    uint64_t address, size, handle, offset;
};

/* CTX_FREED: what one context's end (the context_end event of this seq) freed; n of nfreed listed. */
struct ot_ctx_freed {
    uint64_t address, size, category;
    int64_t device;
};
struct ot_ctx_end {
    uint64_t seq, nfreed;
    size_t n;
    struct ot_ctx_freed *v;
};

struct ot_process {
    int64_t device;
    uint64_t pid, used_bytes;
    struct ot_str name;
    /* Since 1.3 (0 and empty in older files): */
    uint64_t relation;    /* enum ot_process_relation, as stored (untrusted: may be any value) */
    uint64_t name_source; /* enum ot_process_name_source, as stored */
    struct ot_str command;
};

struct snap_thread {
    uint64_t tid;
    struct ot_str name;
};

/* When the frameworks' view was taken against the moment the snapshot shows (model/fw_when.c). */
struct ot_fw_when {
    bool known;             /* a view with its collection record: the rest is set */
    bool earlier;           /* the view predates changes the snapshot shows */
    uint64_t taken_ns;      /* the view's collection (the earliest of its records), CLOCK_MONOTONIC */
    uint64_t moment_ns;     /* the failure's time in a driver-level out-of-memory snapshot, else the snapshot's */
    uint64_t allocations, frees; /* device allocations and frees the ring holds in (taken_ns, moment_ns] */
    bool counts_partial;    /* the ring no longer holds every event of that span: at least these */
};

struct ot_snapshot {
    uint16_t version_major, version_minor;
    uint32_t file_flags;
    uint32_t seen; /* bit t set when a section of type t (< 32) was present */
    size_t nsections, nunknown_sections;

    struct ot_meta meta;

    size_t ndevices;
    struct snap_device *devices;

    bool has_failure;
    struct snap_failure failure;

    size_t nmodules;
    struct ot_module *modules; /* sorted by start */
    size_t nsymbols;
    struct ot_symbol *symbols;
    size_t npyframes;
    struct ot_pyframe *pyframes;
    size_t nstacks;
    struct ot_stack *stacks;

    bool has_live;
    size_t nlive;
    struct ot_record *live;

    size_t npeaks;
    struct ot_peak *peaks;
    size_t npeak_refs; /* while parsing only */
    struct ot_peak_ref *peak_refs;

    size_t nchunks;
    struct ot_chunk *chunks;
    uint64_t events_offset; /* file offset of the EVENTS section header, for messages */
    uint64_t chunk_events;  /* sum of nevents over the chunks */
    uint64_t max_chunk_raw; /* largest chunk raw_len */

    size_t nmarkers;
    struct snap_marker *markers; /* sorted by seq */
    size_t npools;
    struct snap_pool *pools;
    size_t nmappings;
    struct ot_mapping *mappings;
    size_t nctx_ends;
    struct ot_ctx_end *ctx_ends; /* by seq, ascending */

    bool has_processes;
    uint64_t processes_source;
    struct ot_str processes_note;
    size_t nprocesses;
    struct ot_process *processes;

    size_t nthreads;
    struct snap_thread *threads;

    size_t nborrowed; /* while parsing only: BORROWED's pairs, applied to the stacks after the last section */
    uint64_t *borrowed; /* stack id, lender tid, ... */
    uint64_t borrowed_off;

    /* The frameworks' own view (fw.present), framework.h: the one that shows the snapshot's moment. A view
     * the companion took before changes the snapshot shows (fw_when.c) is in fw_earlier instead, for the
     * reports to show as such; no analysis reads it. */
    struct ot_framework fw;
    struct ot_framework fw_earlier;
    struct ot_fw_when fw_when;
    struct ot_probes probes; /* a framework OOM's retries and probes (probes.present) */

    /* Lookup indexes, built by the parser (ids must be unique). */
    struct ot_u64map stack_index, pyframe_index, symbol_index;

    struct ot_arena arena;
};

/* The memory budget for one snapshot's model, derived from the compressed input, since a few kilobytes of
 * zstd can claim gigabytes: OT_READ_RATIO x the file's size + OT_READ_BASE_MIB MiB, at most OT_READ_CAP_GIB
 * GiB. Decompressed sections and every parsed table count against it, and so do the event chunks' raw
 * bytes (decoded one chunk at a time, but every report walks them all). A snapshot over it is refused with
 * exit 2 and one line. At most OT_READ_MAX_PEAKS peaks (PEAK and PEAK_REF sections, one per device).
 * The ratio admits the tracer's most compressible files: the model takes ~174 bytes per live allocation, and
 * half a million same-sized allocations at sequential addresses take ~2.8 bytes each in the file (~62 x;
 * walk 7, #22: 32 x refused the tracer's own snapshot of 512K-1M live allocations). */
#define OT_READ_RATIO 128u
#define OT_READ_BASE_MIB 32u
#define OT_READ_CAP_GIB 16u
#define OT_READ_MAX_PEAKS 4096u
size_t ot_read_budget(size_t file_len);
/* oomtrace-read --max-memory: one budget for every snapshot instead (0: the default above). */
void ot_read_budget_set(size_t bytes);
size_t ot_read_budget_given(void); /* --max-memory's bytes, 0 when not given */
/* Where a budget comes from, for error lines: "(32 x the file's size + 32 MiB; --max-memory SIZE raises it)". */
const char *ot_read_budget_why(void);

/* The line for a file whose first bytes are not a snapshot's, naming what it looks like where that is known
 * (one of oomtrace-read's own reports passed back, a PyTorch checkpoint, a compressed file): head holds the
 * file's first n bytes (8 are enough). */
void ot_not_a_snapshot(const uint8_t *head, size_t n, char errbuf[OT_ERRBUF]);

/* The parts of a file a reader refuses as it meets their 24-byte header (hdr), at byte off of a file of len
 * bytes, after unknown_before parts of unknown kinds: kind 0, which no writer writes (all zeros: a tail that a
 * crash or a copy zero-filled), and a part of an unknown kind past OT_MAX_UNKNOWN_PARTS. The loader walks a
 * file's headers with it before reading the file whole, so that such a tail is refused at its first bytes,
 * not after gigabytes are read; the parser applies it again to what it is given. -1 with the line in errbuf. */
#define OT_MAX_UNKNOWN_PARTS 1024
#define OT_FILE_HEADER_SIZE 32u
#define OT_SECTION_HEADER_SIZE 24u
int ot_part_refused(const uint8_t hdr[OT_SECTION_HEADER_SIZE], uint64_t off, uint64_t len, size_t unknown_before,
                    char errbuf[OT_ERRBUF]);
/* A part's kind, and the bytes after its header (stored_len), as its header gives them. */
uint32_t ot_part_type(const uint8_t hdr[OT_SECTION_HEADER_SIZE]);
uint64_t ot_part_stored(const uint8_t hdr[OT_SECTION_HEADER_SIZE]);
bool ot_part_known(uint32_t type);

/* Parses buf[0..len) into *snap. Returns 0, or -1 with one line (no trailing newline) in errbuf, in
 * which case *snap holds nothing that needs freeing (ot_snapshot_free is still safe to call). */
int ot_snapshot_parse(const uint8_t *buf, size_t len, struct ot_snapshot *snap, char errbuf[OT_ERRBUF]);
void ot_snapshot_free(struct ot_snapshot *snap);

/* Lookups; NULL when absent. */
const struct ot_stack *ot_snapshot_stack(const struct ot_snapshot *s, uint64_t id);
const struct ot_pyframe *ot_snapshot_pyframe(const struct ot_snapshot *s, uint64_t id);
const struct ot_symbol *ot_snapshot_symbol(const struct ot_snapshot *s, uint64_t address);
const struct ot_module *ot_snapshot_module(const struct ot_snapshot *s, uint64_t address);
const struct snap_device *ot_snapshot_device(const struct ot_snapshot *s, int64_t ordinal);
const struct ot_peak *ot_snapshot_peak(const struct ot_snapshot *s, int64_t device);
/* What the context_end event of this seq freed (CTX_FREED), or NULL when the snapshot does not say. */
const struct ot_ctx_end *ot_snapshot_ctx_end(const struct ot_snapshot *s, uint64_t seq);
/* The thread's recorded name (its kernel comm); NULL when the snapshot names it not or with "". */
const struct snap_thread *ot_snapshot_thread(const struct ot_snapshot *s, uint64_t tid);
/* Markers are sorted by seq: the index of the first with seq >= seq (nmarkers when none); the one with
 * exactly this seq (the ring can hold markers MARKERS no longer keeps); and those strictly before seq,
 * up to max of the latest, as [*first, *first + return). */
size_t ot_snapshot_marker_from(const struct ot_snapshot *s, uint64_t seq);
const struct snap_marker *ot_snapshot_marker(const struct ot_snapshot *s, uint64_t seq);
size_t ot_markers_before(const struct ot_snapshot *s, uint64_t seq, size_t max, size_t *first);


/* The format header's name tables take unsigned; ids from a file are 64-bit and must not wrap into a
 * known id. */
static inline const char *ot_api_name64(uint64_t id)
{
    return id < OT_API_COUNT ? ot_api_name((unsigned)id) : "unknown";
}

static inline const char *ot_category_name64(uint64_t c)
{
    return c < OT_CAT_COUNT ? ot_category_name((unsigned)c) : "unknown";
}

static inline bool ot_category_is_device64(uint64_t c)
{
    return c < OT_CAT_COUNT && ot_category_is_device((unsigned)c);
}

#endif
