/* Native backtraces of the calling thread (backtrace.c). */
#ifndef OOMTRACE_CAPTURE_BACKTRACE_H
#define OOMTRACE_CAPTURE_BACKTRACE_H
#include <stddef.h>
#include <stdint.h>

/* The calling thread's return addresses at *out (frames, or a kept walk's), shifted left by one: backtrace.c */
int ot_backtrace_at(uint64_t *frames, int max, unsigned *flags, const uint64_t **out);
int ot_backtrace(uint64_t *frames, int max, unsigned *flags); /* the same, always in frames */
void ot_backtrace_init(void);
/* raw return addresses from the caller out, at most want (and OT_MAX_FRAMES); -1: use libunwind */
int ot_native_walk(uint64_t *frames, int want);
/* Which walk kept by place (backtrace.c: struct place_memo) gave the frames the thread's last ot_backtrace
 * returned, replayed or kept by that walk: a number never given to another fill of a memo on this thread,
 * so that the capture's next stage can key what it made from those frames by it (pyframes.c); 0 when none
 * did (a walk followed its rules, libunwind, a walk not kept). */
uint64_t ot_backtrace_place(void);
/* Bytes of this thread's stack below the caller's frame; SIZE_MAX where unknown (on another stack). The
 * tracer's deep work checks it, so that threads with small stacks (PTHREAD_STACK_MIN, 16 KiB) never
 * overflow in it: libunwind's backtrace needs OT_UNWIND_STACK, a snapshot's writer OT_WRITER_STACK (both
 * with a wide margin over what docs/RELIABILITY.md measured). */
size_t ot_stack_room(void);
/* The top (highest address) of this thread's stack, when this thread has captured a stack before; 0 if not. */
uint64_t ot_stack_top(void);
#define OT_UNWIND_STACK (24 * 1024)
#define OT_WRITER_STACK (128 * 1024)
#endif
