/* The frameworks' own view of memory (PyTorch's caching allocator, JAX/XLA, CuPy), as the Python
 * companion last reported it, and the list of driver-level OOM snapshots that came before a framework's
 * own OOM. docs/FORMAT.md ("Framework view", "Probes") specifies the bytes.
 *
 * Every array is flat across the payload's records; each item names its framework ("torch", "jax",
 * "cupy"). Strings point into the snapshot's payload and live as long as the snapshot. */
#ifndef OT_READ_FRAMEWORK_H
#define OT_READ_FRAMEWORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oomtrace_format.h"
#include "model/util.h"

struct ot_fw_info {
    struct ot_str framework, version;
    struct ot_str reason; /* "oom", "exit", "api", "driver-oom" */
    uint64_t taken_ns;    /* CLOCK_MONOTONIC ns, the tracer's clock */
    uint64_t collect_ns;  /* how long the collection took */
};

struct ot_fw_stat {
    struct ot_str key;
    int64_t value;
};

/* One STATS record: a framework's counters for one device (OT_FW_DEVICE_ALL: not per device). */
struct ot_fw_stats {
    struct ot_str framework;
    uint64_t device;
    size_t n;
    struct ot_fw_stat *v;
};

struct ot_fw_setting {
    struct ot_str key, value;
};

struct ot_fw_settings {
    struct ot_str framework;
    size_t n;
    struct ot_fw_setting *v;
};

/* A caching-allocator segment: memory the framework reserved from the driver. */
struct ot_fw_segment {
    struct ot_str framework;
    uint64_t device, address, total_size, allocated_size, requested_size, stream;
    uint64_t pool_id; /* 0: the default pools; else a private (CUDA graph) pool */
    uint64_t flags;   /* OT_FW_SEG_* */
    size_t first_block, nblocks; /* into ot_framework.blocks (flat) */
};

struct ot_fw_frame {
    struct ot_str filename, name;
    uint64_t line;
};

/* A block inside a segment: a tensor's storage (allocated) or a free piece. */
struct ot_fw_block {
    uint64_t address, size, requested_size;
    uint64_t state;  /* enum ot_fw_block_state */
    size_t segment;  /* into ot_framework.segments (flat) */
    size_t nframes;  /* Python frames of the allocation, innermost first (recorder on only) */
    const struct ot_fw_frame *frames;
};

/* JAX live arrays of one (dtype, shape, device). */
struct ot_fw_array {
    struct ot_str framework, dtype, shape;
    uint64_t device, count, bytes;
};

struct ot_fw_error {
    struct ot_str framework, text;
    uint64_t device, request_bytes; /* request_bytes 0: unknown */
};

/* A tensor storage with a role (enum ot_fw_role), deduplicated by address. */
struct ot_fw_role {
    struct ot_str framework;
    uint64_t category;  /* enum ot_fw_role */
    struct ot_str label; /* e.g. "Adam.exp_avg" for optimizer state */
    uint64_t address, bytes;
};

struct ot_fw_step {
    struct ot_str framework;
    uint64_t step, t_ns, allocated_bytes, reserved_bytes;
    struct ot_str input_shapes;
};

struct ot_framework {
    bool present; /* the snapshot had a framework section */
    uint64_t layout_version;
    size_t nrecords, nunknown_records;
    size_t ninfo;
    struct ot_fw_info *info;
    size_t nstats;
    struct ot_fw_stats *stats;
    size_t nsettings;
    struct ot_fw_settings *settings;
    size_t nsegments;
    struct ot_fw_segment *segments; /* in the payload's order */
    size_t nblocks;
    struct ot_fw_block *blocks;
    size_t narrays;
    struct ot_fw_array *arrays;
    size_t nerrors;
    struct ot_fw_error *errors;
    size_t nroles;
    struct ot_fw_role *roles;
    size_t torch_roles_records; /* PyTorch's ROLES records read: one with no entries says the companion's scan
                                 * found no model's tensor on the GPU (none: nothing was scanned) */
    size_t nsteps;
    struct ot_fw_step *steps;
};

/* A driver-level OOM snapshot this process wrote before its framework OOM (a retry or a probe). */
struct ot_probe {
    struct ot_str file_name; /* base name, untrusted */
    uint64_t failure_seq, requested_bytes, device;
};

struct ot_probes {
    bool present;
    size_t n;
    struct ot_probe *v;
};

/* Parse one payload into *out, allocating from the arena. Bounded and linear in len: every count is
 * checked against the bytes that can hold it, every record must be consumed exactly, and indexes
 * between records must point inside. -1 with one line in why when the payload is inconsistent. */
int ot_framework_parse(struct ot_arena *a, const uint8_t *p, size_t len, struct ot_framework *out, char *why,
                       size_t whylen);
int ot_probes_parse(struct ot_arena *a, const uint8_t *p, size_t len, struct ot_probes *out, char *why,
                    size_t whylen);

/* Lookups: a STATS value (false when absent) and a SETTINGS value (p NULL when absent), for one framework
 * and device (OT_FW_DEVICE_ALL: its record for all devices, never another device's). */
bool ot_fw_stat_get(const struct ot_framework *f, const char *framework, uint64_t device, const char *key,
                    int64_t *value);
struct ot_str ot_fw_setting_get(const struct ot_framework *f, const char *framework, const char *key);

const char *ot_fw_kind_name(uint64_t kind);   /* "segments", or "unknown" */
const char *ot_fw_role_name(uint64_t category); /* "parameters", ..., or "unknown" */
const char *ot_fw_block_state_name(uint64_t state);

#endif
