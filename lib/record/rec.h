/* The allocation record: kept by record/ (record.h), passed by the hooks as a request. */
#ifndef OOMTRACE_RECORD_REC_H
#define OOMTRACE_RECORD_REC_H
#include <stdint.h>

enum ot_ns { OT_NS_DEVPTR = 0, OT_NS_VMM = 1, OT_NS_HOST = 2, OT_NS_ARRAY = 3 };

struct ot_rec {
    uint64_t key; /* address, or handle */
    uint64_t size;
    uint64_t seq;
    uint64_t time_ns;
    uint32_t stack;
    uint32_t tid;
    int16_t device;
    uint8_t cat;
    uint8_t ns;
    uint16_t api;
    uint16_t flags;
    uint32_t refs; /* VMM: references (create, retain) */
    uint32_t maps; /* VMM: live mappings */
    uint64_t ctx;  /* the CUcontext it was made in, whose end frees it; 0: it belongs to none (stream-ordered
                    * pool memory, cuMemCreate's, as the driver documents) */
};

struct ot_alloc_req {
    uint8_t ns;
    uint8_t cat;
    uint16_t api;
    uint16_t flags;
    int device;
    uint64_t key;
    uint64_t size;
    uint64_t ctx; /* as ot_rec's; left 0 by the requests of kinds that belong to no context */
};
#endif
