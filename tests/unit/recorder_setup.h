/* What the recorder's unit test programs share (recorder_setup.c): a deterministic generator and the
 * recorder's state reset between tests. */
#ifndef OT_TEST_RECORDER_SETUP_H
#define OT_TEST_RECORDER_SETUP_H

#include <stdint.h>

uint64_t next(void);
void set_ring_bytes(uint64_t bytes);
void reset(void);

#endif
