#ifndef OOMTRACE_NVML_H
#define OOMTRACE_NVML_H
#include <stdint.h>

#include "common/defs.h"

#define OT_NVML_MAX_PROCS 128

struct ot_nvml_device {
    int ordinal;
    int has_uuid;
    unsigned char uuid[16];
};

struct ot_nvml_proc {
    int device;
    unsigned pid;
    int used_known;
    uint64_t used;
    char name[64];
    char command[160];
    int relation;    /* enum ot_process_relation */
    int name_source; /* enum ot_process_name_source */
    int relation_fixed; /* the relation was decided while naming it (NVML named it: unknown) */
};

struct ot_nvml {
    int source;      /* enum ot_processes_source */
    char note[160];  /* why the list is empty or partial */
    int nprocs;
    struct ot_nvml_proc procs[OT_NVML_MAX_PROCS];
    struct {
        int known;
        uint64_t total, free;
    } mem[OT_MAX_DEVICES]; /* indexed like the devices passed in */
};

/* Lists the compute processes on each device (by UUID), and each device's memory. Never fails: what it
 * could not learn is said in note. */
void ot_nvml_query(struct ot_nvml *out, const struct ot_nvml_device *devs, int ndevs);
/* In a forked child: the query's lock may have been held by a thread of the parent. */
void ot_nvml_forked(void);
#endif
