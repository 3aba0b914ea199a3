/* Interned backtraces: each distinct stack once, by id (stacks.c). */
#ifndef OOMTRACE_CAPTURE_STACKS_H
#define OOMTRACE_CAPTURE_STACKS_H
#include <stdint.h>

/* A stack's flags carry, above the file's OT_STACK_* bits, the OS thread id it borrowed its Python frames
 * from (OT_STACK_BORROWED; 0 unknown): two lenders with the same frames make two stacks. The snapshot
 * writes the bits below the shift in STACKS, the lender in BORROWED. */
#define OT_STACK_LENDER_SHIFT 8
#define OT_STACK_LENDER_MAX 0xffffffu
uint32_t ot_stack_intern(const uint64_t *frames, int n, unsigned flags); /* caller holds ot_lock */
struct ot_stack_view {
    const uint64_t *frames;
    uint32_t n;
    uint32_t flags;
};
uint32_t ot_stack_count(void);
int ot_stack_get(uint32_t id, struct ot_stack_view *out);
#endif
