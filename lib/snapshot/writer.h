/* The snapshot writer's own declarations, shared by the files of snapshot/ only. One snapshot is written
 * in three steps: gather (gather.c: the driver, NVML, the rank; no lock held), encode (encode.c and
 * live_seq.c: the recorder's state into sections, in memory, while record/ is held still), and file
 * (file.c: naming, compression, I/O, after it is released). trigger.c runs them. */
#ifndef OOMTRACE_SNAPSHOT_WRITER_H
#define OOMTRACE_SNAPSHOT_WRITER_H
#include "common/buf.h"
#include "common/defs.h"
#include "record/rec.h"
#include "record/record.h"
#include "snapshot/nvml.h"

/* ---- gather.c ---- */
struct trace_devinfo {
    int ordinal;
    char name[256];
    unsigned char uuid[16];
    int has_uuid;
    int mem_known;
    size_t total, free;
};

struct trace_poolinfo {
    uint64_t handle;
    int device;
    unsigned flags; /* OT_POOL_* */
    uint64_t reserved, used;
};

struct trace_rank {
    long rank, local, world; /* -1 unknown */
    const char *source;      /* the variable the rank came from */
};

/* What the snapshot says besides the recorder's state, found out before the state is read. */
struct trace_facts {
    struct trace_devinfo *devs; /* OT_MAX_DEVICES of room; NULL without memory */
    int ndevs;
    struct trace_poolinfo pools[OT_MAX_POOLS + 2 * OT_MAX_DEVICES];
    int npools;
    struct ot_nvml *nv; /* other processes; NULL for a flush */
    struct trace_rank rk;
};

/* -1 when the recorder could not be held (bounded: see ot_record_hold). */
int ot_gather(struct trace_facts *f, int flush, int bounded);
void ot_gather_free(struct trace_facts *f);
void ot_gather_rank(struct trace_rank *r);
void ot_gather_cmdline(struct ot_buf *b); /* argc, then each argument */

/* ---- encode.c, live_seq.c ---- */
struct trace_section {
    uint32_t type;
    struct ot_buf b;
};
#define OT_MAX_SECTIONS (20 + OT_MAX_DEVICES)
struct trace_sections {
    int n;
    struct trace_section s[OT_MAX_SECTIONS];
};

/* Every section of one snapshot, in file order, and the failure it reports (failed->valid = 0: none): mine, the
 * out-of-memory trigger's own (NULL: none); -1 when the recorder could not be held. */
int ot_encode(struct trace_sections *secs, const struct trace_facts *f, enum ot_trigger trigger, const char *reason,
              unsigned seq, int bounded, const struct trace_failure *mine, struct trace_failure *failed);
void ot_sections_free(struct trace_sections *secs);

/* The writer's record, field by field in the order of OT_RECORD_FIELDS. */
#define REC_address(r) (r)->key
#define REC_size(r) (r)->size
#define REC_device(r) (uint64_t)(int64_t)(r)->device
#define REC_category(r) (r)->cat
#define REC_api(r) (r)->api
#define REC_flags(r) (r)->flags
#define REC_stack_id(r) (r)->stack
#define REC_tid(r) (r)->tid
#define REC_time_ns(r) (r)->time_ns
#define REC_seq(r) (r)->seq
void ot_encode_rec(struct ot_buf *b, const struct ot_rec *r);

/* The live set (LIVE_SEQ, or LIVE without memory for it), and how many of its records each device's peak
 * set shares. Returns the section type written. The recorder is held. */
uint32_t ot_encode_live(struct ot_buf *b, uint64_t peak_shared[OT_MAX_DEVICES]);

/* ---- file.c ---- */
/* Writes the sections to a new file in OOMTRACE_DIR (a flush: over the last flush), named in path; says
 * what went wrong on stderr. 0 when written. */
#define OT_PATH_MAX 1024
/* Writes and publishes one snapshot of at most `room` bytes (0: any size); 0 on success, OT_FILE_NO_ROOM when
 * it would not fit (nothing is left behind), -1 on another failure (said on stderr). `*written` gets the
 * size of the file published. */
#define OT_FILE_NO_ROOM (-2)
int ot_file_write(const struct trace_sections *secs, enum ot_trigger trigger, unsigned seq,
                  const struct trace_rank *rk, char path[OT_PATH_MAX], unsigned long long room,
                  unsigned long long *written);
#endif
