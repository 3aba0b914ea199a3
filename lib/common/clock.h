/* The tracer's clock: CLOCK_MONOTONIC nanoseconds, read from the TSC where it is invariant (clock.c). */
#ifndef OOMTRACE_COMMON_CLOCK_H
#define OOMTRACE_COMMON_CLOCK_H
#include <stdint.h>

uint64_t ot_now_ns(void);  /* the tracer's clock: every time it records (within microseconds of the next) */
uint64_t ot_mono_ns(void); /* clock_gettime(CLOCK_MONOTONIC) itself */
void ot_clock_start(int use_tsc); /* after the options: calibrate the TSC against CLOCK_MONOTONIC */
void ot_clock_forked(void);
int ot_clock_uses_tsc(void);
uint64_t ot_clock_tsc_mult(void); /* the TSC's rate (ns = ticks * mult >> 32); 0 without it */
void ot_clock_tune(uint64_t cal_ns, uint64_t anchor_ns); /* tests: shorter calibration and anchors */
#endif
