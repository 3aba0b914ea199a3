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
/* The id a capture cache entry's frames were interned as, with the flags they were interned with (id 0:
 * not yet). A capture whose frames came from such an entry (pyframes.c: the merged stacks by place) names
 * it in ot_stack_hint; the thread's next ot_stack_intern takes the id from it when the flags are the
 * same, without hashing or comparing the frames, and otherwise fills it in. The entry's owner zeroes id
 * whenever it changes the entry's frames; ids are never reused (the table only grows). */
struct ot_stack_memo {
    uint32_t id;
    unsigned flags;
};
extern __thread struct ot_stack_memo *ot_stack_hint __attribute__((tls_model("initial-exec")));
struct ot_stack_view {
    const uint64_t *frames;
    uint32_t n;
    uint32_t flags;
};
uint32_t ot_stack_count(void);
int ot_stack_get(uint32_t id, struct ot_stack_view *out);
#endif
