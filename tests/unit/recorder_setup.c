/* The recorder's unit test programs' setup (recorder_setup.h). */
#include "recorder_setup.h"

#include "common/options.h"
#include "record/lock.h"
#include "record/record.h"

/* A deterministic generator, so a failure reproduces. */
static uint64_t rng = 88172645463325252ull;
uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The ring's compressor thread, started by an earlier test, reads ot_opt.ring_bytes under ot_lock when it
 * appends a chunk: options are written under the same lock (TSan, make tsan). */
void set_ring_bytes(uint64_t bytes)
{
    ot_lock_take();
    ot_opt.ring_bytes = bytes;
    ot_lock_give();
}

void reset(void)
{
    ot_lock_take();
    ot_opt.depth = 16;
    ot_opt.dump_oom = 0;
    ot_lock_give();
    set_ring_bytes(64 << 20);
    ot_record_reset(0);
}
