/* Frame rules from call-frame information, for the native walk (backtrace.c). */
#ifndef OOMTRACE_CFI_H
#define OOMTRACE_CFI_H
#include <stdint.h>

enum { OT_RULE_EMPTY = 0, OT_RULE_OK, OT_RULE_LAST, OT_RULE_UNKNOWN };
enum { OT_CFA_RSP = 0, OT_CFA_RBP, OT_CFA_DEREF_RBP };
enum { OT_RBP_SAME = 0, OT_RBP_AT_CFA, OT_RBP_AT_RBP, OT_RBP_UNDEF };

/* How to reach the caller's frame from the frame at one code address:
 *   CFA = rsp + cfa_off | rbp + cfa_off | *(rbp + cfa_off)       (cfa_reg)
 *   caller's pc = *(CFA - 8), caller's rsp = CFA
 *   caller's rbp = rbp | *(CFA + rbp_off) | *(rbp + rbp_off)      (rbp_how)
 * OT_RULE_LAST: the outermost frame (its return address is undefined). OT_RULE_UNKNOWN: no rule of
 * this form (no unwind information, a signal frame, or rules in other registers). */
struct ot_frame_rule {
    uint64_t pc;
    int32_t cfa_off, rbp_off;
    uint8_t kind, cfa_reg, rbp_how;
    uint32_t at; /* the walk's own use (backtrace.c: where a kept step for pc may be); 0 from ot_cfi_rule */
};

/* The rule at pc (a return address minus one, or the walk's own exact starting point). */
void ot_cfi_rule(uint64_t pc, struct ot_frame_rule *out);
#endif
